"""Projections of a trace's meta for `read_records(..., fields=)`: the named `Trace` fields only.

    read_records(roots, messages=False, events=False, goals=False,
                 fields=["status", "total_cost", "protocol.brief.objective", "protocol.validations.verdict"])

A field is a `Trace` field name or a dotted path into one: a part names a field of a model or a
key of a mapping, and a list is passed through (the rest of the path applies to each element,
so `protocol.validations.verdict` keeps every validation's verdict). `trace_id` is always kept.
The projection of a record is, by definition, `project_meta(full_meta, projection)`. A store may
read less to get there but returns exactly that, which the conformance tests check for every
store: the file and SQL stores project the JSON they parse; a store holding live `Trace`s dumps
only the parts asked for (`dump_projected`: attributes where JSON mode keeps them as they are,
pydantic for the rest; for the tree view's fields a third of a whole dump's time).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
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


Dump = Callable[[Any], Any]
"""Dumps the kept parts of one model instance (`_dumper`)."""


@dataclass(frozen=True, kw_only=True)
class TraceProjection:
    """A checked `fields=` list: the parts of a meta to keep, and how to dump them from a live `Trace`."""

    fields: tuple[str, ...]
    """The dotted paths asked for (sorted, `trace_id` added)."""
    spec: Spec
    """The nested parts to keep (`project_meta` applies it)."""
    dump: Dump = field(compare=False, repr=False)
    """`dump_projected`'s function for this projection."""


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
    return TraceProjection(fields=fields, spec=spec, dump=_dumper(Trace, spec, ""))


def _unwrap(annotation: Any) -> Any:
    """The type inside `X | None` (or `Optional[X]`); a union of several types counts as Any."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return _unwrap(args[0]) if len(args) == 1 else Any
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _element(annotation: Any) -> Any:
    """The model a list (tuple, set) field holds, None when it holds something else or is no sequence."""
    origin = get_origin(annotation)
    if origin not in (list, tuple, set, frozenset):
        return None
    models = {_unwrap(a) for a in get_args(annotation) if a is not Ellipsis} - {type(None)}
    return next(iter(models)) if len(models) == 1 and _is_model(next(iter(models))) else None


def _is_mapping(annotation: Any) -> bool:
    origin = get_origin(annotation) or annotation
    return annotation is Any or (isinstance(origin, type) and issubclass(origin, Mapping))


_PLAIN = frozenset({str, int, float, bool})
"""Types whose value `model_dump(mode="json")` returns as it is."""


def _dumper(cls: type[BaseModel], spec: Spec, where: str) -> Dump:
    """Check `spec` against `cls` (`where`: its dotted path, for errors) and return a function dumping those parts.

    It reads attributes where that is exact: a plain JSON value of a model that changes nothing
    when it is dumped (no field serializers or excluded fields; a model serializer only when it
    declares the keys it may drop, `DUMP_MAY_DROP`, and `spec` keeps none of them). Anything else
    (a datetime, an enum, a whole model, a mapping) is dumped by pydantic and cut by `_project`.
    """
    parts: list[tuple[str, str, Any]] = []
    for part, sub in spec.items():
        info = cls.model_fields.get(part)
        path = f"{where}.{part}" if where else part
        if info is None:
            known = ", ".join(sorted(cls.model_fields))
            raise InvalidUpdateError(f"fields: {path!r} is not a field of {cls.__name__} (fields: {known})")
        inner = _unwrap(info.annotation)
        if sub is True:
            parts.append((part, "leaf", None))
        elif _is_model(inner):
            parts.append((part, "model", _dumper(inner, sub, path)))
        elif (element := _element(inner)) is not None:
            parts.append((part, "list", _dumper(element, sub, path)))
        elif _is_mapping(inner):
            parts.append((part, "cut", sub))
        else:
            raise InvalidUpdateError(f"fields: {path!r} has no named parts (a {getattr(inner, '__name__', inner)}); "
                                     "keep it whole")
    decorators = cls.__pydantic_decorators__
    drops = getattr(cls, "DUMP_MAY_DROP", None) if decorators.model_serializers else frozenset()
    if drops is None or not drops.isdisjoint(spec) or decorators.field_serializers \
            or any(cls.model_fields[part].exclude for part in spec):
        return lambda model: _project(model.model_dump(mode="json"), spec)

    def dump(model: Any) -> JSONRecord:
        out: JSONRecord = {}
        values = model.__dict__  # pydantic keeps field values here: a dict lookup, not an attribute lookup
        for part, kind, inner in parts:
            value = values[part] if part in values else getattr(model, part)
            if value is None or type(value) in _PLAIN:
                out[part] = value
            elif kind == "model" and isinstance(value, BaseModel):
                out[part] = inner(value)
            elif kind == "list" and type(value) is list and all(isinstance(v, BaseModel) for v in value):
                out[part] = [inner(v) for v in value]
            else:
                whole = model.model_dump(mode="json", include={part: True})[part]
                out[part] = whole if kind == "leaf" else _project(whole, spec[part])
        return out

    return dump


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
    """`project_meta(trace.model_dump(mode="json"), projection)`, without dumping what is not kept (`_dumper`)."""
    dumped: JSONRecord = projection.dump(trace)
    return dumped
