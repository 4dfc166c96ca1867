"""Jupyter-first helpers: launch runs, draw trees, chart budgets, analyse traces in pandas (SPEC J1–J6).

    from cyber_agent.notebook import launch, draw_trace_tree, budget_frame, to_frames
    handle = await launch("Report the revenue per region from data/sales.csv", model="demo")
    result = await handle.result()
    draw_trace_tree(handle.store, handle.trace_id)

Every helper reads a TraceStore, a store directory or an export file, and nothing here runs
an agent except `launch`. Nothing else in the package imports this one. See docs/notebook.md.
Importing it in a kernel lets the charts display with no `%matplotlib` magic
(`display.enable_figure_display`). Every name but those two small modules' is imported on
first use (`__getattr__`), so `import cyber_agent.notebook` loads no pandas, matplotlib,
networkx, ipywidgets or runner until a helper that needs them is used.
"""

from typing import TYPE_CHECKING

from cyber_agent._lazy import lazy_exports as _lazy_exports
from cyber_agent.notebook.bridge import in_notebook, run_sync
from cyber_agent.notebook.display import enable_figure_display

if TYPE_CHECKING:
    from cyber_agent.notebook.budget_table import BudgetTable, budget_table
    from cyber_agent.notebook.budgets import budget_frame, plot_budget, plot_usage_by_agent, plot_usage_over_time, usage_by_agent, usage_over_time
    from cyber_agent.notebook.explorer import TraceExplorer
    from cyber_agent.notebook.export import EXPORT_FORMAT, EXPORT_VERSION, aexport_traces, export_traces, load_export
    from cyber_agent.notebook.frames import SCHEMAS, TraceFrames, ato_frames, to_frames
    from cyber_agent.notebook.imports import aload_runs, load_runs
    from cyber_agent.notebook.launch import RunHandle, launch, run_config
    from cyber_agent.notebook.parquet import read_parquet
    from cyber_agent.notebook.progress import AgentActivity, ProgressSnapshot
    from cyber_agent.notebook.records import TraceRecord, read_records
    from cyber_agent.notebook.stepper import ReportStepper
    from cyber_agent.notebook.store_view import ReadOnlyTraceStore
    from cyber_agent.notebook.tree_view import TreeView, atree_view, export_html, tree_view_compare
    from cyber_agent.notebook.tree_view_live import live_tree
    from cyber_agent.notebook.trees import draw_goal_tree, draw_trace_tree, draw_tree, goal_graph, tidy_tree_layout, trace_graph

__all__ = [
    "AgentActivity",
    "BudgetTable",
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ProgressSnapshot",
    "ReadOnlyTraceStore",
    "ReportStepper",
    "RunHandle",
    "SCHEMAS",
    "TraceExplorer",
    "TraceFrames",
    "TraceRecord",
    "TreeView",
    "aexport_traces",
    "aload_runs",
    "ato_frames",
    "atree_view",
    "budget_frame",
    "budget_table",
    "draw_goal_tree",
    "draw_trace_tree",
    "draw_tree",
    "enable_figure_display",
    "export_html",
    "export_traces",
    "goal_graph",
    "in_notebook",
    "launch",
    "live_tree",
    "load_export",
    "load_runs",
    "plot_budget",
    "plot_usage_by_agent",
    "plot_usage_over_time",
    "read_parquet",
    "read_records",
    "run_config",
    "run_sync",
    "tidy_tree_layout",
    "to_frames",
    "trace_graph",
    "tree_view_compare",
    "usage_by_agent",
    "usage_over_time",
]

_LAZY: dict[str, tuple[str, ...]] = {
    "cyber_agent.notebook.budget_table": ("BudgetTable", "budget_table",),
    "cyber_agent.notebook.budgets": ("budget_frame", "plot_budget", "plot_usage_by_agent", "plot_usage_over_time", "usage_by_agent", "usage_over_time",),
    "cyber_agent.notebook.explorer": ("TraceExplorer",),
    "cyber_agent.notebook.export": ("EXPORT_FORMAT", "EXPORT_VERSION", "aexport_traces", "export_traces", "load_export",),
    "cyber_agent.notebook.frames": ("SCHEMAS", "TraceFrames", "ato_frames", "to_frames",),
    "cyber_agent.notebook.imports": ("aload_runs", "load_runs",),
    "cyber_agent.notebook.launch": ("RunHandle", "launch", "run_config",),
    "cyber_agent.notebook.parquet": ("read_parquet",),
    "cyber_agent.notebook.progress": ("AgentActivity", "ProgressSnapshot",),
    "cyber_agent.notebook.records": ("TraceRecord", "read_records",),
    "cyber_agent.notebook.stepper": ("ReportStepper",),
    "cyber_agent.notebook.store_view": ("ReadOnlyTraceStore",),
    "cyber_agent.notebook.tree_view": ("TreeView", "atree_view", "export_html", "tree_view_compare",),
    "cyber_agent.notebook.tree_view_live": ("live_tree",),
    "cyber_agent.notebook.trees": ("draw_goal_tree", "draw_trace_tree", "draw_tree", "goal_graph", "tidy_tree_layout", "trace_graph",),
}
__getattr__, __dir__ = _lazy_exports(globals(), _LAZY)

enable_figure_display()  # charts render in a fresh kernel; a matplotlib backend's own formatter wins
