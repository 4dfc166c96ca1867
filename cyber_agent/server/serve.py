"""`cyber-agent serve`: run the Trace API with uvicorn on the loopback interface.

The server binds 127.0.0.1:8000 by default and refuses to bind anything but a loopback
address (seed 003: the API must not be exposed through a public IP, a port mapping or a
proxy). Hot reload is off unless `TRACE_API_RELOAD=true`.

The runner comes from a factory: `module:callable`, called with the store, returning an
AgentRunner (`--runner-factory` or `CYBER_AGENT_RUNNER_FACTORY`). Without one the server runs
`default_runner`: the built-in tools, `agent` and the protocol tools, with `bash_command`
requiring approval — a browser front-end starts these runs, so shell commands wait for a
person.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from cyber_agent.errors import ConfigurationError
from cyber_agent.server.local_only import DEFAULT_ALLOWED_ORIGINS
from cyber_agent.trace.protocols import TraceStore

__all__ = ["LOOPBACK_HOSTS", "ServeSettings", "app_from_environment", "default_runner", "load_runner_factory",
           "reload_enabled", "serve"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""Addresses `serve` may bind."""
_SETTINGS_ENV = "CYBER_AGENT_SERVE_SETTINGS"


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    """Everything `serve` needs; passed through the environment to a reloading worker."""

    host: str = "127.0.0.1"
    port: int = 8000
    store_path: str | None = None
    """Store URL (`cyber_agent/trace/store_url.py:open_store`); None: `CYBER_AGENT_STORE`, else file:.trace."""
    workspace: str | None = None
    runner_factory: str | None = None
    experiences_path: str = ".cache/experiences.md"
    allowed_origins: tuple[str, ...] = field(default=DEFAULT_ALLOWED_ORIGINS)


def reload_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """True only when TRACE_API_RELOAD is exactly 'true' (any case)."""
    env = os.environ if environ is None else environ
    return env.get("TRACE_API_RELOAD", "").strip().lower() == "true"


def default_runner(store: TraceStore, workspace: str | None = None) -> Any:
    """The server's runner without a factory: built-in tools, `agent`, protocol tools; bash needs approval."""
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.tools.builtin import register_builtins
    from cyber_agent.protocol.report_tools import register_protocol_tools
    from cyber_agent.protocol.agent_tool import register_agent_tool
    from cyber_agent.tools.registry import ToolRegistry

    registry = register_protocol_tools(register_agent_tool(register_builtins(ToolRegistry(), confirm=("bash_command",))))
    return AgentRunner(trace_store=store, tool_registry=registry, workspace=workspace)


def load_runner_factory(spec: str) -> Any:
    """Import `module:callable` (a function of the store returning an AgentRunner)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError("runner_factory", f"expected 'module:callable', got {spec!r}")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError("runner_factory", f"cannot import {module_name!r}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ConfigurationError("runner_factory", f"{module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ConfigurationError("runner_factory", f"{spec!r} is not callable")
    return target


def build_app(settings: ServeSettings) -> Any:
    """Create the FastAPI app a settings object describes."""
    from cyber_agent.server.app import create_app
    from cyber_agent.trace.store_url import open_store

    store = open_store(settings.store_path)
    spec = settings.runner_factory or os.environ.get("CYBER_AGENT_RUNNER_FACTORY")
    if spec:
        factory = load_runner_factory(spec)
    else:
        def factory(s: TraceStore) -> Any:
            return default_runner(s, settings.workspace)
    return create_app(store=store, runner_factory=factory, allowed_origins=settings.allowed_origins,
                      experiences_path=settings.experiences_path, triage=_triage_from_environment())


def _triage_from_environment() -> Any:
    """`CYBER_AGENT_TRIAGE_MODEL` (and optional `..._FALLBACK_MODEL`) turn on POST /api/triage (H11)."""
    cheap = os.environ.get("CYBER_AGENT_TRIAGE_MODEL")
    if not cheap:
        return None
    from cyber_agent.core.triage import Triage
    from cyber_agent.llm.resolve import resolve_llm

    first = resolve_llm(cheap)
    fallback_spec = os.environ.get("CYBER_AGENT_TRIAGE_FALLBACK_MODEL")
    second = resolve_llm(fallback_spec) if fallback_spec else None
    return Triage(first.llm_call, first.model, second.llm_call if second else None, second.model if second else None)


def app_from_environment() -> Any:
    """uvicorn factory for reload mode: rebuild the app from the settings `serve` put in the environment."""
    raw = json.loads(os.environ[_SETTINGS_ENV])
    raw["allowed_origins"] = tuple(raw["allowed_origins"])
    return build_app(ServeSettings(**raw))


def serve(settings: ServeSettings, *, environ: Mapping[str, str] | None = None, log_level: str = "info") -> None:
    """Run the API with uvicorn until interrupted (reload only when TRACE_API_RELOAD=true)."""
    import uvicorn

    if settings.host not in LOOPBACK_HOSTS:
        raise ConfigurationError("host", f"{settings.host!r} is not a loopback address; the Trace API is local-only "
                                         f"(use one of {sorted(LOOPBACK_HOSTS)})")
    common: dict[str, Any] = {"host": settings.host, "port": settings.port, "log_level": log_level,
                              "proxy_headers": False, "server_header": False}
    if reload_enabled(environ):
        os.environ[_SETTINGS_ENV] = json.dumps(asdict(settings))
        uvicorn.run("cyber_agent.server.serve:app_from_environment", factory=True, reload=True, **common)
        return
    uvicorn.run(build_app(settings), **common)


def parse_origins(values: Sequence[str] | None) -> tuple[str, ...]:
    """The allowed origins: the defaults unless `--allow-origin` values were given."""
    return tuple(values) if values else DEFAULT_ALLOWED_ORIGINS
