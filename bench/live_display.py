"""Benchmark one live update in a real kernel: the old widget path (before) against display-id HTML (after).

    .venv/bin/python bench/live_display.py                    # before = the code before #36's live-HTML change
    .venv/bin/python bench/live_display.py --quick            # fewer updates and rounds
    .venv/bin/python bench/live_display.py --before REF --json out.json

Two ipykernel processes are started with jupyter_client, one importing `cyber_agent` as it was
at `--before` (extracted with `bench/targets.py:before_tree`), one this checkout. In each the
bench builds the same views and sends updates from inside the kernel, timing each send with
`perf_counter` and counting the bytes the kernel's session serialises onto its sockets for it
(header, parent, metadata, content: what goes over ZMQ to the server, before the websocket):

- `progress`: the progress view of a run with 12 traces running (`ProgressSnapshot.to_html`).
  Before: `WidgetView.widget.value = html` (an ipywidgets comm message); after:
  `HtmlView`'s `LiveDisplay.update(bundle, force=True)` (one `update_display_data` with text/plain
  and text/html).
- `tree 16` / `tree 200`: the live tree of a 16-trace (the recursive demo's size) and a
  200-trace sample tree (`sample_tree.py:awrite_sample_tree`), the `TreeView` already read.
  Before: the feed widget's value (`LiveTreeView._feed_html`: the data and pages JSON plus a
  status line; the page's script redrew from it); after: the whole output bundle
  (`LiveTreeView._live_bundle`: the view's HTML with its script and static outline, and the
  status line), which is what a saved notebook keeps.
- `sweep burst`: 200 snapshots in a row, as a sweep's engine calls its observer; per snapshot.
  Before: the bar's max / value / description / style and the line, each a comm message, on every
  call; after: one update at most every 0.1 s, the latest held back.

Medians over `--rounds` rounds (the sides alternate) of `--updates` updates each. Kernel-side
cost only: what JupyterLab does with the message (a widget view's re-render or an output's) is
not in it.
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import sys
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from targets import before_tree, env_for  # noqa: E402

BEFORE_LIVE = "d0db749^"
"""The commit before the live views became display-id HTML (#36 "saved means readable")."""

SETUP = textwrap.dedent('''
    import asyncio, json, time
    from types import SimpleNamespace
    from IPython import get_ipython
    from IPython.display import display
    from cyber_agent.notebook.progress import AgentActivity, ProgressSnapshot
    from cyber_agent.notebook.sample_tree import awrite_sample_tree
    from cyber_agent.notebook.tree_view import atree_view
    from cyber_agent.trace import InMemoryTraceStore
    from cyber_agent.experiments import SweepProgress
    from cyber_agent.notebook.sweep_view import SweepProgressView
    import cyber_agent.notebook.progress_view as pv
    import cyber_agent.notebook.tree_view_live as tvl
    SIDE = "after" if hasattr(pv, "HtmlView") else "before"
    _session = get_ipython().kernel.session
    _serialize = _session.serialize
    SENT = [0]
    def _counting(msg, ident=None):
        parts = _serialize(msg, ident)
        SENT[0] += sum(len(p) for p in parts)
        return parts
    _session.serialize = _counting

    def snapshot(i):
        active = tuple(AgentActivity(trace_id=f"root@e-{k}", label=f"explore {k}", role="explore", depth=1 + k % 3,
                                     llm_calls=i + k, tokens=1000 * (i + k), tool="read_file" if k % 2 else None)
                       for k in range(12))
        return ProgressSnapshot(trace_id="root", status="running", agents=14, running=12, depth=3, llm_calls=40 + i,
                                tokens=52_000 + i, cost=0.0123 + i / 1e4, elapsed=12.5 + i, validators=3, active=active)

    async def tree(n):
        store = InMemoryTraceStore()
        sample = await awrite_sample_tree(store, traces=n, seed=7)
        view = await atree_view(store, sample.root_trace_id)
        running = {t: ("read_file", time.time()) for t in view._cols.ids[1:4]}  # three traces marked running
        return await atree_view(store, sample.root_trace_id, running=running)

    # The kernel's own loop runs this cell: build the trees on a thread with a loop of its own.
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        TREES = {n: pool.submit(asyncio.run, tree(n)).result() for n in (16, 200)}

    def measure(send, n):
        times, sizes = [], []
        for i in range(n):
            SENT[0] = 0
            t0 = time.perf_counter()
            send(i)
            times.append(time.perf_counter() - t0)
            sizes.append(SENT[0])
        return times, sizes

    if SIDE == "before":
        progress_view = pv.WidgetView(snapshot(0))
        display(progress_view)
        def progress_send(i):
            progress_view.widget.value = snapshot(i).to_html()
        import ipywidgets
        feed = ipywidgets.HTML(value="")
        display(feed)
        stub = SimpleNamespace(_seq=0, key="live-root", interval=1.0)
        def tree_send(view):
            return lambda i: setattr(feed, "value", tvl.LiveTreeView._feed_html(stub, view))
    else:
        progress_view = pv.HtmlView(snapshot(0))
        display(progress_view)
        def progress_send(i):
            progress_view._snapshot = snapshot(i)
            progress_view._live.update(progress_view.bundle(), force=True)
        from datetime import datetime
        from cyber_agent.notebook.display import LiveDisplay
        live = LiveDisplay()
        live.show({"text/plain": ""})
        stub = SimpleNamespace(key="live-root", interval=1.0, _updated=datetime.now())
        def tree_send(view):
            return lambda i: live.update(tvl.LiveTreeView._live_bundle(stub, view))

    sweep_view = SweepProgressView()
    display(sweep_view)
    def sweep_send(i):
        sweep_view(SweepProgress(sweep="grid", total=400, skipped=0, done=i, running=64, failed=0, errors=0,
                                 cost=i / 1e3, tokens=1000 * i, elapsed=i / 10))
''')


class Kernel:
    """A python3 ipykernel importing `cyber_agent` from `tree` (None: this checkout)."""

    def __init__(self, tree: Path | None) -> None:
        from jupyter_client.manager import KernelManager

        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(env=env_for(tree))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def run(self, code: str, timeout: float = 300) -> str:
        """Execute `code`; return its stdout (raise on an error)."""
        out: list[str] = []
        errors: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            kind = msg["header"]["msg_type"]
            if kind == "stream" and msg["content"]["name"] == "stdout":
                out.append(msg["content"]["text"])
            elif kind == "error":
                errors.append("\n".join(msg["content"]["traceback"]))

        self.client.execute_interactive(code, output_hook=hook, timeout=timeout)
        if errors:
            raise RuntimeError(errors[0])
        return "".join(out)

    def drain(self) -> None:
        try:
            while True:
                self.client.get_iopub_msg(timeout=0.05)
        except queue.Empty:
            pass

    def stop(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


CASES = {
    "progress": "progress_send",
    "tree 16": "tree_send(TREES[16])",
    "tree 200": "tree_send(TREES[200])",
    "sweep burst": "sweep_send",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE_LIVE, help="git ref of the code before (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 20 updates")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=50)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rounds, updates = (3, 20) if args.quick else (args.rounds, args.updates)
    sides = {"before": Kernel(before_tree(args.before)), "after": Kernel(None)}
    results: dict[str, dict[str, dict[str, list[float]]]] = {s: {c: {"us": [], "bytes": []} for c in CASES} for s in sides}
    try:
        for side, kernel in sides.items():
            kernel.run(SETUP)
            got = kernel.run("print(SIDE)").strip()
            assert got == side, f"the {side} kernel imported the {got} code"
        for _ in range(rounds):
            for side, kernel in sides.items():
                for case, sender in CASES.items():
                    n = updates * 4 if case == "sweep burst" else updates
                    line = kernel.run(f"print(json.dumps(measure({sender}, {n})))")
                    times, sizes = json.loads(line)
                    results[side][case]["us"] += [t * 1e6 for t in times]
                    results[side][case]["bytes"] += sizes
                kernel.drain()
    finally:
        for kernel in sides.values():
            kernel.stop()
    table: dict[str, dict[str, float]] = {}
    print(f"{'case':<12} {'before µs':>10} {'after µs':>10} {'ratio':>7} {'before B':>10} {'after B':>10} {'ratio':>7}")
    for case in CASES:
        b, a = results["before"][case], results["after"][case]
        row = {"before_us": statistics.median(b["us"]), "after_us": statistics.median(a["us"]),
               "before_bytes": statistics.mean(b["bytes"]), "after_bytes": statistics.mean(a["bytes"])}
        table[case] = row
        print(f"{case:<12} {row['before_us']:>10.1f} {row['after_us']:>10.1f} {row['after_us'] / row['before_us']:>6.2f}x"
              f" {row['before_bytes']:>10.0f} {row['after_bytes']:>10.0f}"
              f" {row['after_bytes'] / row['before_bytes'] if row['before_bytes'] else float('nan'):>6.2f}x")
    print(f"(µs: median per update over {rounds} rounds x {updates} updates; bytes: mean serialised per update;"
          " sweep burst: per snapshot, 4x as many)")
    if args.json:
        args.json.write_text(json.dumps({"before": args.before, "rounds": rounds, "updates": updates, "cases": table}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
