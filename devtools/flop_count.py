"""The floating-point work of a block's Newton theta steps, from the kernel's own counts.

The compiled Newton theta step (:mod:`dpnet.decentralized._newton`) adds up, per machine, the
operations it runs (``NewtonThetaStep.counts``, named by ``_newton.COUNTS``); for a machine of
n rows and d columns each costs, in flops:

- a product with X~ (a step's margins, a loss evaluation's gradient, fresh margins): 2 n d;
- a Newton matrix: X~^T D X~ by a symmetric product (BLAS dsyrk), n d (d + 1), and its
  Cholesky factor d^3 / 3;
  a shift to a new rho: the factor;
- a step on a kept factor: two triangular solves, 2 d^2; a Woodbury solve: its n x n system
  (n^2 d to scale, a factor n^3 / 3, two triangular solves 2 n^2) and two products with X~
  (4 n d).

The ratio of two machines' counts is the speed-up of an implementation of the same iterations
that runs every counted operation at one flop rate and nothing else. Left out: the loss's
elementwise work (one pass per evaluation, so in proportion to the products) and the
O(degree x d) edge arithmetic of a round (Z step, duals; none on a lone machine).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from dpnet.decentralized import NewtonThetaStep
from dpnet.decentralized._newton import COUNTS

FlopCounts = dict[str, float]
"""Flops by kind: ``products`` (with X~), ``matrices`` (X~^T D X~), ``factors``, ``solves``."""


def product_flops(rows: int, cols: int) -> float:
    """An (rows, cols) matrix times a vector: 2 rows cols."""
    return 2.0 * rows * cols


def matrix_flops(rows: int, dim: int) -> float:
    """X~^T D X~ for an (rows, dim) X~ by a symmetric product (BLAS dsyrk): rows dim (dim + 1)."""
    return float(rows) * dim * (dim + 1)


def factor_flops(dim: int) -> float:
    """A Cholesky factor: dim^3 / 3."""
    return dim**3 / 3.0


def solve_flops(dim: int) -> float:
    """Two triangular solves on a Cholesky factor: 2 dim^2."""
    return 2.0 * dim**2


def machine_flops(counts: np.ndarray, rows: int, dim: int) -> FlopCounts:
    """The flops by kind of one machine's ``counts`` (one row of ``NewtonThetaStep.counts``)."""
    c = dict(zip(COUNTS, (int(x) for x in counts), strict=True))
    products = c["steps"] + c["evaluations"] + c["margins"] + 2 * c["woodbury"]
    woodbury = rows * rows * dim + factor_flops(rows) + solve_flops(rows)
    return {
        "products": products * product_flops(rows, dim),
        "matrices": c["matrices"] * matrix_flops(rows, dim),
        "factors": (c["matrices"] + c["shifts"]) * factor_flops(dim) + c["woodbury"] * woodbury,
        "solves": (c["steps"] - c["woodbury"]) * solve_flops(dim),
    }


def block_flops(step: NewtonThetaStep) -> list[FlopCounts]:
    """The flops by kind of every machine of a block's Newton theta step so far."""
    dim = step.data.X.shape[2]
    return [
        machine_flops(counts, int(rows), dim)
        for counts, rows in zip(step.counts, step.data.rows, strict=True)
    ]


@contextmanager
def newton_steps() -> Iterator[list[NewtonThetaStep]]:
    """Every :class:`NewtonThetaStep` made while it is open (their ``counts`` are the work)."""
    made: list[NewtonThetaStep] = []
    init = NewtonThetaStep.__init__

    def recording(self: NewtonThetaStep, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    NewtonThetaStep.__init__ = recording  # type: ignore[method-assign]
    try:
        yield made
    finally:
        NewtonThetaStep.__init__ = init  # type: ignore[method-assign]
