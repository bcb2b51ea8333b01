"""Penalties and their proximal operators (L1, ridge, group L2).

The supported names are listed in ``__all__`` and loaded lazily from their modules on first
access, so importing the package, or one module of it, costs no more than before. The
modules' other names are internals: tests may import them from the module itself.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "group_weights": "group",
    "groups_from_labels": "group",
    "objective_penalty": "group",
    "selected_groups": "group",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"dpnet.penalties.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'dpnet.penalties' has no attribute {name!r}")
