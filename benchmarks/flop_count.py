"""The floating-point work of one machine's theta steps, counted exactly as they run.

A machine's local solve (:mod:`dpnet.decentralized.steps`) does its work in three kinds of
calls: products with its design X~ (``@``: 2 m k flops for an (m, k) matrix times a vector),
Newton matrices X~^T D X~ (BLAS dsyrk: n d (d + 1) for n rows, d columns) with their Cholesky
factors (LAPACK dpotrf: d^3 / 3) and solves on a factor (dpotrs: 2 d^2 per right-hand side).
:func:`counting_flops` counts them while a computation runs, without changing a bit of it:
X~ is viewed as :class:`CountingArray` (its products are numpy's own) and the module's BLAS and
LAPACK names are wrapped for the duration.

The ratio of two machines' counts is the speed-up of an implementation of the same iterations
that runs every counted call at one flop rate and nothing else. Left out: the loss's
elementwise work (one pass per product's margins, so in proportion to the products) and the
O(degree x d) edge arithmetic of a round (Z step, duals; none on a lone machine). Where, as
on paper 3's Table 1, the smaller machine's share of the products is no smaller than its share
of all counted flops, what is left out can only lower the ratio: it is then an upper bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np

from dpnet.decentralized import steps


def product_flops(rows: int, cols: int) -> float:
    """An (rows, cols) matrix times a vector: 2 rows cols."""
    return 2.0 * rows * cols


def matrix_flops(rows: int, dim: int) -> float:
    """X~^T D X~ for an (rows, dim) X~, symmetric (dsyrk): rows dim (dim + 1)."""
    return rows * dim * (dim + 1.0)


def factor_flops(dim: int) -> float:
    """A Cholesky factor (dpotrf): dim^3 / 3."""
    return dim**3 / 3.0


def solve_flops(dim: int) -> float:
    """A solve on a factor (dpotrs), one right-hand side: 2 dim^2."""
    return 2.0 * dim**2


FlopCounts = dict[str, float]
"""Flops by kind: ``products`` (with X~), ``matrices`` (X~^T D X~), ``factors``, ``solves``."""


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


@contextmanager
def counting_flops() -> Iterator[tuple[Callable[[steps.LocalData], steps.LocalData], FlopCounts]]:
    """``(counted, flops)``: ``counted(data)`` is ``data`` with its X~ counted; ``flops`` the
    flops by kind (:data:`FlopCounts`) of every counted call so far."""
    flops = dict.fromkeys(("products", "matrices", "factors", "solves"), 0.0)
    saved = steps.dsyrk, steps.dpotrf, steps.dpotrs

    def dsyrk(alpha: float, a: np.ndarray, **kwargs: Any) -> Any:
        d, n = a.shape
        flops["matrices"] += matrix_flops(n, d)
        return saved[0](alpha, a.view(np.ndarray), **kwargs)

    def dpotrf(a: np.ndarray, **kwargs: Any) -> Any:
        flops["factors"] += factor_flops(a.shape[0])
        return saved[1](a, **kwargs)

    def dpotrs(factor: np.ndarray, b: np.ndarray, **kwargs: Any) -> Any:
        flops["solves"] += solve_flops(factor.shape[0]) * (b.shape[1] if b.ndim > 1 else 1)
        return saved[2](factor, b, **kwargs)

    def counted(data: steps.LocalData) -> steps.LocalData:
        X = data.X_aug.view(CountingArray)
        X.flops = flops
        return replace(data, X_aug=X)

    steps.dsyrk, steps.dpotrf, steps.dpotrs = dsyrk, dpotrf, dpotrs
    try:
        yield counted, flops
    finally:
        steps.dsyrk, steps.dpotrf, steps.dpotrs = saved
