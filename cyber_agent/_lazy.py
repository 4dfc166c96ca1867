"""Lazy re-exports for a package `__init__` (PEP 562): each name is imported on first use.

    _LAZY: dict[str, tuple[str, ...]] = {"cyber_agent.core.config": ("RunConfig",)}
    __getattr__, __dir__ = _lazy_exports(globals(), _LAZY)

A key of the table is a module's dotted name; a key without a dot is a submodule of the package
itself (`cyber_agent/llm/__init__.py` writes `"types"` for `cyber_agent.llm.types`). The package
mirrors the table under `if TYPE_CHECKING:` so mypy sees the names (`tests/test_front_door.py`
checks that the table, those imports and `__all__` agree). This module imports nothing of the
package, so the lowest layer (`llm/`) can use it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(namespace: MutableMapping[str, Any], table: Mapping[str, tuple[str, ...]]) -> tuple[
        Callable[[str], Any], Callable[[], list[str]]]:
    """Return the `__getattr__` and `__dir__` of the package whose globals are `namespace`.

    `__getattr__` imports a name of `table` from its module on first use and caches it in the
    package's namespace (later reads never come back here); any other name raises AttributeError.
    """
    package = str(namespace["__name__"])
    origin = {name: module if "." in module else f"{package}.{module}" for module, names in table.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = origin.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    __getattr__.__doc__ = f"Import a name `{package}` re-exports from its module on first use."
    return __getattr__, __dir__
