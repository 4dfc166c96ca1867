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
import importlib.util
import sys
import types
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
    _keep_exports_over_submodules(package, frozenset(origin))

    def __getattr__(name: str) -> Any:
        module = origin.get(name)
        if module is None:
            if not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is not None:
                return importlib.import_module(f"{package}.{name}")  # `package.submodule` as an attribute
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    __getattr__.__doc__ = f"Import a name `{package}` re-exports from its module on first use."
    return __getattr__, __dir__


class _LazyPackage(types.ModuleType):
    """A package whose exported names win over its same-named submodules.

    Importing `cyber_agent.notebook.launch` sets the package's attribute `launch` to that module
    (the import system does so for every submodule it loads). With eager imports the package's
    own `from .launch import launch` ran last and the function won; loaded lazily, whichever
    code first imported the submodule would leave `from cyber_agent.notebook import launch`
    returning the module. This class refuses that one assignment; the module stays in
    `sys.modules` and `from cyber_agent.notebook.launch import X` is unchanged.
    """

    _exports: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._exports and isinstance(value, types.ModuleType) and \
                value.__name__ == f"{self.__name__}.{name}":
            return
        super().__setattr__(name, value)


def _keep_exports_over_submodules(package: str, exports: frozenset[str]) -> None:
    module = sys.modules.get(package)
    if module is None or type(module) is not types.ModuleType:
        return
    for name in exports & set(vars(module)):  # a same-named submodule loaded before this call
        if isinstance(vars(module)[name], types.ModuleType):
            delattr(module, name)
    module.__class__ = _LazyPackage
    setattr(module, "_exports", exports)  # noqa: B010 (ModuleType has no such attribute to mypy)
