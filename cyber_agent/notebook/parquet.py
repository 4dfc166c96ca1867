"""Every frame of a `TraceFrames` as Parquet files, and back (needs pyarrow: `pip install 'cyber-agent[parquet]'`).

    frames = to_frames("data/exports/recursive_demo.jsonl")   # a whole export, or a store
    frames.to_parquet("recursive_demo.parquet")               # a folder: one file per frame
    again = read_parquet("recursive_demo.parquet")            # the same frames, dtypes included

The folder holds `traces.parquet`, `messages.parquet`, ... (one per frame of `SCHEMAS`) and
`frames.json` (format, version, frame names and row counts). Nested data (the `object`
columns: contexts, payloads, tool arguments, report lists) is stored as JSON text, because
Parquet needs one type per column and these dicts differ from row to row; reading decodes it,
so a round trip gives back equal frames. The folder is written beside the target and renamed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from cyber_agent.errors import ConfigurationError, CorruptRecordError

if TYPE_CHECKING:
    from cyber_agent.notebook.frames import TraceFrames

__all__ = ["PARQUET_FORMAT", "read_parquet", "write_parquet"]

PARQUET_FORMAT = "cyber_agent.frames"
"""Value of `frames.json`'s `format` key."""
_VERSION = 1
_MANIFEST = "frames.json"


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            "pyarrow", "is needed for Parquet files: pip install 'cyber-agent[parquet]' (or pip install pyarrow)"
        ) from None


def _encode(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def write_parquet(frames: TraceFrames, path: str | os.PathLike[str]) -> Path:
    """Write every frame to `path` (a folder, replaced if it exists); return the folder."""
    from cyber_agent.notebook.frames import SCHEMAS

    _require_pyarrow()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        counts = {}
        for name, schema in SCHEMAS.items():
            frame = getattr(frames, name).copy()
            for column, dtype in schema.items():
                if dtype == "object":
                    frame[column] = frame[column].map(_encode).astype("string")
            frame.to_parquet(staging / f"{name}.parquet", index=False)
            counts[name] = len(frame)
        manifest = {"format": PARQUET_FORMAT, "version": _VERSION, "frames": counts}
        (staging / _MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def read_parquet(path: str | os.PathLike[str]) -> TraceFrames:
    """Read a folder written by `TraceFrames.to_parquet` back into frames with the `SCHEMAS` dtypes."""
    from cyber_agent.notebook.frames import SCHEMAS, TraceFrames

    _require_pyarrow()
    source = Path(path)
    try:
        manifest = json.loads((source / _MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorruptRecordError(source, f"no {_MANIFEST}: not a folder written by TraceFrames.to_parquet") from None
    except json.JSONDecodeError as exc:
        raise CorruptRecordError(source / _MANIFEST, f"is not JSON ({exc.msg})") from None
    if manifest.get("format") != PARQUET_FORMAT:
        raise CorruptRecordError(source / _MANIFEST, f"format {manifest.get('format')!r}, expected {PARQUET_FORMAT!r}")
    parts: dict[str, pd.DataFrame] = {}
    for name, schema in SCHEMAS.items():
        file = source / f"{name}.parquet"
        if not file.exists():  # a frame added by a newer version is missing from an older folder
            parts[name] = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in schema.items()})
            continue
        frame = pd.read_parquet(file)
        columns = {}
        for column, dtype in schema.items():
            if column not in frame:
                columns[column] = pd.Series([None] * len(frame), dtype=dtype)
            elif dtype == "object":
                columns[column] = pd.Series([None if pd.isna(v) else json.loads(v) for v in frame[column]], dtype=object)
            else:
                columns[column] = frame[column].astype(dtype)
        parts[name] = pd.DataFrame(columns)
        expected = manifest.get("frames", {}).get(name)
        if expected is not None and expected != len(frame):
            raise CorruptRecordError(file, f"holds {len(frame)} rows, {_MANIFEST} announces {expected}")
    return TraceFrames(**parts)
