"""Synthetic generators, loaders for user and real data sets, and row partitioning.

The supported names are listed in ``__all__`` and loaded lazily from their modules on first
access, so importing the package, or one module of it, costs no more than before. The
modules' other names are internals: tests may import them from the module itself.
"""

from __future__ import annotations

from dpnet._lazy import lazy_names

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


__getattr__ = lazy_names(__name__, _LAZY)
