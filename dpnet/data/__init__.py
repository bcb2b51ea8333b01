"""Synthetic generators, loaders for user and real data sets, and row partitioning.

The supported names are listed in ``__all__`` and loaded lazily from their modules on first
access, so importing the package, or one module of it, costs no more than before. The
modules' other names are internals: tests may import them from the module itself.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "GroupData": "dataset",
    "to_pm1": "dataset",
    "LabelDomain": "labels",
    "column_groups": "loaders",
    "groups_width": "loaders",
    "load_adult": "loaders",
    "load_dataset": "loaders",
    "load_ipums": "loaders",
    "load_memset": "loaders",
    "parse_groups": "loaders",
    "scale_rows": "loaders",
    "split_rows": "partition",
    "train_test_split_indices": "partition",
    "make_group_logistic": "synthetic",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"dpnet.data.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'dpnet.data' has no attribute {name!r}")
