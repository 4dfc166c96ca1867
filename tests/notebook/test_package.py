"""Package rules: a sorted `__all__` that matches the exports (tests/test_layout.py checks that nothing imports us)."""

from __future__ import annotations

import cyber_agent.notebook as notebook


def test_all_is_sorted_and_complete():
    assert notebook.__all__ == sorted(notebook.__all__)
    assert all(hasattr(notebook, name) for name in notebook.__all__)
    public = {n for n, v in vars(notebook).items() if not n.startswith("_") and getattr(v, "__module__", "").startswith(
        "cyber_agent.notebook")}
    assert public <= set(notebook.__all__)

