"""Lazy public names of a package: loaded from their module on first access, so importing the
package, or one module of it, costs no more than the module itself."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, table: dict[str, str]) -> Callable[[str], Any]:
    """The package's module ``__getattr__``: ``table`` maps each public name to its module,
    relative to ``package`` (or absolute when it starts with the package's root)."""

    def __getattr__(name: str) -> Any:
        if name in table:
            module = table[name]
            absolute = module.startswith("dpnet")
            return getattr(
                importlib.import_module(module if absolute else f"{package}.{module}"), name
            )
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
