"""OpenTelemetry spans from the two places they come from: an OTLP/JSON file, or SDK spans in process.

An OTLP/JSON file is an `ExportTraceServiceRequest` as JSON (what the Collector's file exporter
and Phoenix write), one per file or one per line (JSON Lines). Ids are hex as the OTLP/JSON
encoding says; base64 (protobuf's own JSON mapping) is read too. SDK spans (`ReadableSpan`, e.g.
from an `InMemorySpanExporter`) are read by duck typing, so this module needs no OpenTelemetry
package.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cyber_agent.errors import ImportFormatError
from cyber_agent.importers._otel import SpanRecord, plans_from_spans
from cyber_agent.importers._plan import TracePlan
from cyber_agent.trace.protocols import TraceStore

__all__ = ["import_spans", "read_otel_file", "records_from_sdk", "records_from_otlp_json"]

_SOURCE = "OTLP/JSON file"


def _id(value: Any, size: int, where: str, path: Path) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise ImportFormatError(path, _SOURCE, f"{where} is not a string id")
    text = value.strip()
    if len(text) == size * 2 and all(c in "0123456789abcdefABCDEF" for c in text):
        return text.lower()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise ImportFormatError(path, _SOURCE, f"{where} {value!r} is neither {size * 2} hex digits nor base64 of "
                                               f"{size} bytes")
    return raw.hex()


def _value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        return [_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return {kv.get("key"): _value(kv.get("value")) for kv in (value["kvlistValue"] or {}).get("values", [])}
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _attributes(items: Any) -> dict[str, Any]:
    return {item["key"]: _value(item.get("value")) for item in items or () if isinstance(item, dict) and "key" in item}


def _requests(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFormatError(path, _SOURCE, f"cannot be read ({exc})") from None
    try:
        whole = json.loads(text)
        requests = whole if isinstance(whole, list) else [whole]
    except json.JSONDecodeError:
        requests = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    requests.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ImportFormatError(path, _SOURCE, f"line {number} is not JSON ({exc})") from None
    for number, request in enumerate(requests):
        if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
            found = sorted(request)[:5] if isinstance(request, dict) else type(request).__name__
            raise ImportFormatError(path, _SOURCE, f"request {number} has no 'resourceSpans' list (found {found})")
    return requests


def records_from_otlp_json(path: Path) -> list[SpanRecord]:
    """Every span of an OTLP/JSON file (one request, a list of them, or one per line)."""
    records = []
    for request in _requests(path):
        for r, resource in enumerate(request["resourceSpans"]):
            for s, scope in enumerate(resource.get("scopeSpans") or resource.get("instrumentationLibrarySpans") or ()):
                for n, span in enumerate(scope.get("spans") or ()):
                    where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                    if not isinstance(span, dict) or "name" not in span or "startTimeUnixNano" not in span:
                        raise ImportFormatError(path, _SOURCE, f"{where} has no name or startTimeUnixNano")
                    trace_id = _id(span.get("traceId"), 16, f"{where}.traceId", path)
                    span_id = _id(span.get("spanId"), 8, f"{where}.spanId", path)
                    if trace_id is None or span_id is None:
                        raise ImportFormatError(path, _SOURCE, f"{where} has no traceId or spanId")
                    status = span.get("status") or {}
                    code = status.get("code")
                    end = span.get("endTimeUnixNano")
                    records.append(SpanRecord(
                        trace_id=trace_id, span_id=span_id,
                        parent_id=_id(span.get("parentSpanId"), 8, f"{where}.parentSpanId", path),
                        name=str(span["name"]), start_ns=int(span["startTimeUnixNano"]),
                        end_ns=int(end) if end not in (None, "", "0", 0) else None,
                        attributes=_attributes(span.get("attributes")),
                        error=code in (2, "STATUS_CODE_ERROR"), status_message=status.get("message") or None))
    return records


def records_from_sdk(spans: Sequence[Any]) -> list[SpanRecord]:
    """OpenTelemetry SDK `ReadableSpan`s as records (read by attribute, no import of the SDK)."""
    records = []
    for span in spans:
        context, parent = span.context, span.parent
        status = getattr(span, "status", None)
        code = getattr(getattr(status, "status_code", None), "name", "")
        records.append(SpanRecord(
            trace_id=f"{context.trace_id:032x}", span_id=f"{context.span_id:016x}",
            parent_id=f"{parent.span_id:016x}" if parent is not None else None, name=str(span.name),
            start_ns=int(span.start_time or 0), end_ns=int(span.end_time) if span.end_time else None,
            attributes=dict(span.attributes or {}), error=code == "ERROR",
            status_message=getattr(status, "description", None) or None))
    return records


def read_otel_file(path: Path) -> list[TracePlan]:
    """Read an OTLP/JSON file into root plans."""
    records = records_from_otlp_json(path)
    if not records:
        raise ImportFormatError(path, _SOURCE, "holds no span")
    return plans_from_spans(records, str(path.resolve()))


async def import_spans(spans: Sequence[Any], store: TraceStore, *, label: str = "<spans>") -> list[str]:
    """Write the trees of in-process SDK spans (e.g. `InMemorySpanExporter().get_finished_spans()`); return the roots."""
    from cyber_agent.importers._write import write_plan

    roots = []
    for plan in plans_from_spans(records_from_sdk(spans), label):
        if await store.get_trace(plan.trace.trace_id) is None:
            await write_plan(store, plan)
        roots.append(plan.trace.trace_id)
    return roots
