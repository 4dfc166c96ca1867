"""`cyber-agent export-otel ROOT --endpoint URL`: send one stored tree to an OTLP/HTTP collector."""

from __future__ import annotations

import asyncio
import sys
from urllib.parse import urlsplit, urlunsplit

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from cyber_agent.errors import ConfigurationError
from cyber_agent.otel._export import export_otel
from cyber_agent.trace.protocols import TraceReader

__all__ = ["export_command", "traces_endpoint"]


def traces_endpoint(url: str) -> str:
    """The OTLP/HTTP traces URL: `http://host:4318` becomes `http://host:4318/v1/traces`; a path is kept."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError("--endpoint", f"must be an http(s) URL such as http://127.0.0.1:4318, got {url!r}")
    path = parts.path if parts.path not in ("", "/") else "/v1/traces"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def export_command(store: TraceReader, root_id: str, endpoint: str, *, capture_content: bool = False,
                   timeout: float = 10.0) -> int:
    """Export the tree and print what was sent; 0 when the collector accepted it, 1 when not."""
    url = traces_endpoint(endpoint)
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout)
    try:
        done = asyncio.run(export_otel(store, root_id, exporter=exporter, capture_content=capture_content))
    finally:
        exporter.shutdown()
    counts = ", ".join(f"{count} {operation}" for operation, count in sorted(done.by_operation.items()))
    if not done.exported:
        print(f"error: {url} did not accept the {done.spans} spans of {root_id} (is the collector running?)",
              file=sys.stderr)
        return 1
    print(f"exported {done.spans} spans ({counts}) of {root_id} to {url}")
    print(f"otel trace id: {done.trace_id}")
    return 0
