"""SDK spans written as an OTLP/JSON file, as a collector's file exporter writes one (hex ids)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan


def _hex(node: object) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex(value)
    elif isinstance(node, list):
        for item in node:
            _hex(item)


def write_otlp_json(spans: Sequence[ReadableSpan], path: Path, *, hex_ids: bool = True) -> Path:
    """One `ExportTraceServiceRequest` as JSON: hex ids (OTLP/JSON) or protobuf's base64 when `hex_ids` is False."""
    request = MessageToDict(encode_spans(spans))
    if hex_ids:
        _hex(request)
    path.write_text(json.dumps(request), encoding="utf-8")
    return path
