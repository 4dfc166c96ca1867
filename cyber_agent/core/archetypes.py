"""Agent archetypes declared as files, their tiers and the spawn-depth guard (SPEC H7).

An archetype is a directory holding `agent.toml` (metadata, tool scope, model hint, limits,
whom it may spawn) and `prompt.md` (its system prompt; or an inline `prompt = "..."`):

    cyber_agent/archetypes/<id>/agent.toml          built-ins, shipped as package data
    <workspace>/.cyber_agent/agents/<id>/agent.toml  workspace definitions; same id replaces the built-in

`agent.toml` fields (anything else refuses to load):

    id = "planner"                  optional; must equal the directory name
    tier = "reasoning"              chat | reasoning | worker (default worker)
    description = "..."             required: when to pick this agent
    tools = ["read_file", "agent"]  allow-list; ["*"] (the default) means every available tool
    disallowed_tools = []           removed after the allow-list
    model_hint = "reasoning"        advisory label the caller maps to a model; absent = inherit
    max_iterations = 12             default 8
    can_spawn = ["coder"]           ids this agent may start
    prompt = "..."                  inline prompt; otherwise prompt.md next to agent.toml

Tiers order chat → reasoning → worker. A definition may spawn only strictly lower tiers, so
a worker spawns nothing. `ArchetypeRegistry` checks the merged set (built-ins plus workspace
overrides) when it is built, and refuses to load with `ArchetypeLoadError` naming the
offending file and the rule. `SpawnGuard` is a separate runtime limit on the spawn chain's
depth that holds even if the tier rules were bypassed.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cyber_agent.core.config import RunConfig
from cyber_agent.errors import ConfigurationError, RunError

__all__ = [
    "BUILTIN_ARCHETYPES_DIR",
    "MAX_SPAWN_DEPTH",
    "SPAWN_TOOLS",
    "TIERS",
    "WORKSPACE_AGENTS_DIR",
    "AgentDefinition",
    "ArchetypeLoadError",
    "ArchetypeRegistry",
    "SpawnDepthExceededError",
    "SpawnGuard",
    "SpawnRefusedError",
    "Tier",
    "load_definition",
    "tier_allows",
    "validate_tiers",
]

Tier = Literal["chat", "reasoning", "worker"]
"""Cost/latency/depth class of an agent."""
TIERS: tuple[Tier, ...] = get_args(Tier)
"""Tiers from highest to lowest: a definition may spawn only tiers after its own."""
_RANK = {tier: rank for rank, tier in enumerate(TIERS)}

MAX_SPAWN_DEPTH = 3
"""Default longest spawn chain: chat(0) → reasoning(1) → worker(2) → one more hand-off(3)."""
SPAWN_TOOLS = frozenset({"agent"})
"""Tools that start other agents; a definition that can spawn nobody never sees them."""
BUILTIN_ARCHETYPES_DIR = Path(__file__).resolve().parent.parent / "archetypes"
"""Where the built-in definitions live (package data)."""
WORKSPACE_AGENTS_DIR = Path(".cyber_agent") / "agents"
"""Workspace-relative directory of workspace definitions."""

_ID_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_FILE_FIELDS = ("id", "tier", "description", "tools", "disallowed_tools", "model_hint", "max_iterations",
                "can_spawn", "prompt")
_TIER_RULE = "a definition may spawn only strictly lower tiers (chat → reasoning → worker)"


class ArchetypeLoadError(ConfigurationError):
    """A definition file cannot be loaded or breaks a tier rule; names the file and the rule."""

    def __init__(self, path: Path, rule: str) -> None:
        self.path = path
        self.rule = rule
        super().__init__(str(path), rule)


class SpawnRefusedError(RunError):
    """A spawn that the tier rules or the depth guard forbid."""


class SpawnDepthExceededError(SpawnRefusedError):
    """The spawn chain would grow past the depth guard."""

    def __init__(self, attempted_depth: int, max_depth: int) -> None:
        self.attempted_depth = attempted_depth
        self.max_depth = max_depth
        super().__init__(
            f"spawn refused: depth {attempted_depth} exceeds the maximum spawn depth {max_depth}; "
            "finish this task here or return to the parent instead of delegating further"
        )


def tier_allows(parent: Tier, child: Tier) -> bool:
    """True when an agent of tier `parent` may spawn one of tier `child` (strictly lower only)."""
    return _RANK[child] > _RANK[parent]


class AgentDefinition(BaseModel):
    """One archetype: who it is, what it may use, and whom it may spawn."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    """Identifier; `RunConfig.agent_type` names an archetype by it."""
    tier: Tier = "worker"
    """chat, reasoning or worker (the original's default: a leaf)."""
    description: str = Field(min_length=1)
    """When to pick this agent (shown to agents that may spawn it)."""
    tools: tuple[str, ...] = ("*",)
    """Tool allow-list; "*" allows every available tool."""
    disallowed_tools: tuple[str, ...] = ()
    """Tools removed after the allow-list."""
    model_hint: str | None = None
    """Advisory model class (e.g. "reasoning"); None inherits the caller's model."""
    max_iterations: int = Field(default=8, ge=1, le=1000)
    """Default model turns of a run of this agent."""
    can_spawn: tuple[str, ...] = ()
    """Archetype ids this agent may start; each must be of a strictly lower tier."""
    prompt: str = Field(min_length=1)
    """System prompt text."""
    source: Path | None = None
    """The agent.toml it was loaded from (None when built in code)."""
    origin: Literal["builtin", "workspace", "code"] = "code"
    """Where the definition came from."""

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        if not _ID_RE.match(value):
            raise ValueError(f"id {value!r} must match [a-z][a-z0-9_]{{0,63}}")
        return value

    @field_validator("description", "prompt")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    def tool_names(self, available: Iterable[str]) -> frozenset[str]:
        """Tools of `available` this agent may use: allow-list minus disallowed (spawn tools only if it can spawn)."""
        names = set(available)
        if "*" not in self.tools:
            names &= set(self.tools)  # names absent from `available` are dropped silently
        names -= set(self.disallowed_tools)
        if not self.can_spawn:
            names -= SPAWN_TOOLS
        return frozenset(names)

    def apply_to(self, config: RunConfig, available_tools: Iterable[str]) -> RunConfig:
        """Return `config` shaped by this archetype; fields the caller set explicitly win, tools only narrow.

        `system_prompt` and `max_iterations` come from the archetype unless set on `config`;
        `tools` becomes the archetype's `tool_names(available_tools)`, intersected with
        `config.tools` when the caller set them; `agent_type` becomes this id.
        """
        explicit = config.model_fields_set
        allowed = self.tool_names(available_tools)
        if config.tools is not None:
            allowed &= set(config.tools)
        update: dict[str, object] = {"agent_type": self.id, "tools": sorted(allowed)}
        if config.system_prompt is None:
            update["system_prompt"] = self.prompt
        if "max_iterations" not in explicit:
            update["max_iterations"] = self.max_iterations
        return RunConfig.model_validate({**config.model_dump(exclude_unset=True), **update})


def load_definition(path: Path, *, origin: Literal["builtin", "workspace"] = "workspace") -> AgentDefinition:
    """Load one `<id>/agent.toml` (plus its `prompt.md`); raise ArchetypeLoadError naming the file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ArchetypeLoadError(path, f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ArchetypeLoadError(path, f"not UTF-8 text: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ArchetypeLoadError(path, f"malformed TOML: {exc}") from None
    unknown = sorted(set(data) - set(_FILE_FIELDS))
    if unknown:
        raise ArchetypeLoadError(path, f"unknown field(s) {unknown}; allowed fields: {', '.join(_FILE_FIELDS)}")
    dir_id = path.parent.name
    file_id = data.setdefault("id", dir_id)
    if file_id != dir_id:
        raise ArchetypeLoadError(path, f"id {file_id!r} must equal its directory name {dir_id!r}")
    prompt_md = path.parent / "prompt.md"
    if "prompt" in data and prompt_md.is_file():
        raise ArchetypeLoadError(path, f"both an inline prompt and {prompt_md.name} exist; keep one")
    if "prompt" not in data:
        if not prompt_md.is_file():
            raise ArchetypeLoadError(path, "no prompt: add prompt.md next to agent.toml or an inline prompt = \"...\"")
        try:
            data["prompt"] = prompt_md.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ArchetypeLoadError(prompt_md, f"cannot read the prompt: {exc}") from None
    try:
        return AgentDefinition.model_validate({**data, "source": path, "origin": origin})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors())
        raise ArchetypeLoadError(path, f"invalid definition: {problems}") from None


def _load_dir(root: Path, origin: Literal["builtin", "workspace"]) -> dict[str, AgentDefinition]:
    found: dict[str, AgentDefinition] = {}
    if not root.is_dir():
        return found
    for entry in sorted(root.iterdir()):
        if entry.is_file() and entry.suffix == ".toml":
            raise ArchetypeLoadError(
                entry, f"flat definition files are not read; move it to {root / entry.stem / 'agent.toml'}")
        if not entry.is_dir() or entry.name.startswith((".", "_")):
            continue
        toml = entry / "agent.toml"
        if not toml.is_file():
            raise ArchetypeLoadError(entry, "an agent directory needs an agent.toml")
        definition = load_definition(toml, origin=origin)
        found[definition.id] = definition
    return found


@functools.cache
def _shipped_definitions() -> tuple[AgentDefinition, ...]:
    """The shipped definitions, parsed once per process (package data does not change; definitions are frozen)."""
    return tuple(_load_dir(BUILTIN_ARCHETYPES_DIR, "builtin").values())



def _where(definition: AgentDefinition) -> Path:
    return definition.source or Path(f"<{definition.origin} definition {definition.id}>")


def validate_tiers(definitions: Mapping[str, AgentDefinition]) -> None:
    """Refuse a set where an agent spawns an unknown id, its own tier or a higher one (workers spawn nothing)."""
    for definition in definitions.values():
        where = _where(definition)
        if definition.tier == "worker" and definition.can_spawn:
            raise ArchetypeLoadError(
                where, f"worker {definition.id!r} lists can_spawn {list(definition.can_spawn)}; "
                       "a worker spawns nothing (workers are leaf executors)")
        for child_id in definition.can_spawn:
            child = definitions.get(child_id)
            if child is None:
                raise ArchetypeLoadError(
                    where, f"{definition.id!r} may spawn unknown agent {child_id!r}; "
                           f"known agents: {', '.join(sorted(definitions))}")
            if not tier_allows(definition.tier, child.tier):
                raise ArchetypeLoadError(
                    where, f"{definition.id!r} (tier {definition.tier}) may not spawn {child_id!r} "
                           f"(tier {child.tier}, defined in {_where(child)}): {_TIER_RULE}")


class ArchetypeRegistry:
    """The agent definitions of one workspace: built-ins overridden by workspace files, tier-checked."""

    def __init__(self, definitions: Iterable[AgentDefinition]) -> None:
        self._defs: dict[str, AgentDefinition] = {}
        for definition in definitions:
            self._defs[definition.id] = definition  # a later definition overrides an earlier one
        validate_tiers(self._defs)

    @classmethod
    def load(cls, workspace: Path | str | None = None, *, builtins_dir: Path = BUILTIN_ARCHETYPES_DIR) -> ArchetypeRegistry:
        """Load the built-ins, then `<workspace>/.cyber_agent/agents/<id>/agent.toml` (same id replaces)."""
        if builtins_dir == BUILTIN_ARCHETYPES_DIR:
            merged = {definition.id: definition for definition in _shipped_definitions()}
        else:
            merged = _load_dir(builtins_dir, "builtin")
        if workspace is not None:
            merged.update(_load_dir(Path(workspace) / WORKSPACE_AGENTS_DIR, "workspace"))
        return cls(merged.values())

    def get(self, agent_id: str) -> AgentDefinition | None:
        """Return the definition with this id, or None."""
        return self._defs.get(agent_id)

    def require(self, agent_id: str) -> AgentDefinition:
        """Return the definition with this id; raise ConfigurationError listing the known ids."""
        definition = self._defs.get(agent_id)
        if definition is None:
            raise ConfigurationError("agent_type", f"no archetype {agent_id!r}; known: {', '.join(self.ids())}")
        return definition

    def ids(self) -> list[str]:
        """Known ids, sorted."""
        return sorted(self._defs)

    def check_spawn(self, parent_id: str, child_id: str) -> AgentDefinition:
        """Return the child's definition if `parent_id` may spawn it; raise SpawnRefusedError otherwise."""
        parent, child = self._defs.get(parent_id), self._defs.get(child_id)
        if child is None:
            raise SpawnRefusedError(f"spawn refused: no archetype {child_id!r}; known: {', '.join(self.ids())}")
        if parent is None:
            return child  # a caller that is not an archetype (a plain run) is not tier-bound
        if child_id not in parent.can_spawn:
            allowed = ", ".join(parent.can_spawn) or "none"
            raise SpawnRefusedError(f"spawn refused: {parent_id!r} may spawn only: {allowed} (asked for {child_id!r})")
        if not tier_allows(parent.tier, child.tier):  # pragma: no cover - validate_tiers already refused this set
            raise SpawnRefusedError(f"spawn refused: {parent_id!r} ({parent.tier}) → {child_id!r} ({child.tier}): {_TIER_RULE}")
        return child

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._defs

    def __iter__(self) -> Iterator[AgentDefinition]:
        return iter([self._defs[i] for i in self.ids()])

    def __len__(self) -> int:
        return len(self._defs)


@dataclass(frozen=True, kw_only=True)
class SpawnGuard:
    """Runtime cap on the spawn chain's depth, independent of tiers (root = depth 0)."""

    max_depth: int = MAX_SPAWN_DEPTH
    """Deepest agent that may be started."""

    def __post_init__(self) -> None:
        if self.max_depth < 0:
            raise ConfigurationError("max_depth", f"must be >= 0, got {self.max_depth}")

    def check(self, depth: int) -> None:
        """Raise SpawnDepthExceededError if an agent at `depth` may not be started."""
        if depth > self.max_depth:
            raise SpawnDepthExceededError(depth, self.max_depth)

    def child_depth(self, parent_depth: int) -> int:
        """Return the depth of a child of an agent at `parent_depth`, after checking it."""
        depth = parent_depth + 1
        self.check(depth)
        return depth
