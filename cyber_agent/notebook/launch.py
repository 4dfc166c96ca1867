"""Launch legacy or recursive runs from a notebook or a script and watch them (SPEC J1).

    handle = await launch(TASK, mode="legacy", model="demo", store=".trace")   # in a cell
    result = await handle.result()                                            # later cell
    handle = run_sync(launch(TASK))                                           # plain script
    result = handle.wait()

The run executes on the toolkit's background loop (see `bridge.py`): the cell returns at once,
the kernel's loop stays free for widgets, `handle.wait()` works from sync code, and the run
outlives the cell or `asyncio.run` that started it. Progress is shown live.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner, RunResult
from cyber_agent.core.trace_setup import parse_root_task_anchor
from cyber_agent.errors import ConfigurationError, CyberAgentError, RunError, RunInterruptedError
from cyber_agent.llm.resolve import resolve_llm
from cyber_agent.llm.settings import ProviderSettings
from cyber_agent.llm.types import LLMCall
from cyber_agent.notebook.bridge import background_loop, in_background_thread
from cyber_agent.notebook.display import RichDisplay, html_table
from cyber_agent.notebook.pending_launch import PendingLaunch, awaitable_launch
from cyber_agent.notebook.interrupt import (
    STOP_GRACE_SECONDS,
    current_cell_id,
    previous_run_of_cell,
    remember_cell_run,
    sigint_calls,
    sigint_raises,
)
from cyber_agent.notebook.progress import ProgressSnapshot, ProgressTracker
from cyber_agent.notebook.progress_view import HtmlView, ViewGroup, html_view, make_view
from cyber_agent.notebook.records import read_records
from cyber_agent.notebook.task_inputs import check_task_inputs
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.memory_store import InMemoryTraceStore
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.store_url import STORE_ENV, open_store

__all__ = ["Mode", "PendingLaunch", "RunHandle", "launch", "run_config"]

Mode = Literal["legacy", "recursive"]


def _execution_count() -> int | None:
    """The kernel's current execution count (which cell run this is), None outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    count = getattr(shell, "execution_count", None)
    return count if isinstance(count, int) else None


def run_config(
    *, mode: Mode = "legacy", model: str = "demo", workspace: str | os.PathLike[str] | None = None,
    max_iterations: int = 30, **fields: Any,
) -> RunConfig:
    """Build the RunConfig of a launch; `mode` goes to `RunConfig.agent_mode` when this version has it."""
    if mode not in ("legacy", "recursive"):
        raise ConfigurationError("mode", f"must be 'legacy' or 'recursive', got {mode!r}")
    if "agent_mode" in fields:
        raise ConfigurationError("agent_mode", "pass mode='legacy' or mode='recursive' to launch() instead")
    if mode == "recursive":  # checked here, before anything is displayed or started, not deep inside the run
        parse_root_task_anchor(fields.get("root_task_anchor"))
    values: dict[str, Any] = {"model": model, "max_iterations": max_iterations, **fields}
    if workspace is not None:
        values["workspace"] = str(Path(workspace).resolve())
    # Checked at call time: the recursive half of the runner adds the field.
    if "agent_mode" in RunConfig.model_fields:
        values["agent_mode"] = mode
    elif mode == "recursive":
        raise ConfigurationError("mode", "recursive mode is not available in this version of cyber_agent; use mode='legacy'")
    return RunConfig(**values)


def _store(store: TraceStore | str | os.PathLike[str] | None) -> TraceStore:
    if store is None:
        # A notebook's throw-away default; CYBER_AGENT_STORE makes every launch persist.
        return open_store(os.environ[STORE_ENV]) if os.environ.get(STORE_ENV) else InMemoryTraceStore()
    if isinstance(store, (str, os.PathLike)):
        return open_store(store)  # a store URL, or a plain path (a folder; a *.db file is SQLite)
    return store


class RunHandle(RichDisplay):
    """A run in progress on the background loop: its trace id, live progress, stop and result."""

    def __init__(
        self, *, runner: AgentRunner, config: RunConfig, messages: list[dict[str, Any]], progress: bool | None,
        poll_interval: float = 0.25,
    ) -> None:
        self.runner = runner
        """The runner executing the run (one per launch)."""
        self.store: TraceStore = runner.trace_store
        """Where the run's traces are persisted."""
        self.config = config
        """The run's configuration."""
        self._messages = messages
        self._poll_interval = poll_interval
        self._tracker = ProgressTracker()
        self._snapshot = self._tracker.snapshot()
        # Made here, in the caller's context, so the live view is displayed in the caller's cell.
        self._views = ViewGroup(make_view(progress, self._snapshot))
        self._view_cell = _execution_count() if isinstance(self._views.views[0], HtmlView) else None
        self._started: concurrent.futures.Future[str] = concurrent.futures.Future()
        self._loop = background_loop()
        self._poll_errors: list[str] = []
        self._future: concurrent.futures.Future[RunResult] = asyncio.run_coroutine_threadsafe(self._drive(), self._loop)

    # ---- state --------------------------------------------------------------------------
    @property
    def trace_id(self) -> str | None:
        """Root trace id (None until the run created it)."""
        return self._started.result() if self._started.done() and not self._started.exception() else None

    @property
    def done(self) -> bool:
        """True once the run ended (completed, failed, stopped or raised)."""
        return self._future.done()

    @property
    def poll_errors(self) -> list[str]:
        """Store and display errors met while showing progress (progress never breaks the run)."""
        return [*self._poll_errors, *self._views.errors]

    @property
    def snapshot(self) -> ProgressSnapshot:
        """The latest progress snapshot (refreshed every `poll_interval` seconds while the run goes on)."""
        return self._snapshot

    def progress(self) -> HtmlView | ProgressSnapshot:
        """Live progress here: a new view, updated until the run ends (in a script: the latest snapshot).

        Return it from a cell (or `display` it) to watch the run where you are, e.g. after Run All
        scrolled the first one away; JupyterLab's "Create New View for Cell Output" pins it aside.
        """
        view = html_view(self._snapshot)
        if view is None:
            return self._snapshot
        if self.done:
            view.close(self._snapshot)
        else:
            self._views.add(view)
        return view

    @property
    def status(self) -> str:
        """The root's status as last seen."""
        return self._snapshot.status

    # ---- control ------------------------------------------------------------------------
    def stop(self, reason: str = "stopped from the notebook") -> list[str]:
        """Ask the run to stop (`AgentRunner.stop`); return the trace ids flagged."""
        trace_id = self.trace_id
        if trace_id is None:
            raise RunError("the run has not created its trace yet; await launch(...) before stopping it")
        if in_background_thread():
            return self.runner.stop(trace_id, reason)

        async def request() -> list[str]:
            return self.runner.stop(trace_id, reason)

        return asyncio.run_coroutine_threadsafe(request(), self._loop).result(timeout=30)

    def interrupt(self, reason: str = "interrupted from the notebook") -> list[str]:
        """Stop the run's whole subtree now: flag every registered descendant and trip the tree's
        interrupt fence, so each run halts at its next provider call, tool or spawn; return the ids flagged."""
        trace_id = self.trace_id
        if trace_id is None or self.done:
            return []

        async def request() -> list[str]:
            self.runner.interrupt(trace_id, reason)
            return self.runner.stop(trace_id, reason)

        if in_background_thread():
            self.runner.interrupt(trace_id, reason)
            return self.runner.stop(trace_id, reason)
        return asyncio.run_coroutine_threadsafe(request(), self._loop).result(timeout=30)

    async def result(self) -> RunResult:
        """Wait for the end of the run and return its RunResult.

        The kernel's interrupt (■) while waiting stops the run's subtree and, once it ended,
        raises `RunInterruptedError` (one line); a second ■ cancels the run outright.
        """
        loop = asyncio.get_running_loop()
        run = asyncio.wrap_future(self._future)
        interrupts = asyncio.Queue[None]()
        hits = 0
        deadline: float | None = None

        def on_sigint() -> None:
            loop.call_soon_threadsafe(interrupts.put_nowait, None)

        try:
            with sigint_calls(on_sigint):
                while not run.done():
                    signal: asyncio.Future[Any] = asyncio.ensure_future(interrupts.get())
                    timeout = None if deadline is None else max(0.0, deadline - loop.time())
                    waiting: set[asyncio.Future[Any]] = {run, signal}
                    done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                    if signal not in done:
                        signal.cancel()
                    if run in done:
                        break
                    if signal in done and hits == 0:
                        hits, deadline = 1, loop.time() + STOP_GRACE_SECONDS
                        self.interrupt("stopped by interrupt (■) while awaiting the result")
                    else:  # a second ■, or the stop took longer than the grace period
                        hits = 2
                        self._future.cancel()
                        break
        except asyncio.CancelledError:
            # Cancelled from outside (the kernel's own SIGINT handler, a timeout): never leave the run unseen.
            self.interrupt("the cell awaiting the result was cancelled")
            raise
        finally:
            self._views.resend()
        if hits:
            raise self._interrupted(forced=hits > 1) from None
        return await run

    def wait(self, timeout: float | None = None) -> RunResult:
        """Block until the run ends and return its RunResult.

        Interrupting (■, Ctrl-C) stops the run's subtree, waits for it to end and raises
        `RunInterruptedError` (one line); a second interrupt cancels the run outright.
        """
        if in_background_thread():
            raise RuntimeError("wait() on the background loop would block the run itself; use `await handle.result()`")
        forced = False
        with sigint_raises():
            try:
                result = self._future.result(timeout)
                self._views.resend()
                return result
            except KeyboardInterrupt:
                pass
            self.interrupt("stopped by interrupt (■) while waiting")
            try:
                self._future.result(STOP_GRACE_SECONDS)
            except KeyboardInterrupt:
                forced = True
            except concurrent.futures.TimeoutError:
                forced = True
            except BaseException:  # noqa: BLE001 - the run's own error is reported by the line below
                pass
            if forced:
                self._future.cancel()
        self._views.resend()
        raise self._interrupted(forced=forced) from None

    def _relaunched(self) -> str:
        """Stop this run if it still goes on (its cell launched again) and say what became of it, in one line."""
        where = f"its traces stay in {type(self.store).__name__}"
        if self.done or self.trace_id is None:
            return f"the previous run of this cell, {self.trace_id}, had ended {self._snapshot.status}; {where}"
        flagged = self.interrupt("its notebook cell launched a new run")
        return (f"the previous run of this cell, {self.trace_id}, was still running: stopped it "
                f"(subtree stop, {len(flagged)} traces flagged); {where}")

    def _interrupted(self, *, forced: bool) -> RunInterruptedError:
        """The one-line error of an interrupted wait (the run has ended, or was cancelled when `forced`)."""
        p = self._snapshot
        status = "cancelled" if forced or self._future.cancelled() else p.status
        how = "cancelled (a second interrupt, or the stop took too long)" if forced else f"ended {status}"
        detail = (f"run {self.trace_id} {how} after {p.llm_calls} LLM calls, {p.agents} agents; "
                  f"its traces stay in {type(self.store).__name__}")
        return RunInterruptedError(self.trace_id, status, detail)

    # ---- the run, on the background loop --------------------------------------------------
    async def _drive(self) -> RunResult:
        trace: Trace | None = None
        new = []
        error: BaseException | None = None
        finished = asyncio.Event()

        async def consume() -> None:
            nonlocal trace, error
            try:
                async for event in self.runner.run(self._messages, self.config):
                    if isinstance(event, Trace):
                        trace = event
                        self._tracker.observe_trace(event)
                    else:
                        new.append(event)
                        self._tracker.observe_message(event)
                    self._show()
                    if trace is not None and not self._started.done():
                        self._started.set_result(trace.trace_id)
            except Exception as exc:  # noqa: BLE001 - re-raised below, after polling stopped
                error = exc
            finally:
                finished.set()

        async def poll() -> None:
            while not finished.is_set():
                try:
                    await asyncio.wait_for(finished.wait(), self._poll_interval)
                except TimeoutError:
                    await self._poll(final=False)

        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(consume())
                group.create_task(poll())
            if error is None and trace is None:
                error = RunError("the run ended without creating a trace")
            if error is not None:
                raise error
            await self._poll(final=True)
            assert trace is not None
            return RunResult(trace=trace, answer=trace.result_summary if trace.status == "completed" else None, messages=new)
        except BaseException as exc:
            if not self._started.done():
                self._started.set_exception(exc)
            raise
        finally:
            self._snapshot = self._tracker.snapshot()
            self._views.close(self._snapshot)

    async def _poll(self, *, final: bool) -> None:
        root = self._tracker.root_trace_id
        if root is None:
            return
        try:
            ids = list(self.runner.running())
            if final:  # validators announce no events: every trace of the tree, read once more
                ids += [r.trace_id for r in await read_records(self.store, [root], messages=False, events=False)]
            await self._tracker.poll(self.store, ids, everything=final)
        except (CyberAgentError, OSError) as exc:
            self._poll_errors.append(str(exc))
        self._show()

    def _show(self) -> None:
        self._snapshot = self._tracker.snapshot()
        self._views.update(self._snapshot)

    # ---- display ------------------------------------------------------------------------
    def _result(self) -> RunResult | None:
        if not self._future.done() or self._future.cancelled() or self._future.exception() is not None:
            return None
        return self._future.result()

    def _outcome(self) -> list[tuple[str, str]]:
        """(label, text) lines of the end of the run: the answer, or why it did not complete and the refusal behind it."""
        result = self._result()
        if result is None:
            if self.done and not self._future.cancelled() and self._future.exception() is not None:
                return [("error", str(self._future.exception()))]
            return []
        if result.status == "completed":
            return [("answer", result.answer or "")]
        lines = [("reason", result.reason or "")]
        if result.refusal:
            lines.append(("refusal", result.refusal))
        return lines

    def _ipython_display_(self) -> None:
        """One live view per handle: a running handle shown in its launch cell points at the view above it.

        Shown in a later cell while it runs, it is a live view (`progress()`, which replaces
        itself by its final snapshot when the run ends); once done, the final table and answer.
        Never a second table frozen at "running · 0 LLM calls".
        """
        from IPython.display import display

        if self.done:
            display(self._repr_mimebundle_(), raw=True)
        elif self._view_cell is not None and self._view_cell == _execution_count():
            line = f"RunHandle {self.trace_id or '(starting)'} on {type(self.store).__name__}: live progress above"
            display({"text/plain": line, "text/html": f"<code>{html.escape(line)}</code>"}, raw=True)
        else:
            view = self.progress()
            display(view if isinstance(view, HtmlView) else self._repr_mimebundle_(), raw=not isinstance(view, HtmlView))

    def __repr__(self) -> str:
        p = self._snapshot
        return (f"RunHandle(trace_id={self.trace_id!r}, status={p.status!r}, agents={p.agents}, "
                f"llm_calls={p.llm_calls}, tokens={p.tokens})")

    def to_text(self) -> str:
        """Trace id, progress line and (when done) the answer, or the stop reason and the refusal behind it."""
        lines = [f"RunHandle {self.trace_id or '(starting)'} on {type(self.store).__name__}", "  " + self._snapshot.to_text()]
        for label, text in self._outcome():
            pad = " " * (len(label) + 4)
            lines.append(f"  {label}: " + text.replace("\n", "\n" + pad))
        return "\n".join(lines)

    def to_html(self) -> str:
        """The progress table, plus the answer, or the stop reason and the refusal, when done."""
        rows = [["trace", self.trace_id or "(starting)"], ["store", type(self.store).__name__], *self._outcome()]
        return self._snapshot.to_html() + html_table(rows)


@awaitable_launch
async def launch(
    task: str | Sequence[dict[str, Any]],
    *,
    mode: Mode = "legacy",
    model: str = "demo",
    store: TraceStore | str | os.PathLike[str] | None = None,
    workspace: str | os.PathLike[str] | None = None,
    max_iterations: int = 30,
    progress: bool | None = None,
    llm_call: LLMCall | None = None,
    tool_registry: ToolRegistry | None = None,
    poll_interval: float = 0.25,
    provider: ProviderSettings | Mapping[str, Any] | None = None,
    **run_config_fields: Any,
) -> RunHandle:
    """Start a run on the background loop; `await` it for the RunHandle, returned once the root trace exists.

    What it returns is a `PendingLaunch` (a coroutine that also explains a forgotten `await`).
    The options are checked before anything is displayed: the model spec (a "did you mean" for
    a mistyped one), the root task anchor, and that the workspace holds the task's input files.

    `store`: a TraceStore, a store URL (`file:.trace`, `sqlite:///runs.db`, `memory:`), a plain
    path, or None (`CYBER_AGENT_STORE` if set, else an in-memory store). `progress`: None/True
    shows live progress (live HTML in a kernel, text lines elsewhere), False shows nothing.
    `provider`: `ProviderSettings` or a dict of its fields (timeout, retries, stream, max_tokens,
    ...); unset fields come from `CYBER_AGENT_*`. Other keyword arguments are RunConfig fields
    (e.g. `tool_dialect="xml"`).
    """
    if provider is not None:
        run_config_fields["provider"] = provider if isinstance(provider, ProviderSettings) else dict(provider)
    config = run_config(mode=mode, model=model, workspace=workspace, max_iterations=max_iterations, **run_config_fields)
    messages = [{"role": "user", "content": task}] if isinstance(task, str) else [dict(m) for m in task]
    # Checked before any view is displayed: a bad spec or a workspace without the task's input is one short error.
    if llm_call is None:
        resolve_llm(config.model, settings=config.provider)
    check_task_inputs(messages, config.workspace)
    runner = AgentRunner(trace_store=_store(store), llm_call=llm_call, tool_registry=tool_registry)
    cell = current_cell_id()
    earlier = previous_run_of_cell(cell)
    if isinstance(earlier, RunHandle):
        print(earlier._relaunched())  # before the new progress view, so it reads first
    handle = RunHandle(runner=runner, config=config, messages=messages, progress=progress, poll_interval=poll_interval)
    remember_cell_run(cell, handle)
    await asyncio.wrap_future(handle._started)
    return handle
