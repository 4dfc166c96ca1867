"""Bulk reads: pause the cyclic garbage collector while thousands of records are parsed.

Parsing a long trace allocates millions of container objects and no cycles. With the
collector on, every 700 allocations start a young collection and every so often a full one
walks the whole heap, so a 100k-message load spends a large share of its time collecting
nothing (measured in `docs/performance.md`). Reference counting still frees everything.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; restore it only if this block disabled it.

    Safe to nest and to use from several threads: a block that found the collector off leaves
    it off, so at worst the collector comes back a little early for a concurrent bulk read.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
