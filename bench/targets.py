"""Targets of an issue as rows a bench emits and `bench/run_all.py` gathers into one table; the "before" tree.

A bench that measures a target of an issue puts rows made by `target()` in its JSON under
`"issue_targets"` (next to whatever else it writes); `run_all.py` reads every bench's rows, matches them
by `id` against the issue's declared list (`ISSUE_34`), and prints one table — measure, before,
after, floor, ratio, target, met — in which a declared target no bench measured shows as
`NOT MEASURED`. `python bench/run_all.py --markdown FILE` writes the same table as Markdown for
`docs/performance.md`.

Each row is measured in one run: `after` on this checkout, `before` (when the bench can) on the
code before the issue (`before_tree()`: `BEFORE_REF` extracted once into a temporary folder and
put first on a child process's `PYTHONPATH`), `floor` the physical floor beside it (a bare
`pd.read_sql`, raw inserts, reading and parsing the files, the ideal of a sweep), all in the same
run, on the same loaded machine.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[1]
BEFORE_REF = "deaf9a086f2b84a44f758dd339688aa33384dd78"
"""The main branch before issue #34's work (2026-12-04): what `before` columns measure."""

Direction = Literal["<=", ">="]


@dataclass(frozen=True, kw_only=True)
class Declared:
    """One target the issue states: the bench that measures it fills the row of this `id`."""

    id: str
    measure: str
    limit: str
    """As the issue states it, e.g. `<= 0.6 s`, `>= 1.5x the in-process path`."""
    bench: str
    """The `run_all.py` key of the bench that measures it."""


ISSUE_34: tuple[Declared, ...] = (
    # frames (bench key `frames`, engineer `frames`)
    Declared(id="34.frames.sqlite_100k", measure="to_frames, SQLite, 100k messages", limit="<= 0.5 s", bench="frames"),
    Declared(id="34.frames.sqlite_100k_vs_read_sql", measure="to_frames / pd.read_sql, SQLite, 100k messages",
             limit="ratio reported", bench="frames"),
    Declared(id="34.frames.sqlite_1m", measure="to_frames, SQLite, 1M messages over 1,000 traces", limit="<= 5 s",
             bench="frames"),
    Declared(id="34.frames.sqlite_1m_memory", measure="peak memory, SQLite, 1M messages", limit="<= 2 GB", bench="frames"),
    Declared(id="34.frames.postgres_vs_read_sql", measure="to_frames / pd.read_sql, PostgreSQL", limit="<= 1.5x",
             bench="frames"),
    Declared(id="34.frames.file_vs_parse", measure="to_frames / read+parse files, file store", limit="<= 1.2x",
             bench="frames"),
    # per-run fixed cost (bench key `overhead`, engineer `fixedcost`)
    Declared(id="34.fixed.memory_n10", measure="memory store step / LangGraph in memory, N=10", limit="<= 0.1x",
             bench="overhead"),
    Declared(id="34.fixed.memory_n400", measure="memory store step / LangGraph in memory, N=400", limit="<= 0.1x",
             bench="overhead"),
    Declared(id="34.fixed.file_n10", measure="file store step / LangGraph in memory, N=10", limit="<= 0.5x",
             bench="overhead"),
    Declared(id="34.fixed.file_n400", measure="file store step / LangGraph in memory, N=400", limit="<= 0.5x",
             bench="overhead"),
    Declared(id="34.fixed.sqlite_n10", measure="SQLite store step / LangGraph (SQLite checkpointer), N=10",
             limit="<= 0.25x", bench="overhead"),
    Declared(id="34.fixed.sqlite_n400", measure="SQLite store step / LangGraph (SQLite checkpointer), N=400",
             limit="<= 0.25x", bench="overhead"),
    # sweeps (bench key `sweeps`)
    Declared(id="34.sweeps.process_64", measure="process pool, concurrency 64, 2 workers, 200 x 50 ms cells",
             limit=">= 500 cells/s", bench="sweeps"),
    Declared(id="34.sweeps.process_vs_asyncio", measure="process pool / in-process asyncio, concurrency 64",
             limit=">= 1.5x", bench="sweeps"),
    Declared(id="34.sweeps.ray_vs_process", measure="Ray / process pool, 2 workers, concurrency 64", limit=">= 1.0x",
             bench="sweeps"),
    Declared(id="34.sweeps.asyncio_64", measure="in-process asyncio, concurrency 64 (the limiter starts open)",
             limit="ratio reported", bench="sweeps"),
    # import time (bench key `import`)
    Declared(id="34.import.notebook", measure="import cyber_agent.notebook", limit="<= 0.6 s", bench="import"),
)


def target(id: str, *, after: float, unit: str, limit: str, met: bool | None, before: float | None = None,
           floor: float | None = None, floor_name: str = "", ratio: float | None = None, ratio_of: str = "",
           note: str = "") -> dict[str, Any]:
    """One measured target row, as `run_all.py` reads it from a bench's JSON (`"issue_targets": [...]`).

    `after`/`before`/`floor` are in `unit`; `ratio` is what the target bounds when it is a ratio
    (`ratio_of` says of what to what), else None; `met` is None for a target that only reports.
    """
    return {"id": id, "after": after, "before": before, "floor": floor, "floor_name": floor_name, "unit": unit,
            "ratio": ratio, "ratio_of": ratio_of, "limit": limit, "met": met, "note": note}


def before_tree(ref: str = BEFORE_REF) -> Path:
    """A folder holding `cyber_agent/` as it was at `ref` (extracted once per machine; put it first on PYTHONPATH)."""
    root = Path(tempfile.gettempdir()) / f"cyber-agent-before-{ref[:12]}"
    if (root / "cyber_agent" / "__init__.py").exists():
        return root
    partial = Path(tempfile.mkdtemp(prefix=f"cyber-agent-before-{ref[:12]}-"))
    archive = partial / "tree.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), ref, "cyber_agent"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(partial, filter="data")
    archive.unlink()
    try:
        partial.rename(root)
    except OSError:  # another bench extracted it meanwhile
        pass
    return root


def env_for(tree: Path | None) -> dict[str, str]:
    """The environment of a child process that imports `cyber_agent` from `tree` (None: this checkout)."""
    env = dict(os.environ)
    first = str(tree if tree is not None else REPO)
    env["PYTHONPATH"] = first + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
