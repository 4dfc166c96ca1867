"""The package imports and the demo command runs."""

from cyber_agent.cli import main


def test_demo_runs(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "2 messages" in out
