"""Where each cell of a sweep stands, read from the store: the store is the sweep's ledger.

Attempt `n` of a cell is the root trace `SweepCell.trace_id(n)`. Reading a cell probes its
attempts in order until one is missing: a scored attempt ends the cell; an `error` attempt
counts against `Sweep.max_retries`; an attempt without a final record was cut off (its
process died mid-run) and, when the caller owns the sweep (`mark=True`), is marked
`interrupted` and its trace `stopped`, so the next attempt runs. An interrupted attempt never
counts as a retry: no cell is lost to a kill. One sweep process at a time owns a store's cells.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from cyber_agent.experiments.grid import Sweep, SweepCell
from cyber_agent.trace.clock import utc_now
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceReader, TraceStore
from cyber_agent.trace.sweep_records import SweepCellRecord

__all__ = ["CellStatus", "blank_record", "read_ledger"]

_INTERRUPTED = "the sweep process ended before this attempt finished; the cell ran again"
_PARALLEL_READS = 16


@dataclass(frozen=True, kw_only=True)
class CellStatus:
    """One cell and what the store holds for it."""

    cell: SweepCell
    record: SweepCellRecord | None
    """The scored attempt; else the last errored attempt; None when nothing finished."""
    next_attempt: int
    """The first attempt number not in the store."""
    errors: int
    """Attempts that raised."""

    @property
    def done(self) -> bool:
        """True once an attempt was scored."""
        return self.record is not None and self.record.state == "scored"

    def exhausted(self, max_retries: int) -> bool:
        """True when the cell errored more often than the retries allow."""
        return not self.done and self.errors > max_retries


def blank_record(sweep: Sweep, cell: SweepCell, attempt: int) -> SweepCellRecord:
    """The record of a cell attempt before anything is known about it."""
    return SweepCellRecord(
        sweep=sweep.name, key=cell.key, task_id=cell.task.id, model=cell.model.name, mode=cell.mode, config=cell.config,
        repeat=cell.repeat, seed=cell.seed, attempt=attempt,
    )


async def _mark_interrupted(store: TraceStore, sweep: Sweep, cell: SweepCell, attempt: int, trace: Trace) -> None:
    record = (trace.sweep_cell or blank_record(sweep, cell, attempt)).model_copy(
        update={"state": "interrupted", "error": _INTERRUPTED, "finished_at": utc_now()})
    updates: dict[str, object] = {"sweep_cell": record}
    if trace.status in ("running", "waiting_confirmation"):
        updates.update(status="stopped", error_message=_INTERRUPTED)
    await store.update_trace(trace.trace_id, **updates)


async def _read_cell(store: TraceReader, sweep: Sweep, cell: SweepCell, writer: TraceStore | None) -> CellStatus:
    attempt, errors = 0, 0
    last: SweepCellRecord | None = None
    while (trace := await store.get_trace(cell.trace_id(attempt))) is not None:
        record = trace.sweep_cell
        if record is not None and record.state == "scored":
            return CellStatus(cell=cell, record=record, next_attempt=attempt + 1, errors=errors)
        if record is not None and record.state == "error":
            errors += 1
            last = record
        elif (record is None or record.state == "running") and writer is not None:
            await _mark_interrupted(writer, sweep, cell, attempt, trace)
        attempt += 1
    return CellStatus(cell=cell, record=last, next_attempt=attempt, errors=errors)


async def read_ledger(store: TraceReader, sweep: Sweep, *, mark: bool = False) -> list[CellStatus]:
    """The status of every cell of `sweep`, in grid order; `mark=True` marks cut-off attempts interrupted."""
    gate = asyncio.Semaphore(_PARALLEL_READS)
    writer: TraceStore | None = None
    if mark:
        if not isinstance(store, TraceStore):
            raise TypeError(f"marking interrupted attempts needs a writable TraceStore, got {type(store).__name__}")
        writer = store

    async def read(cell: SweepCell) -> CellStatus:
        async with gate:
            return await _read_cell(store, sweep, cell, writer)

    cells = sweep.cells()
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(read(cell)) for cell in cells]
    return [task.result() for task in tasks]
