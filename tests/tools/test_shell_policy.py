"""`RunConfig.shell_tools`: off hides shell tools from the run and its sub-agents, confirm waits for a reviewer."""

from __future__ import annotations

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.tools.builtin import builtin_registry
from cyber_agent.tools.shell_policy import shell_policy_view, shell_tool_names
from cyber_agent.trace import InMemoryTraceStore


def _offered(request) -> set[str]:
    return {t["function"]["name"] for t in request.tools or []}


def test_the_view_hides_or_gates_only_shell_tools():
    registry = builtin_registry()
    assert shell_tool_names(registry) == ["bash_command"]
    assert shell_policy_view(registry, "allow") is registry
    assert set(shell_policy_view(registry, "off").names()) == set(registry.names()) - {"bash_command"}
    gated = shell_policy_view(registry, "confirm")
    assert [s.name for s in gated if s.requires_confirmation] == ["bash_command"]
    assert not registry.get("bash_command").requires_confirmation  # the runner's registry is untouched


async def test_off_keeps_the_shell_from_the_model_and_from_sub_agents(tmp_path):
    model = ScriptedModel([
        ScriptedModel.tool_call("agent", {"task": "look around"}),
        "child done",  # the delegate's answer
        "parent done",
    ])
    runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, workspace=tmp_path)
    with model:
        result = await runner.run_result([{"role": "user", "content": "go"}], RunConfig(shell_tools="off"))
    assert result.trace.status == "completed"
    assert all("bash_command" not in _offered(r) for r in model.requests)
    assert "read_file" in _offered(model.requests[1])  # the child got tools, just not the shell
    children = await runner.trace_store.list_traces(parent_trace_id=result.trace.trace_id)
    assert [c.run_config.config["shell_tools"] for c in children] == ["off"]


async def test_confirm_puts_a_shell_call_before_a_reviewer_and_runs_nothing(tmp_path):
    model = ScriptedModel([ScriptedModel.tool_call("bash_command", {"command": "touch ran"})])
    runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, workspace=tmp_path)
    with model:
        result = await runner.run_result([{"role": "user", "content": "go"}], RunConfig(shell_tools="confirm"))
    assert result.trace.status == "waiting_confirmation" and not (tmp_path / "ran").exists()
    assert result.trace.run_config.config["shell_tools"] == "confirm"


def test_confirm_stops_a_self_healing_shell_from_installing_unreviewed_polyfills():
    from cyber_agent.tools.builtin.self_heal import register_self_healing_bash

    def never(command_name: str, error: str) -> str:
        raise AssertionError("no polyfill may be asked for")

    healing = register_self_healing_bash(builtin_registry(), never)
    assert healing.get("bash_command").func.enabled
    gated = shell_policy_view(healing, "confirm").get("bash_command")
    assert gated.requires_confirmation and gated.func.enabled is False
    assert healing.get("bash_command").func.enabled  # the original wrapper is untouched
