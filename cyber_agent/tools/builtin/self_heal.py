"""Self-healing bash_command: polyfill a command that is not found, then retry (SPEC H12).

    bash_command(command) ──► exit 127 "NAME: command not found"
        │                         (or 126/127 from a broken polyfill under .cyber_agent/bin)
        ├─ attempts for NAME in this run < max_attempts (2)?
        │     no  → result as is, metadata self_heal.status = "gave_up"
        ├─ tool maker writes a script (`core/tool_maker.py:LLMToolMaker` or any `make_polyfill(name, error)`)
        ├─ install <workspace>/.cyber_agent/bin/NAME (chmod +x)
        └─ rerun the original command with that directory first on PATH; repeat on a new miss

Every call whose workspace holds `.cyber_agent/bin` runs with that directory first on PATH,
so a polyfill keeps serving later commands of the workspace. The retry reruns the whole
command line, side effects included, as the original harness does. A result with no
"command not found" is returned untouched. When bash_command requires approval (T8) nothing
is installed: a polyfill would run code no reviewer saw (`self_heal.status = "skipped"`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import re
import shlex
import tempfile
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from cyber_agent.errors import ConfigurationError, UnknownToolError
from cyber_agent.tools.builtin.bash import bash_command
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry, ToolResult

__all__ = [
    "MAX_HEAL_ATTEMPTS",
    "MAX_HEALS_PER_CALL",
    "NO_POLYFILL",
    "POLYFILL_DIR",
    "HealStatus",
    "PolyfillMaker",
    "SelfHealingBash",
    "detect_missing_commands",
    "extract_script",
    "register_self_healing_bash",
]

POLYFILL_DIR = Path(".cyber_agent") / "bin"
"""Workspace-relative directory polyfills are installed in."""
MAX_HEAL_ATTEMPTS = 2
"""Polyfills asked for one command name per run (the original's MAX_HEAL_ATTEMPTS)."""
MAX_HEALS_PER_CALL = 4
"""Polyfills installed during one call at most (a polyfill may need another missing command)."""
NO_POLYFILL = "NO_POLYFILL"
"""What the tool maker answers when a command cannot be polyfilled safely."""
_MAX_ERROR_CHARS = 4000
_MAX_TRACKED_RUNS = 1024
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}$")
_MISSING_PATTERNS = (
    re.compile(r"(?:^|: )([^\s:'\"/`$;|&<>()]+): command not found", re.M),  # bash
    re.compile(r"^[^\n:]+: \d+: ([^\s:'\"/`$;|&<>()]+): not found", re.M),  # dash / sh
    re.compile(r"command not found: ([^\s:'\"/`$;|&<>()]+)", re.M),  # zsh
)

HealStatus = Literal["healed", "gave_up", "skipped"]
"""What self-healing did in one call: healed it, gave up, or was not allowed to act."""
PolyfillMaker = Callable[[str, str], str | None | Awaitable[str | None]]
"""`make_polyfill(command_name, error)` → script text, or None when it cannot make one."""
InnerBash = Callable[..., Awaitable[ToolResult]]


def detect_missing_commands(output: str, exit_code: int | None, *, polyfill_dir: Path | None = None) -> list[str]:
    """Names of commands the shell could not find (or whose polyfill could not run), in output order."""
    if exit_code not in (126, 127):
        return []
    found: list[tuple[int, str]] = []
    if exit_code == 127:
        for pattern in _MISSING_PATTERNS:
            found += [(m.start(), m.group(1)) for m in pattern.finditer(output)]
    if polyfill_dir is not None:
        broken = re.compile(re.escape(str(polyfill_dir)) + r"/([^\s:/]+): ")
        found += [(m.start(), m.group(1)) for m in broken.finditer(output)]
    names: list[str] = []
    for _, name in sorted(found):
        if _NAME_RE.match(name) and name not in names:
            names.append(name)
    return names


def extract_script(text: str) -> str | None:
    """The script in a tool maker's answer: its first fenced block, or the text if it starts with `#!`."""
    text = text.strip()
    if not text or text.upper().startswith(NO_POLYFILL):
        return None
    fenced = re.search(r"```[^\n`]*\n(.*?)```", text, re.S)
    if fenced:
        return fenced.group(1).strip() or None
    return text if text.startswith("#!") else None


class SelfHealingBash:
    """bash_command that installs a polyfill for a missing command and retries, bounded per name and run."""

    def __init__(
        self, tool_maker: PolyfillMaker, *, max_attempts: int = MAX_HEAL_ATTEMPTS,
        inner: InnerBash = bash_command, enabled: bool = True,
    ) -> None:
        if max_attempts < 0:
            raise ConfigurationError("max_attempts", f"must be >= 0, got {max_attempts}")
        self._maker = tool_maker
        self._inner = inner
        self.max_attempts = max_attempts
        """Polyfills asked for one command name per run."""
        self.enabled = enabled
        """False: detect and report, never install (bash_command under approval)."""
        self._attempts: OrderedDict[str, dict[str, int]] = OrderedDict()

    def attempts(self, trace_id: str, command_name: str) -> int:
        """Polyfills asked for `command_name` in the run of `trace_id` so far."""
        return self._attempts.get(trace_id, {}).get(command_name, 0)

    def reset(self, trace_id: str | None = None) -> None:
        """Forget the attempt counts of one run (or of all)."""
        if trace_id is None:
            self._attempts.clear()
        else:
            self._attempts.pop(trace_id, None)

    def _count(self, trace_id: str, name: str) -> int:
        counts = self._attempts.setdefault(trace_id, {})
        self._attempts.move_to_end(trace_id)
        while len(self._attempts) > _MAX_TRACKED_RUNS:
            self._attempts.popitem(last=False)
        counts[name] = counts.get(name, 0) + 1
        return counts[name]

    async def __call__(self, ctx: ToolContext, command: str, timeout: float = 30) -> ToolResult:
        """Run the command; on "command not found", polyfill and retry (see the module docstring)."""
        bin_dir = ctx.workspace.resolve() / POLYFILL_DIR
        result = await self._run(ctx, command, timeout, bin_dir)
        tried: list[str] = []
        polyfills: list[str] = []
        while True:
            missing = detect_missing_commands(result.content, result.metadata.get("exit_code"), polyfill_dir=bin_dir)
            if not missing:
                return result if not tried else _report(result, "healed", tried, polyfills)
            name = missing[0]
            if not self.enabled:
                return _report(result, "skipped", tried, polyfills, name,
                               "bash_command requires approval; a polyfill would run code no reviewer saw")
            if len(polyfills) >= MAX_HEALS_PER_CALL:
                return _report(result, "gave_up", tried, polyfills, name, f"{MAX_HEALS_PER_CALL} polyfills in one call")
            if self.attempts(ctx.trace_id, name) >= self.max_attempts:
                return _report(result, "gave_up", tried, polyfills, name,
                               f"{self.max_attempts} polyfill attempt(s) for {name!r} already used in this run")
            attempt = self._count(ctx.trace_id, name)
            if name not in tried:
                tried.append(name)
            error = f"$ {command}\n{result.content[-_MAX_ERROR_CHARS:]}"
            try:
                script = self._maker(name, error)
                if inspect.isawaitable(script):
                    script = await script
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing tool maker leaves the original result
                return _report(result, "gave_up", tried, polyfills, name,
                               f"tool maker failed for {name!r} (attempt {attempt}): {type(exc).__name__}: {exc}")
            if not isinstance(script, str) or not script.strip():
                return _report(result, "gave_up", tried, polyfills, name,
                               f"tool maker returned no script for {name!r} (attempt {attempt})")
            path = _install(bin_dir, name, script)
            polyfills.append(str(path.relative_to(ctx.workspace.resolve())))
            result = await self._run(ctx, command, timeout, bin_dir)

    async def _run(self, ctx: ToolContext, command: str, timeout: float, bin_dir: Path) -> ToolResult:
        if bin_dir.is_dir():
            # Same line as the command, so bash's "line N" in error messages keeps its meaning.
            command = f'export PATH={shlex.quote(str(bin_dir))}:"$PATH"; {command}'
        return await self._inner(ctx=ctx, command=command, timeout=timeout)


def _install(bin_dir: Path, name: str, script: str) -> Path:
    """Write the polyfill atomically and make it executable; add a bash shebang when it has none."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    text = script.strip() + "\n"
    if not text.startswith("#!"):
        text = "#!/usr/bin/env bash\n" + text
    target = bin_dir / name
    fd, tmp = tempfile.mkstemp(dir=bin_dir, prefix=f".{name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _report(result: ToolResult, status: HealStatus, tried: list[str], polyfills: list[str],
            command: str | None = None, reason: str | None = None) -> ToolResult:
    """Append a note the model reads and the `self_heal` record to the final result."""
    record: dict[str, Any] = {"status": status, "commands": tried, "attempts": len(polyfills),
                              "polyfills": polyfills, "command": command, "reason": reason}
    if status == "healed":
        note = (f"[self-heal: installed polyfill(s) {', '.join(polyfills)} for missing command(s) "
                f"{', '.join(tried)} and reran the command]")
    else:
        note = f"[self-heal {status.replace('_', ' ')}: {reason}]"
    return dataclasses.replace(result, content=f"{result.content}\n{note}",
                               metadata={**result.metadata, "self_heal": record})


def register_self_healing_bash(
    registry: ToolRegistry, tool_maker: PolyfillMaker, *, max_attempts: int = MAX_HEAL_ATTEMPTS,
) -> ToolRegistry:
    """Return a copy of `registry` whose `bash_command` self-heals (same name, schema and approval settings)."""
    spec = registry.get("bash_command")
    if spec is None:
        raise UnknownToolError("bash_command", registry.names())
    if spec.context_params != ("ctx",) or "command" not in spec.parameters.get("properties", {}):
        raise ConfigurationError("bash_command", "only the built-in bash_command signature (ctx, command, timeout) can be wrapped")
    healer = SelfHealingBash(tool_maker, max_attempts=max_attempts, inner=spec.func,
                             enabled=not spec.requires_confirmation)
    healing = dataclasses.replace(spec, func=healer, is_async=True, run_in_thread=False)
    return ToolRegistry(healing if s.name == "bash_command" else s for s in registry)
