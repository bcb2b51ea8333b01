r"""The theta step of a block of machines, written once for every backend.

Machine j of the block (row r) solves

    theta_j = argmin f_j(theta) + (rho_j/2) ||theta - m_j||^2,   rho_j = c d_j,

f_j(theta) = (1/n) sum over its rows of l(y x~^T theta), from its last theta. The solvers
(``ADMMConfig.theta_solver``) on a :class:`~dpnet.decentralized.stacked.StackedShards` block:

- ``newton`` (:class:`NewtonThetaStep`): damped Newton to a gradient tolerance, machine by
  machine in the compiled kernel :mod:`dpnet.decentralized._newton`, so each follows exactly
  its own sequence whatever the block. A tall shard (n_j >= p + 1) keeps its Newton matrix
  across iterations and rounds (a chord / Shamanskii method); a wide one (n_j < p + 1) solves
  its system by the Woodbury identity.
- ``majorized`` (:class:`MajorizedThetaStep`): ``beta_steps`` majorize-minimize iterations on
  the fixed curvature bound (L/n) X~^T X~ + rho I.
- ``gradient`` (:func:`gradient_thetas`): the paper's ``beta_steps`` gradient steps.
- under record privacy: :func:`~dpnet.decentralized.record.private_thetas`, the fixed-work
  Gaussian release.

Each machine's margins y X~ theta, loss and loss gradient are carried along the Newton steps and
from round to round: a step costs one product with X~ for the margins and one for the gradient
at the new point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpnet.decentralized import _newton
from dpnet.decentralized.stacked import StackedShards, stack_matvec
from dpnet.decentralized.steps import NEWTON_TOL
from dpnet.losses.margin import HuberizedHinge, Logistic, MarginLoss, UnbiasedLogistic

NEWTON_MAX_ITER = 50

NO_ANCHORS = np.empty((0, 0))
"""The Newton state of a block whose theta step keeps no matrix (or has formed none yet)."""
NO_ANCHORS.setflags(write=False)


@dataclass
class ThetaResult:
    """A block's theta step: theta (k, dim), f_j(theta) where the step computed it (else
    None), and each machine's subproblem gradient norm at theta (0 for steps of a fixed
    count: their distance from solved is not measured)."""

    theta: np.ndarray
    loss: np.ndarray | None
    error: np.ndarray | float


def loss_kernel(loss: MarginLoss) -> tuple[int, float]:
    """(code, parameter) of ``loss`` in the compiled kernel (:mod:`._newton`)."""
    if isinstance(loss, UnbiasedLogistic):
        return _newton.UNBIASED_LOGISTIC, loss.keep_prob
    if isinstance(loss, Logistic):
        return _newton.LOGISTIC, 0.0
    if isinstance(loss, HuberizedHinge):
        return _newton.HUBERIZED_HINGE, loss.h
    raise TypeError(f"the Newton theta step has no compiled form of {loss!r}")


class NewtonThetaStep:
    r"""The Newton theta step of a block (:mod:`dpnet.decentralized._newton`, the one compiled
    kernel), its points and kept matrices carried from round to round.

    Every machine's point: at theta (k, dim) the margins y X~ theta (k, n_max), f_j(theta) (k,)
    and its gradient (k, dim). Every tall machine's (n_j >= dim) kept Newton matrix H(theta_a) =
    X~^T D(theta_a) X~ + rho_a I, valid where ``kept``: formed at ``anchor[j]`` (theta_a) from
    theta_a's own margins, held as its Cholesky factor and its data part ``gram[j]`` (a new rho
    shifts it). A matrix is a function of (theta_a, rho_a) alone, so a block restored from the
    anchors (:meth:`state`) goes on bitwise. ``counts`` (k, len(``_newton.COUNTS``)) adds up each
    machine's work in the kernel.
    """

    def __init__(self, data: StackedShards, theta: np.ndarray, anchors: np.ndarray,
                 margins: np.ndarray) -> None:  # fmt: skip
        self._kernel = _newton
        self.data = data = (
            StackedShards(
                np.ascontiguousarray(data.X, dtype=float),
                np.ascontiguousarray(data.y, dtype=float),
                data.mask,
                data.n_total,
                data.loss,
            )
            if not (data.X.flags.c_contiguous and data.y.flags.c_contiguous)
            else data
        )
        n_mach, n_max, dim = data.X.shape
        self._rows = data.rows
        self.tall = self._rows >= dim
        self._code, self._param = loss_kernel(data.loss)
        self.counts = np.zeros((n_mach, len(_newton.COUNTS)), dtype=np.int64)
        matrices = (n_mach, dim, dim) if self.tall.any() else (n_mach, 0, 0)
        self.gram, self.factor = np.zeros(matrices), np.zeros(matrices)
        self.anchor = np.zeros((n_mach, dim))
        self.anchor_rho = np.full(n_mach, np.nan)
        self.kept = np.zeros(n_mach, dtype=bool)
        wide = np.flatnonzero(~self.tall)
        width = int(self._rows[wide].max()) if wide.size else 0
        self._outer = np.zeros((n_mach, width, width))  # X~_j X~_j^T of the wide machines
        for j in wide.tolist():
            rows_j = data.X[j, : self._rows[j]]
            self._outer[j, : rows_j.shape[0], : rows_j.shape[0]] = rows_j @ rows_j.T
        if anchors.size:
            _newton.restore(self._data_args(), anchors, *self._matrices()[:-1], self.counts)
        self.theta = np.array(theta, dtype=float)
        self.margin = np.zeros((n_mach, n_max))
        self.loss, self.loss_grad = np.empty(n_mach), np.empty((n_mach, dim))
        fresh = margins.size == 0
        if not fresh:
            self.margin[...] = margins
        self._points_at(fresh)

    def _data_args(self) -> _newton.BlockData:
        data = self.data
        return data.X, data.y, self._rows, data.inv_n, self._code, self._param

    def _matrices(self) -> tuple:
        return self.gram, self.factor, self.anchor, self.anchor_rho, self.kept, self._outer

    def _points_at(self, fresh: bool) -> None:
        self._kernel.points_at(
            self._data_args(),
            self.theta,
            self.margin,
            self.loss,
            self.loss_grad,
            fresh,
            self.counts,
        )

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """(anchors, margins) for the loop state: (theta_a, rho_a) of every machine, NaN rows
        where none is kept."""
        if not self.kept.any():
            return NO_ANCHORS, self.margin
        stored = np.column_stack([self.anchor, self.anchor_rho])
        stored[~self.kept] = np.nan
        return stored, self.margin

    def __call__(
        self,
        center: np.ndarray,
        rho: np.ndarray,
        theta_prev: np.ndarray,
        *,
        tol: float | np.ndarray = NEWTON_TOL,
        relative: float = 0.0,
        max_iter: int = NEWTON_MAX_ITER,
    ) -> ThetaResult:
        """The step from ``theta_prev`` to ``tol`` (one, or one per machine); a machine whose
        gradient at ``theta_prev`` times ``relative`` is larger stops there instead."""
        if self.theta.shape != theta_prev.shape or not (self.theta == theta_prev).all():
            self.theta = np.array(theta_prev, dtype=float)
            self._points_at(True)
        n_mach = theta_prev.shape[0]
        final_norm = np.empty(n_mach)
        self._kernel.newton(
            self._data_args(),
            np.ascontiguousarray(center, dtype=float),
            np.ascontiguousarray(rho, dtype=float),
            np.full(n_mach, tol) if np.ndim(tol) == 0 else np.array(tol, dtype=float),
            float(relative),
            int(max_iter),
            self.theta,
            self.margin,
            self.loss,
            self.loss_grad,
            *self._matrices(),
            final_norm,
            self.counts,
        )
        return ThetaResult(self.theta.copy(), self.loss.copy(), final_norm)


def warm_up() -> None:
    """Compile the Newton theta step's kernel (or load it from numba's on-disk cache) by one
    tiny solve of a tall and a wide machine and one restore from its anchors: every entry
    point with the argument types of a run."""
    rng = np.random.default_rng(0)
    X = np.zeros((2, 4, 3))
    X[0], X[1, :2] = rng.standard_normal((4, 3)), rng.standard_normal((2, 3))
    y = np.where(rng.random((2, 4)) < 0.5, 1.0, -1.0)
    mask = np.array([[1.0] * 4, [1.0, 1.0, 0.0, 0.0]])
    data = StackedShards(X, y, mask, 6, Logistic())
    step = NewtonThetaStep(data, np.zeros((2, 3)), NO_ANCHORS, NO_ANCHORS)
    theta = step(np.ones((2, 3)), np.ones(2), np.zeros((2, 3))).theta
    anchors, margins = step.state()
    NewtonThetaStep(data, theta, anchors, margins)


class MajorizedThetaStep:
    r"""``n_steps`` majorize-minimize iterations from the last theta: with L >= l'' the loss's
    curvature bound, the fixed matrix B_j = (L/n) X~_j^T X~_j + rho_j I majorizes the
    subproblem's Hessian, and theta <- theta - B_j^{-1} grad(theta) decreases its objective.
    B_j changes only with rho_j, so it is factorized once per value: Cholesky of the
    (p+1) x (p+1) matrix for tall shards, and for wide ones (n_j < p + 1) by Woodbury,
    B^{-1} g = (1/rho) [g - X~^T (rho n/L I + X~ X~^T)^{-1} X~ g]."""

    def __init__(self, data: StackedShards, n_steps: int) -> None:
        self.data = data
        self.n_steps = n_steps
        self.scale = data.loss.curvature_bound / data.n_total
        self._factors: dict[int, tuple[float, tuple[np.ndarray, bool] | None]] = {}
        self._grams: dict[int, np.ndarray] = {}

    def _rows(self, j: int) -> np.ndarray:
        return self.data.X[j, : int(self.data.rows[j])]

    def _solve(self, j: int, rho: float, grad: np.ndarray) -> np.ndarray:
        from scipy.linalg import cho_factor, cho_solve  # scipy: ~0.2 s to import, this step only

        X = self._rows(j)
        wide = X.shape[0] < X.shape[1]
        if j not in self._grams:
            self._grams[j] = X @ X.T if wide else X.T @ X
        if j not in self._factors or self._factors[j][0] != rho:
            gram = self._grams[j]
            matrix = gram if wide else self.scale * gram
            matrix = matrix + (rho / self.scale if wide else rho) * np.eye(gram.shape[0])
            try:
                factor = cho_factor(matrix, lower=True, check_finite=False)
            except np.linalg.LinAlgError:  # not numerically positive definite (features
                factor = None  # spanning ~1e99 and 1): the stop rule ends it
            self._factors[j] = (rho, factor)
        factor = self._factors[j][1]
        if factor is None:
            return np.full_like(grad, np.nan)
        if not wide:
            return cho_solve(factor, grad, check_finite=False)
        return (grad - X.T @ cho_solve(factor, X @ grad, check_finite=False)) / rho

    def __call__(self, center: np.ndarray, rho: np.ndarray, theta_prev: np.ndarray) -> np.ndarray:
        data = self.data
        everyone = np.arange(theta_prev.shape[0])
        theta = theta_prev.copy()
        for _ in range(self.n_steps):
            margin = data.y * stack_matvec(data.X, everyone, theta)
            grad = data.loss_gradient(everyone, margin) + rho[:, None] * (theta - center)
            theta = theta - np.stack(
                [self._solve(j, float(rho[j]), grad[j]) for j in everyone.tolist()]
            )
        return theta


def gradient_thetas(
    data: StackedShards,
    center: np.ndarray,
    rho: np.ndarray,
    theta_prev: np.ndarray,
    *,
    n_steps: int,
    step_size: float,
) -> np.ndarray:
    """The paper's theta step: ``n_steps`` (U) gradient steps of size ``step_size``
    (alpha_beta) from the last theta."""
    everyone = np.arange(theta_prev.shape[0])
    theta = theta_prev.copy()
    for _ in range(n_steps):
        margin = data.y * stack_matvec(data.X, everyone, theta)
        theta -= step_size * (
            data.loss_gradient(everyone, margin) + rho[:, None] * (theta - center)
        )
    return theta


def block_loss(data: StackedShards, theta: np.ndarray) -> np.ndarray:
    """f_j(theta_j) of every machine of the block."""
    everyone = np.arange(theta.shape[0])
    margin = data.y * stack_matvec(data.X, everyone, theta)
    return data.inv_n * data.margin_loss_sum(slice(None), margin)
