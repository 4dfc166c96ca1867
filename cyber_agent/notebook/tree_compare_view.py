"""Two tree views side by side, their differences coloured (`tree_view_compare`, `TreeCompareView`).

    tree_view_compare((store, root_a), (other, root_b))     # compare_trees(a, b) drawn on both trees

Each side is a `cyber_agent/notebook/tree_view.py:TreeView` highlighted by the `compare_trees`
frame; a small script links a click on a node to its counterpart in the other tree.
`cyber_agent.notebook.tree_view` re-exports both names. (The module is not named `tree_view_compare`: that
name is the package's lazy export of the function, and importing a submodule of that name would replace it.)
"""

from __future__ import annotations

import hashlib
import html
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cyber_agent.notebook.bridge import run_sync
from cyber_agent.notebook.display import RichDisplay
from cyber_agent.notebook.records import StoreSource, open_source

if TYPE_CHECKING:  # tree_view.py re-exports this module's names: import it only where it is used
    from cyber_agent.notebook.tree_view import TreeView

__all__ = ["TreeCompareView", "tree_view_compare"]


class TreeCompareView(RichDisplay):
    """Two trees side by side, their differences coloured (`compare_trees`), a click selecting the counterpart."""

    def __init__(self, left: TreeView, right: TreeView, alignment: Any) -> None:
        self.left = left
        """Tree a (deleted nodes coloured)."""
        self.right = right
        """Tree b (inserted nodes coloured)."""
        self.alignment = alignment
        """The `compare_trees` frame."""

    def counts(self) -> dict[str, int]:
        """Aligned nodes per kind."""
        kinds = self.alignment["kind"].tolist()
        return {k: kinds.count(k) for k in ("matched", "relabelled", "deleted", "inserted")}

    def __repr__(self) -> str:
        return f"TreeCompareView({self.left.root_ids[0]!r} vs {self.right.root_ids[0]!r}, {self.counts()})"

    def to_text(self) -> str:
        """The counts per kind."""
        return repr(self)

    def to_html(self, *, fetch: bool = True) -> str:
        """Both views in one row, with the counts; a script links each node to its counterpart (`fetch`: each view may
        ask its kernel for pages it left out, `cyber_agent/notebook/tree_view_pages.py`; off in a saved file)."""
        counts = " · ".join(f"{v} {k}" for k, v in self.counts().items())
        box = "ca-compare-" + hashlib.sha1((self.left.root_ids[0] + self.right.root_ids[0] + counts).encode()).hexdigest()[:12]
        link = ("<script>(function(){const box=document.getElementById('" + box + "');if(!box||box.dataset.linked)return;"
                "box.dataset.linked='1';box.addEventListener('ca-selected',e=>{const pair=e.detail&&e.detail.pair;"
                "if(!pair)return;const views=Array.from(box.querySelectorAll('.ca-tree-box'));"
                "const other=views.find(v=>!v.contains(e.target));"
                "if(other)other.dispatchEvent(new CustomEvent('ca-select',{detail:{id:pair}}));});})();</script>")
        return (f'<div class="ca-compare" id="{box}"><div class="ca-compare-head">compare: {html.escape(counts)}</div>'
                f'<div style="display:flex;gap:16px;align-items:flex-start;overflow-x:auto">'
                f'<div style="flex:1;min-width:0"><h4>a: {html.escape(self.left.root_ids[0])}</h4>{self.left.to_html(fetch=fetch)}</div>'
                f'<div style="flex:1;min-width:0"><h4>b: {html.escape(self.right.root_ids[0])}</h4>{self.right.to_html(fetch=fetch)}</div>'
                f"</div>{link}</div>")

    def to_document(self, title: str | None = None) -> str:
        """A whole HTML page holding both views."""
        name = html.escape(title or f"compare {self.left.root_ids[0]} vs {self.right.root_ids[0]}")
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{name}</title></head>'
                f"<body><h2>{name}</h2>{self.to_html(fetch=False)}</body></html>\n")

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the comparison as one self-contained HTML file."""
        from cyber_agent.notebook.tree_view import _write

        return _write(path, self.to_document())


def tree_view_compare(a: tuple[StoreSource, str], b: tuple[StoreSource, str], *, alignment: Any = None,
                      relabel_threshold: float | None = None, **view_options: Any) -> TreeCompareView:
    """Trees a and b (each `(store, root_id)`) side by side, coloured by `compare_trees(a, b)` (or by `alignment`).

    In a: deleted (only in a), relabelled and changed nodes; in b: inserted, relabelled and changed
    ones; a badge on a node counts the other tree's nodes below it that this one lacks. Clicking
    a node selects its counterpart in the other tree. `view_options` go to both `TreeView`s.
    """
    from cyber_agent.analysis.align import compare_trees
    from cyber_agent.notebook.tree_view import TreeView

    (source_a, root_a), (source_b, root_b) = a, b
    store_a, store_b = open_source(source_a), open_source(source_b)
    if alignment is None:
        extra = {} if relabel_threshold is None else {"relabel_threshold": relabel_threshold}
        alignment = run_sync(compare_trees(store_a, root_a, store_b, root_b, **extra))
    left = TreeView(store_a, root_a, highlight=alignment, side="a", **view_options)
    right = TreeView(store_b, root_b, highlight=alignment, side="b", **view_options)
    return TreeCompareView(left, right, alignment)

