"""Benchmark the importers: seconds per 1,000 messages, reading and writing, per format and store.

    python bench/import_speed.py                 # ReDel, OTel, Inspect; memory, file and SQLite stores; 5 reps
    python bench/import_speed.py --quick         # 2 reps, a smaller Inspect eval
    python bench/import_speed.py --only redel --json out.json --dir /dev/shm

Inputs, made here offline:

- ReDel: a `state.json` + `events.jsonl` of `--redel-nodes` (50) nodes of 20 messages each, in
  the shape of the real gpt-4o runs (delegate calls answered by function messages, tokens per
  completion in the events);
- OTel: the recursive demo tree exported by `export_otel(capture_content=True)` as an OTLP/JSON
  file (hex ids);
- Inspect: a real `inspect_ai` eval with the `mockllm` model (a tool and an `as_tool` sub-agent),
  `--inspect-samples` (40) samples; skipped when inspect_ai is not importable.

Measured, median over `--reps`: `read` (file → plans: parsing and mapping, no store) and
`import` (`import_runs` into a fresh store: read plus every TraceStore write), each as seconds
per 1,000 imported messages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "importers"))

from cyber_agent.importers import import_runs, read_file  # noqa: E402
from cyber_agent.importers._plan import iter_plans  # noqa: E402
from cyber_agent.trace import open_store  # noqa: E402


def redel_run(folder: Path, nodes: int) -> Path:
    """A ReDel run: a root delegating to `nodes - 1` helpers, 20 messages per node, tokens in events."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = [f"node-{i:04d}" for i in range(nodes)]
    events: list[dict[str, Any]] = []
    clock = 1718312142.0
    state = []
    for i, node_id in enumerate(ids):
        parent = None if i == 0 else ids[0] if i <= 10 else ids[1 + (i - 11) % 10]
        history: list[dict[str, Any]] = [{"role": "user", "content": f"question {i}"}]
        children = [c for j, c in enumerate(ids) if j and (ids[0] if j <= 10 else ids[1 + (j - 11) % 10]) == node_id]
        for turn in range(9):
            call_id = f"{node_id}-c{turn}"
            name = "delegate" if turn < len(children) else "search"
            arguments = {"instructions": f"question {ids.index(children[turn])}"} if name == "delegate" else {"query": "x"}
            history.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]})
            history.append({"role": "function", "content": "result " * 40, "name": name, "tool_call_id": call_id,
                            "is_tool_call_error": False})
        history.append({"role": "assistant", "content": f"answer {i}"})
        state.append({"id": node_id, "depth": 0 if parent is None else 1 if i <= 10 else 2, "parent": parent,
                      "children": children, "always_included_messages": [], "chat_history": history,
                      "state": "stopped", "name": f"n{i}"})
        events.append({"type": "kani_spawn", "timestamp": clock, "id": node_id})
        for message in history:
            clock += 0.01
            events.append({"type": "kani_message", "timestamp": clock, "id": node_id, "msg": message})
            if message["role"] == "assistant":
                events.append({"type": "tokens_used", "timestamp": clock, "id": node_id, "prompt_tokens": 500,
                               "completion_tokens": 40})
    (folder / "state.json").write_text(json.dumps({"id": "bench", "n_events": len(events), "state": state}))
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return folder


async def otel_file(path: Path) -> Path:
    """The recursive demo tree as an OTLP/JSON file."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from otlp_files import write_otlp_json

    from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.otel import export_otel

    store = open_store("memory:")
    runner = AgentRunner(trace_store=store, workspace=ROOT)
    config = RunConfig(model="demo", workspace=str(ROOT), agent_mode="recursive", root_task_anchor=DEMO_ANCHOR)
    result = await runner.run_result([{"role": "user", "content": DEMO_TASK}], config)
    exporter = InMemorySpanExporter()
    await export_otel(store, result.trace.trace_id, exporter=exporter, capture_content=True)
    return write_otlp_json(exporter.get_finished_spans(), path)


def inspect_log(folder: Path, samples: int) -> Path | None:
    """A real mockllm eval's `.eval` log with `samples` samples (None when inspect_ai is missing)."""
    try:
        import inspect_eval
    except ImportError:
        return None
    from inspect_ai import Task, eval
    from inspect_ai.agent import as_tool, react
    from inspect_ai.dataset import Sample
    from inspect_ai.model import get_model
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, use_tools

    helper = react(name="helper", description="Adds numbers", tools=[inspect_eval.add()],
                   model=get_model("mockllm/model", custom_outputs=inspect_eval._helper))
    task = Task(dataset=[Sample(input=f"What is 1 + 2 ({i})?", target="3", id=f"s{i}") for i in range(samples)],
                solver=[use_tools(as_tool(helper)), generate()], scorer=includes(), name="bench")
    [log] = eval(task, model=get_model("mockllm/model", custom_outputs=inspect_eval._main), log_dir=str(folder),
                 display="none")
    return Path(log.location)


async def measure(path: Path, source: str, store_url: str, reps: int) -> dict[str, Any]:
    reads, imports, messages = [], [], 0
    for rep in range(reps):
        started = time.perf_counter()
        plans = read_file(path, source)  # type: ignore[arg-type]
        reads.append(time.perf_counter() - started)
        messages = sum(len(p.messages) for root in plans for p in iter_plans(root))
        url = store_url.format(rep=rep)
        store = open_store(url)
        started = time.perf_counter()
        summary = await import_runs([path], store, source=source)
        imports.append(time.perf_counter() - started)
        assert summary.messages == messages, (summary.messages, messages)
    per = 1000 / messages
    return {"source": source, "store": store_url.split(":", 1)[0], "messages": messages,
            "read_s_per_1k": statistics.median(reads) * per, "import_s_per_1k": statistics.median(imports) * per}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--only", default="redel,otel,inspect")
    parser.add_argument("--redel-nodes", type=int, default=50)
    parser.add_argument("--inspect-samples", type=int, default=None)
    parser.add_argument("--dir", default=None, help="where the stores and inputs go (default: a temp dir)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    reps = args.reps or (2 if args.quick else 5)
    samples = args.inspect_samples or (10 if args.quick else 40)
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        inputs: list[tuple[str, Path]] = []
        if "redel" in only:
            inputs.append(("redel", redel_run(base / "redel", args.redel_nodes)))
        if "otel" in only:
            inputs.append(("otel", await otel_file(base / "spans.json")))
        if "inspect" in only:
            log = await asyncio.to_thread(inspect_log, base / "inspect", samples)
            if log is None:
                print("inspect: skipped (inspect_ai not importable; pip install 'cyber-agent[inspect]')")
            else:
                inputs.append(("inspect", log))
        rows = []
        for source, path in inputs:
            for url in ("memory:", f"file:{base}/file-{source}-{{rep}}", f"sqlite:///{base}/{source}-{{rep}}.db"):
                rows.append(await measure(path, source, url, reps))
    print(f"{'format':<8} {'store':<7} {'messages':>8} {'read s/1k msgs':>15} {'import s/1k msgs':>17}")
    for row in rows:
        print(f"{row['source']:<8} {row['store']:<7} {row['messages']:>8} {row['read_s_per_1k']:>15.3f} "
              f"{row['import_s_per_1k']:>17.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"reps": reps, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
