"""Penalties and their proximal operators (L1, ridge, group L2).

The supported names are listed in ``__all__`` and loaded lazily from their modules on first
access, so importing the package, or one module of it, costs no more than before. The
modules' other names are internals: tests may import them from the module itself.
"""

from __future__ import annotations

from dpnet._lazy import lazy_names

_LAZY = {
    "group_weights": "group",
    "groups_from_labels": "group",
    "objective_penalty": "group",
    "selected_groups": "group",
}

__all__ = list(_LAZY)


__getattr__ = lazy_names(__name__, _LAZY)
