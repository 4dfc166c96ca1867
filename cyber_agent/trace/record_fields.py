"""Projections of a trace's meta for `read_records(..., fields=)`: the named `Trace` fields only.

    read_records(roots, messages=False, events=False, goals=False,
                 fields=["status", "total_cost", "protocol.brief.objective", "protocol.validations.verdict"])

A field is a `Trace` field name or a dotted path into one: a part names a field of a model or a
key of a mapping, and a list is passed through (the rest of the path applies to each element,
so `protocol.validations.verdict` keeps every validation's verdict). `trace_id` is always kept.
The projection of a record is, by definition, `project_meta(full_meta, projection)`. A store may
read less to get there but returns exactly that, which the conformance tests check for every
store: the file and SQL stores project the JSON they parse; a store holding live `Trace`s dumps
only the parts asked for (`dump_projected`, pydantic's `include=`: half the time of a whole dump
for the tree view's fields, measured in docs/performance.md). `include=` narrows models only; a
path into a mapping (`context.key`) is dumped whole and projected after. The trace models'
own serializers only drop keys (empty claims), so a narrowed dump equals the projected one.
"""

from __future__ import annotations

import types
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from cyber_agent.errors import InvalidUpdateError
from cyber_agent.trace.models import Trace
from cyber_agent.trace.records import JSONRecord
from cyber_agent.trace.state import RUNNER_OWNED_CONTEXT, migrate_context

__all__ = ["TraceProjection", "dump_projected", "project_meta", "trace_projection"]

Spec = dict[str, Any]
"""Parts to keep: part -> True (the whole value) or a nested Spec."""


@dataclass(frozen=True, kw_only=True)
class TraceProjection:
    """A checked `fields=` list: what to keep of a meta, and a pydantic `include=` that dumps no less."""

    fields: tuple[str, ...]
    """The dotted paths asked for (sorted, `trace_id` added)."""
    spec: Spec
    """The nested parts to keep (`project_meta` applies it)."""
    include: Mapping[str, Any]
    """A `Trace.model_dump(include=...)` argument whose dump holds at least `spec` (only models are narrowed)."""
    exact: bool
    """Whether the `include=` dump is the projection already (no path narrows a mapping)."""


def trace_projection(fields: Collection[str]) -> TraceProjection:
    """Check `fields` against `Trace`'s schema and return the projection (an unknown field raises, named)."""
    if isinstance(fields, str):
        raise InvalidUpdateError(f"fields must be a collection of field names, got the string {fields!r}")
    return _projection(tuple(sorted({*fields, "trace_id"})))


@lru_cache(maxsize=64)
def _projection(fields: tuple[str, ...]) -> TraceProjection:
    spec: Spec = {}
    for path in fields:
        parts = path.split(".") if isinstance(path, str) else []
        if not parts or not all(parts):
            raise InvalidUpdateError(f"fields: {path!r} is not a field name or a dotted path of them")
        node = spec
        for depth, part in enumerate(parts):
            if node.get(part) is True:
                break  # the whole value is kept already
            if depth == len(parts) - 1:
                node[part] = True
            else:
                node = node.setdefault(part, {})
    include = _include(Trace, spec, "")
    return TraceProjection(fields=fields, spec=spec, include=include, exact=_same(include, spec))


def _same(include: Mapping[Any, Any], spec: Spec | bool) -> bool:
    """Whether `include` keeps exactly `spec` (a list level is `__all__` in `include`, passed through in `spec`)."""
    if set(include) == {"__all__"}:
        inner = include["__all__"]
        return inner is True if spec is True else isinstance(inner, Mapping) and _same(inner, spec)
    if not isinstance(spec, dict) or set(include) != set(spec):
        return False
    for part, sub in spec.items():
        narrowed = include[part]
        if (sub is True) != (narrowed is True) or (sub is not True and not _same(narrowed, sub)):
            return False
    return True


def _unwrap(annotation: Any) -> Any:
    """The type inside `X | None` (or `Optional[X]`); a union of several types counts as Any."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return _unwrap(args[0]) if len(args) == 1 else Any
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _include(annotation: Any, spec: Spec, where: str) -> dict[Any, Any]:
    """The `include=` of `spec` under a value of type `annotation` (`where`: its dotted path, for errors)."""
    annotation = _unwrap(annotation)
    origin = get_origin(annotation)
    if origin in (list, tuple, set, frozenset) or (isinstance(origin, type) and issubclass(origin, Sequence)):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        element = args[0] if args else Any
        return {"__all__": _include(element, spec, where) if _is_model(_unwrap(element)) else True}
    if not _is_model(annotation):
        raise InvalidUpdateError(f"fields: {where!r} has no named parts (it is not a model); keep it whole")
    out: dict[Any, Any] = {}
    for part, sub in spec.items():
        info = annotation.model_fields.get(part)
        path = f"{where}.{part}" if where else part
        if info is None:
            known = ", ".join(sorted(annotation.model_fields))
            raise InvalidUpdateError(f"fields: {path!r} is not a field of {annotation.__name__} (fields: {known})")
        inner = _unwrap(info.annotation)
        narrow = sub is not True and (_is_model(inner) or _is_model_sequence(inner))
        out[part] = _include(inner, sub, path) if narrow else True
        if sub is not True and not narrow and not _is_mapping(inner):
            raise InvalidUpdateError(f"fields: {path!r} has no named parts (a {getattr(inner, '__name__', inner)}); "
                                     "keep it whole")
    return out


def _is_model_sequence(annotation: Any) -> bool:
    origin = get_origin(annotation)
    return origin in (list, tuple, set, frozenset) and any(_is_model(_unwrap(a)) for a in get_args(annotation))


def _is_mapping(annotation: Any) -> bool:
    origin = get_origin(annotation) or annotation
    return annotation is Any or (isinstance(origin, type) and issubclass(origin, Mapping))


def _project(value: Any, spec: Spec) -> Any:
    if isinstance(value, dict):
        return {part: value[part] if sub is True else _project(value[part], sub) for part, sub in spec.items()
                if part in value}
    if isinstance(value, list):
        return [_project(item, spec) for item in value]
    return value


def project_meta(meta: JSONRecord, projection: TraceProjection) -> JSONRecord:
    """The parts of a persisted meta `projection` keeps (a pre-typed record migrated first, as `TraceRecord` does)."""
    context = meta.get("context")
    if isinstance(context, dict) and not RUNNER_OWNED_CONTEXT.isdisjoint(context):
        meta = migrate_context(meta)
    out: JSONRecord = _project(meta, projection.spec)
    return out



def dump_projected(trace: Trace, projection: TraceProjection) -> JSONRecord:
    """`project_meta(trace.model_dump(mode="json"), projection)`, without dumping what is not kept."""
    dumped: JSONRecord = trace.model_dump(mode="json", include=projection.include)
    return dumped if projection.exact else _project(dumped, projection.spec)
