"""Self-healing bash_command (SPEC H12) against a real bash in a temporary workspace."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from cyber_agent.core.tool_maker import LLMToolMaker
from cyber_agent.errors import UnknownToolError
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.tools.builtin import builtin_registry
from cyber_agent.tools.builtin.bash import bash_command
from cyber_agent.tools.builtin.self_heal import (
    POLYFILL_DIR,
    SelfHealingBash,
    detect_missing_commands,
    extract_script,
    register_self_healing_bash,
)
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry

FROBNICATE = '#!/usr/bin/env bash\necho "frobnicated: $*"\n'


class ScriptedToolMaker:
    """Plays scripts in order (or by command name when given a dict) and records each (command, error)."""

    def __init__(self, *scripts: str | None, by_name: dict[str, str] | None = None) -> None:
        self.scripts = list(scripts)
        self.by_name = by_name or {}
        self.calls: list[tuple[str, str]] = []

    def __call__(self, command_name: str, error: str) -> str | None:
        self.calls.append((command_name, error))
        if command_name in self.by_name:
            return self.by_name[command_name]
        return self.scripts.pop(0)


def run(registry: ToolRegistry, ctx: ToolContext, command: str):
    return registry.execute("bash_command", {"command": command}, allowed={"bash_command"}, context=ctx)


async def test_a_missing_command_gets_a_polyfill_and_the_retry_succeeds(ctx: ToolContext, workspace: Path):
    maker = ScriptedToolMaker(FROBNICATE)
    registry = register_self_healing_bash(builtin_registry(["bash_command"]), maker)
    result = await run(registry, ctx, "frobnicate --all x")
    assert not result.is_error
    assert result.content.startswith("frobnicated: --all x\n[exit code: 0]\n[self-heal: installed polyfill")
    heal = result.metadata["self_heal"]
    assert heal["status"] == "healed" and heal["commands"] == ["frobnicate"] and heal["attempts"] == 1
    polyfill = workspace / POLYFILL_DIR / "frobnicate"
    assert heal["polyfills"] == [".cyber_agent/bin/frobnicate"]
    assert polyfill.read_text() == FROBNICATE and os.access(polyfill, os.X_OK)
    name, error = maker.calls[0]
    assert name == "frobnicate" and error.startswith("$ frobnicate --all x\n") and "command not found" in error
    # Later commands in the workspace find the polyfill without asking again.
    later = await run(registry, ctx, "frobnicate again")
    assert later.content == "frobnicated: again\n[exit code: 0]" and "self_heal" not in later.metadata
    assert len(maker.calls) == 1


async def test_healing_is_bounded_to_two_attempts_per_command_when_the_polyfill_keeps_failing(ctx: ToolContext):
    broken = "#!/nonexistent/interpreter\necho never\n"
    maker = ScriptedToolMaker(broken, broken)
    registry = register_self_healing_bash(builtin_registry(["bash_command"]), maker)
    result = await run(registry, ctx, "frobnicate")
    assert [c[0] for c in maker.calls] == ["frobnicate", "frobnicate"]
    heal = result.metadata["self_heal"]
    assert heal["status"] == "gave_up" and heal["attempts"] == 2 and heal["command"] == "frobnicate"
    assert "2 polyfill attempt(s) for 'frobnicate' already used" in heal["reason"]
    assert result.metadata["exit_code"] in (126, 127)
    # The limit holds for the rest of the run: no third request.
    again = await run(registry, ctx, "frobnicate")
    assert again.metadata["self_heal"]["status"] == "gave_up" and len(maker.calls) == 2


async def test_commands_that_exist_are_untouched(ctx: ToolContext):
    maker = ScriptedToolMaker()
    healing = register_self_healing_bash(builtin_registry(["bash_command"]), maker)
    plain = builtin_registry(["bash_command"])
    for command in ("echo hello; exit 3", "cat missing-file.txt", "nosuchcmd || true"):
        healed, raw = await run(healing, ctx, command), await run(plain, ctx, command)
        assert (healed.content, healed.is_error) == (raw.content, raw.is_error)
        assert "self_heal" not in healed.metadata
    assert maker.calls == []


async def test_a_tool_maker_without_a_script_gives_up_with_the_original_result(ctx: ToolContext, workspace: Path):
    maker = ScriptedToolMaker(None)
    registry = register_self_healing_bash(builtin_registry(["bash_command"]), maker)
    result = await run(registry, ctx, "frobnicate")
    assert result.metadata["exit_code"] == 127 and "frobnicate: command not found" in result.content
    assert result.metadata["self_heal"]["status"] == "gave_up"
    assert "returned no script" in result.metadata["self_heal"]["reason"]
    assert not (workspace / POLYFILL_DIR / "frobnicate").exists()


async def test_each_missing_command_of_a_pipeline_is_healed(ctx: ToolContext):
    # Both stages of a pipeline fail at once and bash reports them in either order: answer by name.
    maker = ScriptedToolMaker(by_name={"makeone": "echo one", "maketwo": "#!/usr/bin/env bash\nsed 's/one/two/'"})
    registry = register_self_healing_bash(builtin_registry(["bash_command"]), maker)
    # With pipefail a missing early stage fails the pipeline too, so it is seen even when bash
    # reports only the last stage's error the first time round.
    result = await run(registry, ctx, "set -o pipefail; makeone | maketwo")
    assert result.content.startswith("two\n[exit code: 0]")
    assert sorted(result.metadata["self_heal"]["commands"]) == ["makeone", "maketwo"]


async def test_approval_gated_bash_is_never_healed(ctx: ToolContext, workspace: Path):
    maker = ScriptedToolMaker(FROBNICATE)
    registry = register_self_healing_bash(builtin_registry(["bash_command"], confirm=["bash_command"]), maker)
    spec = registry.get("bash_command")
    assert spec is not None and spec.requires_confirmation and spec.editable_params == ("command", "timeout")
    result = await run(registry, ctx, "frobnicate")
    assert result.metadata["self_heal"]["status"] == "skipped" and maker.calls == []
    assert not (workspace / POLYFILL_DIR).exists()


def test_the_wrapped_tool_keeps_name_schema_and_side_effects():
    original = builtin_registry()
    healed = register_self_healing_bash(original, ScriptedToolMaker())
    assert healed.names() == original.names()
    before, after = original.get("bash_command"), healed.get("bash_command")
    assert before is not None and after is not None
    assert after.schema() == before.schema() and after.side_effects is True and after.category == "shell"
    assert isinstance(after.func, SelfHealingBash) and before.func is bash_command
    with pytest.raises(UnknownToolError):
        register_self_healing_bash(ToolRegistry(), ScriptedToolMaker())


async def test_attempts_are_counted_per_run(ctx: ToolContext):
    maker = ScriptedToolMaker(None, None, None)
    registry = register_self_healing_bash(builtin_registry(["bash_command"]), maker)
    healer = registry.get("bash_command").func
    await run(registry, ctx, "frobnicate")
    await run(registry, ctx, "frobnicate")
    await run(registry, ctx, "frobnicate")
    assert len(maker.calls) == 2 and healer.attempts(ctx.trace_id, "frobnicate") == 2
    other = dataclasses.replace(ctx, trace_id="another-run")
    await run(registry, other, "frobnicate")
    assert len(maker.calls) == 3


async def test_llm_tool_maker_uses_the_tool_maker_prompt(ctx: ToolContext):
    reply = "Here it is:\n```bash\n" + FROBNICATE + "```"
    with ScriptedModel([reply]) as model:
        registry = register_self_healing_bash(builtin_registry(["bash_command"]), LLMToolMaker(model, "coder-model"))
        result = await run(registry, ctx, "frobnicate z")
    assert result.content.startswith("frobnicated: z")
    request = model.requests[0]
    assert "tool maker" in request.messages[0]["content"] and request.messages[1]["content"].startswith("Missing command: frobnicate")


def test_detection_and_extraction_rules(tmp_path: Path):
    assert detect_missing_commands("bash: line 1: foo: command not found\n", 127) == ["foo"]
    assert detect_missing_commands("sh: 1: bar: not found\n", 127) == ["bar"]
    assert detect_missing_commands("bash: foo: command not found\n", 0) == []
    assert detect_missing_commands("bash: ./build.sh: No such file or directory\n", 127) == []
    broken = f"bash: {tmp_path}/frob: cannot execute: required file not found\n"
    assert detect_missing_commands(broken, 127, polyfill_dir=tmp_path) == ["frob"]
    assert extract_script("NO_POLYFILL") is None
    assert extract_script("I would rather not.") is None
    assert extract_script("```sh\necho hi\n```") == "echo hi"
    assert extract_script("#!/bin/sh\necho hi") == "#!/bin/sh\necho hi"
