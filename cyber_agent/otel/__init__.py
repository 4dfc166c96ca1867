"""OpenTelemetry GenAI export of stored and running task trees (the `otel` extra).

    export_otel(store, root_id, exporter=...)     after the fact, from any TraceReader
    OtelObserver(store, exporter)                 live: a post-turn hook on the runner

Mapping, ids, content rules: docs/otel.md.
"""

try:
    import opentelemetry.sdk.trace  # noqa: F401
    import opentelemetry.semconv  # noqa: F401
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "cyber_agent.otel needs the 'otel' extra: pip install 'cyber-agent[otel]' "
        f"(missing module {exc.name!r})"
    ) from exc

from cyber_agent.otel._content import DEFAULT_MAX_CONTENT_CHARS, ContentPolicy, bounded_json
from cyber_agent.otel._export import OtelExport, export_otel, tree_spans
from cyber_agent.otel._ids import otel_trace_id, span_id
from cyber_agent.otel._live import OtelObserver
from cyber_agent.otel._spans import TraceView, trace_spans

__all__ = [
    "ContentPolicy",
    "DEFAULT_MAX_CONTENT_CHARS",
    "OtelExport",
    "OtelObserver",
    "TraceView",
    "bounded_json",
    "export_otel",
    "otel_trace_id",
    "span_id",
    "trace_spans",
    "tree_spans",
]
