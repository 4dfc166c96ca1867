"""Archetypes (SPEC H7): built-ins load, workspace files override by id, tier rules refuse bad
sets at load naming the file, the spawn-depth guard holds, and tool filtering narrows."""

from __future__ import annotations

from pathlib import Path

import pytest

from cyber_agent.core.archetypes import (
    MAX_SPAWN_DEPTH,
    AgentDefinition,
    ArchetypeLoadError,
    ArchetypeRegistry,
    SpawnDepthExceededError,
    SpawnGuard,
    SpawnRefusedError,
    load_definition,
    tier_allows,
)
from cyber_agent.core.config import RunConfig
from cyber_agent.errors import ConfigurationError

BUILTINS = {"orchestrator", "planner", "researcher", "coder", "summarizer", "tool_maker", "trigger_reactor"}


def write_agent(workspace: Path, agent_id: str, toml: str, prompt: str | None = "You are a test agent.") -> Path:
    folder = workspace / ".cyber_agent" / "agents" / agent_id
    folder.mkdir(parents=True)
    path = folder / "agent.toml"
    path.write_text(toml, encoding="utf-8")
    if prompt is not None:
        (folder / "prompt.md").write_text(prompt, encoding="utf-8")
    return path


def refusal(workspace: Path) -> ArchetypeLoadError:
    with pytest.raises(ArchetypeLoadError) as info:
        ArchetypeRegistry.load(workspace)
    return info.value


# ---- built-ins ---------------------------------------------------------------------------
def test_builtins_load_with_tiers_prompts_and_sources():
    registry = ArchetypeRegistry.load()
    assert set(registry.ids()) == BUILTINS
    assert registry.require("orchestrator").tier == "chat"
    assert {registry.require(i).tier for i in ("planner", "researcher")} == {"reasoning"}
    assert {registry.require(i).tier for i in ("coder", "summarizer", "tool_maker", "trigger_reactor")} == {"worker"}
    for definition in registry:
        assert definition.prompt.strip() and definition.description.strip()
        assert definition.origin == "builtin"
        assert definition.source is not None and definition.source.name == "agent.toml"
        assert definition.source.parent.name == definition.id
    assert "polyfill" in registry.require("tool_maker").prompt


def test_builtins_are_parsed_once_and_overrides_stay_per_registry(tmp_path: Path):
    """The shipped files are read once per process; a workspace override never leaks into the shared set."""
    first, second = ArchetypeRegistry.load(), ArchetypeRegistry.load()
    assert first.require("coder") is second.require("coder")  # frozen definitions, shared
    agents = tmp_path / ".cyber_agent" / "agents" / "coder"
    agents.mkdir(parents=True)
    (agents / "agent.toml").write_text('description = "workspace coder"\nprompt = "Code."\n')
    assert ArchetypeRegistry.load(tmp_path).require("coder").origin == "workspace"
    assert ArchetypeRegistry.load().require("coder").origin == "builtin"


def test_builtins_obey_the_tier_rules():
    registry = ArchetypeRegistry.load()
    for parent in registry:
        for child_id in parent.can_spawn:
            assert tier_allows(parent.tier, registry.require(child_id).tier)
        if parent.tier == "worker":
            assert parent.can_spawn == ()


def test_require_names_the_known_ids():
    with pytest.raises(ConfigurationError, match="no archetype 'nope'; known: coder"):
        ArchetypeRegistry.load().require("nope")


# ---- workspace overrides -----------------------------------------------------------------
def test_workspace_definition_overrides_a_builtin_by_id(tmp_path: Path):
    path = write_agent(tmp_path, "coder", 'tier = "worker"\ndescription = "Local coder."\ntools = ["bash_command"]\n',
                       prompt="You write Rust only.")
    registry = ArchetypeRegistry.load(tmp_path)
    coder = registry.require("coder")
    assert coder.prompt == "You write Rust only."
    assert coder.origin == "workspace" and coder.source == path
    assert coder.tools == ("bash_command",)
    assert registry.require("planner").origin == "builtin"  # the others stay built in


def test_workspace_adds_a_new_agent_with_an_inline_prompt(tmp_path: Path):
    write_agent(tmp_path, "critic", 'description = "Reviews code."\nprompt = "Be harsh."\n', prompt=None)
    critic = ArchetypeRegistry.load(tmp_path).require("critic")
    assert critic.tier == "worker" and critic.max_iterations == 8 and critic.tools == ("*",)
    assert critic.prompt == "Be harsh."


def test_a_workspace_without_agents_gives_the_builtins(tmp_path: Path):
    assert set(ArchetypeRegistry.load(tmp_path).ids()) == BUILTINS


# ---- tier rules refuse at load, naming the file ------------------------------------------
def test_worker_that_spawns_is_refused_naming_its_file(tmp_path: Path):
    path = write_agent(tmp_path, "helper", 'description = "d"\ntier = "worker"\ncan_spawn = ["coder"]\n')
    error = refusal(tmp_path)
    assert error.path == path
    assert str(path) in str(error) and "a worker spawns nothing" in str(error)


def test_tier_spawning_its_own_tier_is_refused(tmp_path: Path):
    path = write_agent(tmp_path, "deep_thinker", 'description = "d"\ntier = "reasoning"\ncan_spawn = ["planner"]\n')
    error = refusal(tmp_path)
    assert error.path == path
    assert "'deep_thinker' (tier reasoning) may not spawn 'planner' (tier reasoning" in str(error)
    assert "strictly lower tiers" in str(error)


def test_tier_spawning_a_higher_tier_is_refused(tmp_path: Path):
    path = write_agent(tmp_path, "climber", 'description = "d"\ntier = "reasoning"\ncan_spawn = ["orchestrator"]\n')
    error = refusal(tmp_path)
    assert error.path == path and "strictly lower tiers" in error.rule


def test_unknown_spawn_target_is_refused(tmp_path: Path):
    path = write_agent(tmp_path, "boss", 'description = "d"\ntier = "chat"\ncan_spawn = ["ghost"]\n')
    error = refusal(tmp_path)
    assert error.path == path and "unknown agent 'ghost'" in str(error)


def test_an_override_that_breaks_a_builtin_names_both_files(tmp_path: Path):
    # The orchestrator (chat) may spawn coder; a coder overridden to chat breaks that edge.
    override = write_agent(tmp_path, "coder", 'description = "d"\ntier = "chat"\n')
    error = refusal(tmp_path)
    assert error.path.parent.name == "orchestrator"
    assert str(override) in str(error)


def test_malformed_toml_is_refused_naming_the_file(tmp_path: Path):
    path = write_agent(tmp_path, "broken", 'description = "unterminated\n')
    error = refusal(tmp_path)
    assert error.path == path and "malformed TOML" in str(error)


def test_unknown_field_is_refused_naming_the_file(tmp_path: Path):
    path = write_agent(tmp_path, "extra", 'description = "d"\nagent_tier = "worker"\n')
    error = refusal(tmp_path)
    assert error.path == path and "unknown field(s) ['agent_tier']" in str(error)


@pytest.mark.parametrize(("toml", "needle"), [
    ('description = "d"\ntier = "boss"\n', "tier"),
    ('description = "d"\nmax_iterations = 0\n', "max_iterations"),
    ('tier = "worker"\n', "description"),
    ('id = "other"\ndescription = "d"\n', "must equal its directory name"),
    ('description = "d"\nsource = "/etc/passwd"\n', "unknown field"),
])
def test_invalid_values_are_refused_naming_the_file(tmp_path: Path, toml: str, needle: str):
    path = write_agent(tmp_path, "bad", toml)
    error = refusal(tmp_path)
    assert error.path == path and needle in str(error)


def test_missing_prompt_and_flat_files_are_refused(tmp_path: Path):
    path = write_agent(tmp_path, "mute", 'description = "d"\n', prompt=None)
    assert refusal(tmp_path).path == path
    flat = tmp_path / "other"
    (flat / ".cyber_agent" / "agents").mkdir(parents=True)
    (flat / ".cyber_agent" / "agents" / "solo.toml").write_text('description = "d"\n')
    assert "solo/agent.toml" in str(refusal(flat))


def test_load_definition_reads_one_file(tmp_path: Path):
    path = write_agent(tmp_path, "one", 'description = "d"\nmodel_hint = "fast"\ndisallowed_tools = ["x"]\n')
    definition = load_definition(path)
    assert definition.id == "one" and definition.model_hint == "fast" and definition.disallowed_tools == ("x",)


# ---- runtime guards ----------------------------------------------------------------------
def test_spawn_guard_caps_depth_independent_of_tiers():
    guard = SpawnGuard()
    assert guard.max_depth == MAX_SPAWN_DEPTH == 3
    for depth in range(0, 4):
        guard.check(depth)
    with pytest.raises(SpawnDepthExceededError) as info:
        guard.check(4)
    assert (info.value.attempted_depth, info.value.max_depth) == (4, 3)
    assert "depth 4 exceeds the maximum spawn depth 3" in str(info.value)
    assert SpawnGuard(max_depth=1).child_depth(0) == 1
    with pytest.raises(SpawnDepthExceededError):
        SpawnGuard(max_depth=1).child_depth(1)
    with pytest.raises(ConfigurationError):
        SpawnGuard(max_depth=-1)


def test_check_spawn_follows_can_spawn():
    registry = ArchetypeRegistry.load()
    assert registry.check_spawn("orchestrator", "planner").id == "planner"
    with pytest.raises(SpawnRefusedError, match="'coder' may spawn only: none"):
        registry.check_spawn("coder", "summarizer")
    with pytest.raises(SpawnRefusedError, match="'planner' may spawn only"):
        registry.check_spawn("planner", "researcher")
    with pytest.raises(SpawnRefusedError, match="no archetype 'ghost'"):
        registry.check_spawn("orchestrator", "ghost")
    assert registry.check_spawn("main", "coder").id == "coder"  # a plain run is not tier-bound


# ---- tool filtering ----------------------------------------------------------------------
AVAILABLE = ["goal", "read_file", "list_files", "bash_command", "evaluate", "agent"]


def make(**fields: object) -> AgentDefinition:
    return AgentDefinition(**{"id": "t", "description": "d", "prompt": "p", **fields})


def test_tool_names_apply_the_allow_list_then_the_deny_list():
    assert make(tools=["read_file", "bash_command", "web_search"]).tool_names(AVAILABLE) == {"read_file", "bash_command"}
    assert make(tools=["*"], disallowed_tools=["bash_command"], can_spawn=["x"]).tool_names(AVAILABLE) == \
        set(AVAILABLE) - {"bash_command"}
    assert make(tools=[]).tool_names(AVAILABLE) == frozenset()


def test_an_agent_that_spawns_nobody_never_sees_the_agent_tool():
    assert "agent" not in make(tools=["*"]).tool_names(AVAILABLE)
    assert "agent" not in make(tools=["agent", "goal"]).tool_names(AVAILABLE)
    assert "agent" in make(tools=["*"], tier="chat", can_spawn=["coder"]).tool_names(AVAILABLE)


def test_apply_to_shapes_a_run_config_where_the_caller_was_silent():
    coder = ArchetypeRegistry.load().require("coder")
    config = coder.apply_to(RunConfig(model="demo"), AVAILABLE)
    assert config.agent_type == "coder" and config.system_prompt == coder.prompt
    assert config.max_iterations == coder.max_iterations
    assert config.tools == ["bash_command", "evaluate", "list_files", "read_file"]
    mine = coder.apply_to(RunConfig(max_iterations=2, system_prompt="custom", tools=["bash_command", "agent"]), AVAILABLE)
    assert (mine.max_iterations, mine.system_prompt, mine.tools) == (2, "custom", ["bash_command"])
