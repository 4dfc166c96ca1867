"""The served API speaks to users: no internal labels in /openapi.json; runs record their shell policy."""

from __future__ import annotations

import json
import re

from live_server import start_run, wait_idle

INTERNAL = [r"seed \d{3}", r"\((?:[AHJT]\d{1,2}[,)–-])", r"`cyber_agent/", r"docs/[\w-]+\.md", r"SPEC"]


def test_the_openapi_text_has_no_internal_labels(client):
    text = json.dumps(client.get("/openapi.json").json(), ensure_ascii=False)
    for pattern in INTERNAL:
        found = re.search(pattern, text)
        assert found is None, f"{pattern!r} in /openapi.json: …{text[max(found.start() - 80, 0):found.end() + 40]}…"
    assert "Shell tools (bash_command)" in text  # the request's shell_tools field is described


def test_a_run_started_over_http_asks_before_shell_commands_unless_told_otherwise(client):
    asked = wait_idle(client, start_run(client, "echo hello"))
    assert asked["run_config"]["config"]["shell_tools"] == "confirm"
    off = wait_idle(client, start_run(client, "echo hello", shell_tools="off"))
    assert off["run_config"]["config"]["shell_tools"] == "off"
    refused = client.post("/api/traces", json={"messages": [{"role": "user", "content": "x"}], "shell_tools": "yes"})
    assert refused.status_code == 422
