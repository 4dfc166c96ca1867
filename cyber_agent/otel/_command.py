"""`cyber-agent export-otel ROOT --endpoint URL`: send one stored tree to an OTLP/HTTP collector.

Headers come from `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (else `OTEL_EXPORTER_OTLP_HEADERS`), the
standard `k=v,k2=v2` form, with each `--header K=V` over them. A collector that answers with an
error status is reported with that status and the start of its answer.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from urllib.parse import unquote, urlsplit, urlunsplit

import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from cyber_agent.errors import ConfigurationError
from cyber_agent.otel._export import export_otel
from cyber_agent.trace.protocols import TraceReader

__all__ = ["export_command", "export_headers", "traces_endpoint"]

_EXCERPT = 300


def traces_endpoint(url: str) -> str:
    """The OTLP/HTTP traces URL: `http://host:4318` becomes `http://host:4318/v1/traces`; a path is kept."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError("--endpoint", f"must be an http(s) URL such as http://127.0.0.1:4318, got {url!r}")
    path = parts.path if parts.path not in ("", "/") else "/v1/traces"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def export_headers(flags: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The request headers: the standard OTEL_* variable's `k=v,k2=v2` pairs, then each `K=V` flag over them."""
    env = os.environ if env is None else env
    headers: dict[str, str] = {}
    raw = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    for pair in filter(None, (p.strip() for p in raw.split(","))):
        name, sep, value = pair.partition("=")
        if sep and name.strip():
            headers[unquote(name.strip()).lower()] = unquote(value.strip())
    for flag in flags:
        name, sep, value = flag.partition("=")
        if not sep or not name.strip() or any(c in flag for c in "\r\n\x00"):
            raise ConfigurationError("--header", f"must be NAME=VALUE (e.g. 'Authorization=Bearer abc'), got {flag!r}")
        headers[name.strip().lower()] = value.strip()
    return headers


def _endpoint(url: str | None, env: Mapping[str, str]) -> str:
    given = url or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not given:
        raise ConfigurationError("--endpoint", "is required (or set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), "
                                               "e.g. --endpoint http://127.0.0.1:4318")
    return traces_endpoint(given)


def export_command(store: TraceReader, root_id: str, endpoint: str | None, *, capture_content: bool = False,
                   timeout: float = 10.0, headers: Sequence[str] = (), env: Mapping[str, str] | None = None) -> int:
    """Export the tree and print what was sent; 0 when the collector accepted it, 1 when not."""
    env = os.environ if env is None else env
    url = _endpoint(endpoint, env)
    answers: list[requests.Response] = []
    session = requests.Session()
    session.hooks["response"].append(lambda response, *args, **kwargs: answers.append(response))
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout, headers=export_headers(headers, env), session=session)
    try:
        done = asyncio.run(export_otel(store, root_id, exporter=exporter, capture_content=capture_content))
    finally:
        exporter.shutdown()
    counts = ", ".join(f"{count} {operation}" for operation, count in sorted(done.by_operation.items()))
    if not done.exported:
        refused = next((a for a in reversed(answers) if not a.ok), None)
        if refused is not None:
            excerpt = refused.text[:_EXCERPT].strip() or "(empty answer)"
            print(f"error: {url} answered HTTP {refused.status_code} {refused.reason} to the {done.spans} spans of "
                  f"{root_id}: {excerpt}", file=sys.stderr)
        else:
            print(f"error: {url} did not accept the {done.spans} spans of {root_id} (is the collector running?)",
                  file=sys.stderr)
        return 1
    print(f"exported {done.spans} spans ({counts}) of {root_id} to {url}")
    print(f"otel trace id: {done.trace_id}")
    return 0
