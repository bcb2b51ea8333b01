"""The floating-point work of a block's theta steps, counted exactly as they run.

A block's Newton theta step (:class:`dpnet.decentralized.theta.NewtonThetaStep`; for a lone
machine, an MPI rank's or a thread's, a block of one) does its work in four kinds of calls:
products with its design X~ (2 m k flops for an (m, k) matrix times a vector: ``@``, and the
stacked products :func:`~dpnet.decentralized.stacked.stack_matvec`), Newton matrices
X~^T D X~ (BLAS dsyrk: n d (d + 1) for n rows, d columns), their factors (a tall machine keeps
the inverse of its matrix: LAPACK dpotrf, d^3 / 3, then dpotri, 2 d^3 / 3; a wide one's
Woodbury system of its n rows, LAPACK dposv: n^3 / 3; the majorized step's scipy cho_factor:
d^3 / 3) and solves (a product with a kept inverse, 2 d^2; dposv's and cho_solve's
triangular solves, 2 m^2 per right-hand side). :func:`counting_flops` counts them while a
computation runs, without changing a bit of it: X~ is viewed as :class:`CountingArray` (its
products are numpy's own) and the names the theta step looks up (in
:mod:`dpnet.decentralized.theta` and :mod:`dpnet.decentralized.stacked`) are wrapped for the
duration.

The ratio of two machines' counts is the speed-up of an implementation of the same iterations
that runs every counted call at one flop rate and nothing else. Left out: the loss's
elementwise work (one pass per product's margins, so in proportion to the products) and the
O(degree x d) edge arithmetic of a round (Z step, duals; none on a lone machine). Where, as
on paper 3's Table 1, the smaller machine's share of the products is no smaller than its share
of all counted flops, what is left out can only lower the ratio: it is then an upper bound.
A stacked product counts the stack's n_max rows for every machine it runs on (a block of
one: its own rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from dpnet.decentralized import LocalData, StackedShards, stacked, theta


def product_flops(rows: int, cols: int) -> float:
    """An (rows, cols) matrix times a vector: 2 rows cols."""
    return 2.0 * rows * cols


def matrix_flops(rows: int, dim: int) -> float:
    """X~^T D X~ for an (rows, dim) X~, symmetric (dsyrk): rows dim (dim + 1)."""
    return rows * dim * (dim + 1.0)


def factor_flops(dim: int) -> float:
    """A Cholesky factor (dpotrf): dim^3 / 3."""
    return dim**3 / 3.0


def inverse_flops(dim: int) -> float:
    """The inverse from a Cholesky factor (dpotri): 2 dim^3 / 3."""
    return 2.0 * dim**3 / 3.0


def solve_flops(dim: int) -> float:
    """A solve on a factor (two triangular solves), or a product with a kept inverse, one
    right-hand side: 2 dim^2."""
    return 2.0 * dim**2


Data = TypeVar("Data", LocalData, StackedShards)

FlopCounts = dict[str, float]
"""Flops by kind: ``products`` (with X~), ``matrices`` (X~^T D X~), ``factors`` (with the
inverses formed from them), ``solves``."""


class CountingArray(np.ndarray):
    """An array whose matrix products add their flops to ``flops["products"]``, the counts
    of the :func:`counting_flops` that made it."""

    flops: FlopCounts

    def __array_finalize__(self, obj: Any) -> None:
        self.flops = getattr(obj, "flops", {})

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        plain = [x.view(np.ndarray) if isinstance(x, CountingArray) else x for x in inputs]
        if ufunc is np.matmul and method == "__call__":
            a, b = plain
            self.flops["products"] += product_flops(*a.shape) * (b.shape[-1] if b.ndim > 1 else 1)
        return getattr(ufunc, method)(*plain, **kwargs)


def _right_hand_sides(b: np.ndarray) -> int:
    return b.shape[1] if b.ndim > 1 else 1


@contextmanager
def counting_flops() -> Iterator[tuple[Callable[[Data], Data], FlopCounts]]:
    """``(counted, flops)``: ``counted(data)`` is ``data`` (a machine's :class:`LocalData` or a
    block's :class:`StackedShards`) with its X~ counted; ``flops`` the flops by kind
    (:data:`FlopCounts`) of every counted call so far."""
    flops = dict.fromkeys(("products", "matrices", "factors", "solves"), 0.0)
    names = ("dsyrk", "dpotrf", "dpotri", "dposv", "cho_factor", "cho_solve", "stack_matvec")
    saved = {name: getattr(theta, name) for name in names}
    saved_matvecs, saved_stacked = theta.matvecs, stacked.stack_matvec

    def dsyrk(alpha: float, a: np.ndarray, **kwargs: Any) -> Any:
        d, n = a.shape
        flops["matrices"] += matrix_flops(n, d)
        return saved["dsyrk"](alpha, a.view(np.ndarray), **kwargs)

    def dpotrf(a: np.ndarray, **kwargs: Any) -> Any:
        flops["factors"] += factor_flops(a.shape[0])
        return saved["dpotrf"](a, **kwargs)

    def dpotri(c: np.ndarray, **kwargs: Any) -> Any:
        flops["factors"] += inverse_flops(c.shape[0])
        return saved["dpotri"](c, **kwargs)

    def dposv(a: np.ndarray, b: np.ndarray, **kwargs: Any) -> Any:
        flops["factors"] += factor_flops(a.shape[0])
        flops["solves"] += solve_flops(a.shape[0]) * _right_hand_sides(b)
        return saved["dposv"](a, b, **kwargs)

    def cho_factor(a: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        flops["factors"] += factor_flops(a.shape[0])
        return saved["cho_factor"](a, *args, **kwargs)

    def cho_solve(factor: tuple[np.ndarray, bool], b: np.ndarray, **kwargs: Any) -> Any:
        flops["solves"] += solve_flops(factor[0].shape[0]) * _right_hand_sides(b)
        return saved["cho_solve"](factor, b, **kwargs)

    def count_products(A: np.ndarray, machines: int) -> None:
        """A product of ``machines`` rows of a stack A: with X~ (counted) or kept inverses."""
        if isinstance(A, CountingArray):
            flops["products"] += product_flops(A.shape[1], A.shape[2]) * machines
        else:  # theta.py's other stacks are the kept inverse Newton matrices: solves
            flops["solves"] += solve_flops(A.shape[1]) * machines

    def stack_matvec(A: np.ndarray, idx: np.ndarray, v: np.ndarray, **kwargs: Any) -> Any:
        count_products(A, idx.size)
        return saved["stack_matvec"](A, idx, v, **kwargs)

    def stacked_matvec(A: np.ndarray, idx: np.ndarray, v: np.ndarray, **kwargs: Any) -> Any:
        count_products(A, idx.size)  # the loss gradient's X~^T w (StackedShards)
        return saved_stacked(A, idx, v, **kwargs)

    def matvecs(A: np.ndarray, v: np.ndarray) -> Any:
        count_products(A, A.shape[0])
        return saved_matvecs(A, v)

    def counted(data: Data) -> Data:
        if isinstance(data, StackedShards):
            X = data.X.view(CountingArray)
            X.flops = flops
            return replace(data, X=X)
        X = data.X_aug.view(CountingArray)
        X.flops = flops
        return replace(data, X_aug=X)

    wrapped = {
        "dsyrk": dsyrk,
        "dpotrf": dpotrf,
        "dpotri": dpotri,
        "dposv": dposv,
        "cho_factor": cho_factor,
        "cho_solve": cho_solve,
        "stack_matvec": stack_matvec,
    }
    for name, fn in wrapped.items():
        setattr(theta, name, fn)
    theta.matvecs, stacked.stack_matvec = matvecs, stacked_matvec
    try:
        yield counted, flops
    finally:
        for name, fn in saved.items():
            setattr(theta, name, fn)
        theta.matvecs, stacked.stack_matvec = saved_matvecs, saved_stacked
