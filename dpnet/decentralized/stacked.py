"""Every machine's shard as one stack of arrays, and the stacked products over it.

A block of machines (all J of the simulator, or the one machine of an MPI rank or a thread)
holds its shards as X (k, n_max, dim) and y (k, n_max), shards of unequal size padded with rows
of zero features masked out of the loss. The record-level theta step
(:mod:`dpnet.decentralized.record`) and the simulator (:mod:`dpnet.decentralized.batched`) run
on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dpnet.decentralized.steps import LocalData
from dpnet.losses.margin import MarginLoss


@dataclass(frozen=True)
class StackedShards:
    """All shards stacked: X (J, n_max, dim), y (J, n_max), mask (J, n_max) or None."""

    X: np.ndarray
    y: np.ndarray
    mask: np.ndarray | None
    n_total: int
    loss: MarginLoss

    @property
    def inv_n(self) -> float:
        return 1.0 / self.n_total

    @cached_property
    def y_over_n(self) -> np.ndarray:
        """inv_n * y (J, n_max): the weights of l' in the loss gradient."""
        return self.inv_n * self.y

    @staticmethod
    def designs(sizes: Sequence[int], dim: int) -> np.ndarray | None:
        """The zero stack (k, n_max, dim) that machines of ``sizes`` rows may write their X~
        into, row j's first sizes[j] rows (so :meth:`stack` copies none); None for one
        machine, whose X~ the block views (:meth:`one`)."""
        return None if len(sizes) == 1 else np.zeros((len(sizes), max(sizes), dim))

    @classmethod
    def stack(cls, shards: Sequence[LocalData], designs: np.ndarray | None = None) -> StackedShards:
        """The shards stacked (one shard: :meth:`one`, views of its arrays); ``designs``: the
        stack of :meth:`designs` whose rows the shards' X~ already are (not copied)."""
        if len(shards) == 1:
            return cls.one(shards[0])
        dims = {s.X_aug.shape[1] for s in shards}
        totals = {s.n_total for s in shards}
        losses = {s.loss for s in shards}
        if len(dims) != 1 or len(totals) != 1 or len(losses) != 1:
            raise ValueError("all shards need the same number of columns, n_total and loss")
        sizes = [len(s.y) for s in shards]
        X = cls.designs(sizes, dims.pop()) if designs is None else designs
        assert X is not None  # several shards
        y = np.ones((len(shards), X.shape[1]))
        for j, s in enumerate(shards):
            if designs is None:
                X[j, : sizes[j]] = s.X_aug
            elif s.X_aug.base is not designs or not np.may_share_memory(s.X_aug, designs[j]):
                raise ValueError(f"shard {j}'s X~ is not row {j} of the given designs")
            y[j, : sizes[j]] = s.y
        n_max = X.shape[1]
        mask = None
        if min(sizes) < n_max:
            mask = (np.arange(n_max)[None, :] < np.array(sizes)[:, None]).astype(float)
        return cls(X, y, mask, totals.pop(), losses.pop())

    @classmethod
    def one(cls, shard: LocalData) -> StackedShards:
        """One machine's shard as a block of one (views of its arrays, no copy)."""
        return cls(shard.X_aug[None], shard.y[None], None, shard.n_total, shard.loss)

    @cached_property
    def rows(self) -> np.ndarray:
        """Every machine's row count n_j (int64, (k,)): public under replace-one."""
        if self.mask is None:
            return np.full(self.X.shape[0], self.X.shape[1], dtype=np.int64)
        return self.mask.sum(axis=1).astype(np.int64)

    def margin_loss_sum(self, idx: np.ndarray | slice, margins: np.ndarray) -> np.ndarray:
        """sum over machine j's rows of l(margin), for the machines ``idx`` (their margins)."""
        return self._row_sums(idx, self.loss.value(margins))

    def margin_loss_sum_and_derivative(
        self, idx: np.ndarray, margins: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`margin_loss_sum`, l'(margins)) from one pass over the margins."""
        values, first = self.loss.value_and_derivative(margins)
        return self._row_sums(idx, values), first

    def _row_sums(self, idx: np.ndarray | slice, values: np.ndarray) -> np.ndarray:
        if self.mask is not None:
            values = values * self.mask[idx]
        return values.sum(axis=1)

    def loss_gradient(
        self, idx: np.ndarray, margins: np.ndarray, first: np.ndarray | None = None
    ) -> np.ndarray:
        """X~_j^T (y_j l'(margins_j) / n) for the machines ``idx`` (padded rows: zero rows);
        ``first``: l'(margins), if already computed."""
        if first is None:
            first = self.loss.derivative(margins)
        weights = self.y_over_n[machine_rows(idx, self.y.shape[0])] * first
        return stack_matvec(self.X, idx, weights, left=True)


def machine_rows(idx: np.ndarray, n_all: int) -> np.ndarray | slice:
    """The machines ``idx`` (sorted, distinct) as an index into arrays of all ``n_all``: a
    slice when they are all of them (views instead of fancy-indexed copies)."""
    return slice(None) if idx.size == n_all else idx


def matvecs(A: np.ndarray, v: np.ndarray) -> np.ndarray:
    """A_j v_j for a stack A (J, m, n) and v (J, n).

    Every stacked product of the simulator is an einsum: at J = 1,000 x (100, 49) it takes
    about 0.6x the CPU of the same stacked np.matmul (docs/large-networks.md, "Stacked
    products")."""
    return np.einsum("jmn,jn->jm", A, v)


def vecmats(v: np.ndarray, A: np.ndarray) -> np.ndarray:
    """v_j^T A_j = A_j^T v_j for a stack A (J, m, n) and v (J, m) (as :func:`matvecs`)."""
    return np.einsum("jm,jmn->jn", v, A)


STACKED_SHARE = 0.6
""":func:`stack_matvec` runs one product over the whole stack while at least this share of
its machines take part, else one product per machine on views (measured at J = 1,000: the
whole stack costs as much as about 600 machines one by one)."""

SMALL_STACK = 8
""":func:`stack_matvec` runs one product per machine on a stack of at most this many machines
(an MPI rank's or a thread's block of one, a small simulation): there BLAS's matrix-vector
products beat the stacked einsum (measured at (1, 4,000, 50): 94 vs 164 us for X v and 65 vs
147 us for v^T X; at 5 machines about 2x too)."""


def stack_matvec(
    A: np.ndarray, idx: np.ndarray, v: np.ndarray, *, left: bool = False
) -> np.ndarray:
    """A_j v_i (``left``: v_i^T A_j = A_j^T v_i) for j = idx[i] (sorted), without a copy of
    A's rows: one stacked product over the whole stack (v scattered into zeros) while at
    least :data:`STACKED_SHARE` of it take part and it holds more than :data:`SMALL_STACK`
    machines, else one product per machine on views (a fancy-indexed copy of the rows cost
    more than the products)."""
    n_all = A.shape[0]
    if n_all > SMALL_STACK and idx.size >= STACKED_SHARE * n_all:
        if idx.size < n_all:
            rows, v = v, np.zeros((n_all, v.shape[1]))
            v[idx] = rows
        out = vecmats(v, A) if left else matvecs(A, v)
        return out if idx.size == n_all else out[idx]
    if idx.size == 1:  # one machine: its product alone
        j = int(idx[0])
        return (np.dot(v[0], A[j]) if left else np.dot(A[j], v[0]))[None]
    out = np.empty((idx.size, A.shape[2] if left else A.shape[1]))
    for out_i, j, v_i in zip(out, idx.tolist(), v, strict=True):
        if left:
            np.dot(v_i, A[j], out=out_i)
        else:
            np.dot(A[j], v_i, out=out_i)
    return out
