"""Decentralized group-lasso logistic ADMM: numpy steps, one compiled kernel, the round loop.

The supported names are listed in ``__all__`` and loaded lazily from their modules on first
access, so importing the package, or one module of it, costs no more than before. The
modules' other names are internals: tests may import them from the module itself.
"""

from __future__ import annotations

from dpnet._lazy import lazy_names

_LAZY = {
    "ADMMConfig": "admm",
    "LoopState": "admm",
    "compile_kernels": "admm",
    "MachineResult": "admm",
    "ProgressRecord": "admm",
    "run_block": "admm",
    "run_machine": "admm",
    "ArrayBlock": "block",
    "Block": "block",
    "CommBlock": "block",
    "PrivateShard": "boundary",
    "RawShard": "boundary",
    "cross_boundary": "boundary",
    "BadlyScaledWarning": "columns",
    "PublicColumns": "columns",
    "public_columns": "columns",
    "local_problem": "machine",
    "randomize_all": "machine",
    "RecordNoise": "record",
    "StackedShards": "stacked",
    "GroupStructure": "steps",
    "LocalData": "steps",
    "local_objective": "steps",
    "TreeAggregator": "termination",
    "tree_plan": "termination",
    "MajorizedThetaStep": "theta",
    "NewtonThetaStep": "theta",
    "ThetaResult": "theta",
}

__all__ = list(_LAZY)


__getattr__ = lazy_names(__name__, _LAZY)
