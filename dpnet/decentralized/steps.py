r"""Pure-numpy steps of the decentralized group-lasso logistic ADMM (paper 3, Algorithm 1).

Machine j holds theta_j = (beta_j, b_j) in R^{p+1} (intercept last), an auxiliary Z_j and, for
every i in its closed neighbourhood Nbar_j = N_j + {j} (d_j = |Nbar_j|), two dual copies:

- ``v_out[i]`` = V_{ji}, the multiplier of Z_j = theta_i  (used in j's Z step),
- ``v_in[i]``  = V_{ij}, the multiplier of Z_i = theta_j  (used in j's theta step).

With f_j(theta) = (1/n) sum_{local} l(y x~^T theta), l the logistic loss log(1 + e^{-m}) or its
flip-corrected version (:mod:`dpnet.losses.margin`), and h(Z) = (lam/(2J)) sum_g w_g ||Z_g|| (the
intercept coordinate unpenalised), one round is

    Z_j     <- argmin h(Z) + (c/2) sum_{i in Nbar_j} ||Z - theta_i + V_ji/c||^2
             = S(u_j; lam w/(2J)) / (c d_j),  u_j = sum_i (c theta_i - V_ji)  (block soft-threshold)
    theta_j <- argmin f_j(theta) + (c d_j/2) ||theta - m_j||^2,  m_j = mean_i (Z_i + V_ij/c)
    V_ji    += c (Z_j - theta_i),   V_ij += c (Z_i - theta_j)

Both copies of every multiplier are updated from the same two numbers on the two machines that
hold them, so they stay bitwise equal without a third exchange. See docs/algorithms.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, NamedTuple

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.linalg.blas import dsyrk
from scipy.linalg.lapack import dposv, dpotrf, dpotrs

from dpnet.losses.margin import Logistic, MarginLoss
from dpnet.penalties.group import group_norms

NEWTON_TOL = 1e-12
"""The theta step's gradient-norm floor: a solve to rounding (every machine's, the simulator's)."""
NEWTON_MAX_ITER = 50
ARMIJO_FRACTION = 1e-4  # sufficient decrease: f(theta - t s) <= f - ARMIJO_FRACTION t g^T s
SMALLEST_STEP = 1e-10  # the Armijo halvings stop once t is below this
FLAT_SLOPE = 1e-12  # g^T s <= FLAT_SLOPE max(1, |f|): below what f resolves, the full step
THETA_RTOL = 0.1
"""The default of :attr:`~dpnet.decentralized.admm.ADMMConfig.theta_rtol`, measured in
docs/algorithms.md ("How exactly the theta step is solved")."""


def theta_tolerance(
    rtol: float, c: float, primal: float | np.ndarray, dual: float | np.ndarray
) -> float | np.ndarray:
    r"""The gradient norm at which the next round's theta step stops:
    max(NEWTON_TOL, rtol max(c r_j, s_j)), with r_j, s_j this round's primal and dual
    residuals of the machine (:func:`residuals`; floats, or arrays over machines).

    c r_j and s_j are in gradient units (the dual variables' and the Z's motion in one
    round), so the subproblem is solved a factor rtol below the error the round itself still
    makes: an inexact ADMM whose errors shrink with the residuals (Eckstein & Bertsekas 1992
    need them summable, which the residuals' linear decrease gives), and at the stop rule's
    tolerance the solve is exact to rtol times it (docs/algorithms.md). rtol = 0: every
    solve to NEWTON_TOL. NaN residuals give a NaN tolerance: the solve runs NEWTON_MAX_ITER
    iterations, as it did on a non-finite iterate, and the stop rule ends the run.
    """
    if isinstance(primal, float) and isinstance(dual, float):  # one machine's (round loop)
        if math.isnan(primal) or math.isnan(dual):
            return math.nan
        return max(NEWTON_TOL, rtol * max(c * primal, dual))
    tol = np.maximum(NEWTON_TOL, rtol * np.maximum(c * np.asarray(primal), dual))
    return tol if np.ndim(tol) else float(tol)


@dataclass(frozen=True)
class GroupStructure:
    """Groups of the p penalised columns (CSR: ``grp_indices`` a permutation of 0..p-1) and
    their thresholds t_g = lam * w_g / (2J)."""

    grp_ptr: np.ndarray
    grp_indices: np.ndarray
    thresholds: np.ndarray
    _column_group: np.ndarray = field(init=False, repr=False, compare=False)
    _theta_group: np.ndarray = field(init=False, repr=False, compare=False)
    _in_order: bool = field(init=False, repr=False, compare=False)
    _floor: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n_cols = len(self.grp_indices)
        if not np.array_equal(np.sort(self.grp_indices), np.arange(n_cols)):
            raise ValueError("grp_indices must be a permutation of the penalised columns")
        column_group = np.empty(n_cols, dtype=np.int64)
        column_group[self.grp_indices] = np.repeat(
            np.arange(len(self.grp_ptr) - 1), np.diff(self.grp_ptr)
        )
        object.__setattr__(self, "_column_group", column_group)
        # a theta's coordinates: the intercept (last) in a group of its own, index G
        theta_group = np.append(column_group, len(self.grp_ptr) - 1)
        object.__setattr__(self, "_theta_group", theta_group)
        object.__setattr__(
            self, "_in_order", bool(np.array_equal(self.grp_indices, np.arange(n_cols)))
        )
        # t_g, or the smallest positive float for t_g = 0 (see soft_threshold)
        floor = np.maximum(self.thresholds, np.finfo(float).tiny)
        object.__setattr__(self, "_floor", floor)

    def norms(self, beta: np.ndarray) -> np.ndarray:
        """||beta_g|| of every group, along the last axis (a machine's beta, or one per row)."""
        return group_norms(beta, self.grp_ptr, None if self._in_order else self.grp_indices)

    def penalty(self, beta: np.ndarray) -> np.ndarray:
        """sum_g t_g ||beta_g|| (of each row; 0-d for one beta)."""
        return np.asarray(self.norms(beta) @ self.thresholds)

    def _shrink(self, u: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Every group's factor 1 - t_g / max(||u_g||, t_g), along the last axis (into
        ``out`` if given)."""
        factors = np.maximum(self.norms(u), self._floor, out=out)
        np.divide(self.thresholds, factors, out=factors)
        return np.subtract(1.0, factors, out=factors)

    def soft_threshold(self, u: np.ndarray) -> np.ndarray:
        """The prox of sum_g t_g ||.||: every block u_g scaled by max(0, 1 - t_g/||u_g||)
        = 1 - t_g / max(||u_g||, t_g) (0 at or below the threshold; 1 where t_g = 0: the
        floor makes that 0 / ||u_g|| with no 0 / 0 on a zero block), along the last axis."""
        return u * self._shrink(u)[..., self._column_group]

    def theta_shrinkage(self, u: np.ndarray) -> np.ndarray:
        """The factors of :meth:`soft_threshold` for a whole theta = (beta, b), u of length
        p + 1, 1 on the unpenalised intercept: u times them is (S(u_beta), u_b) bitwise
        (x 1.0 is exact)."""
        n_groups = len(self.thresholds)
        factors = np.empty(n_groups + 1)
        factors[n_groups] = 1.0
        self._shrink(u[:-1], out=factors[:n_groups])
        return factors.take(self._theta_group)


@dataclass(frozen=True)
class LocalData:
    """One machine's shard: design with a ones column appended, labels in {-1, +1}, and the
    margin loss (:class:`~dpnet.losses.margin.UnbiasedLogistic` for randomized labels)."""

    X_aug: np.ndarray
    y: np.ndarray
    n_total: int
    loss: MarginLoss = Logistic()

    @property
    def n_features(self) -> int:
        return self.X_aug.shape[1] - 1

    @cached_property
    def y_over_n(self) -> np.ndarray:
        """(1/n) y, the loss gradient's weights of l'(margin): X~^T ((1/n) y l'), formed once."""
        return (1.0 / self.n_total) * self.y


def z_update(
    theta_nbhd: np.ndarray,
    v_out: np.ndarray,
    z_prev: np.ndarray,
    c: float,
    groups: GroupStructure,
    alpha_z: float = 1.0,
) -> np.ndarray:
    """Z step: exact group soft-threshold target, approached with step ``alpha_z`` (1 = exact)."""
    d = theta_nbhd.shape[0]
    rows = c * theta_nbhd
    rows -= v_out
    u = np.add.reduce(rows, axis=0)  # sum_i (c theta_i - V_ji), the rows in order
    target = u * groups.theta_shrinkage(u)
    target /= c * d
    if alpha_z == 1.0:
        return target
    return z_prev + alpha_z * (target - z_prev)


def local_objective(data: LocalData, theta: np.ndarray) -> float:
    """f_j(theta) = (1/n) sum over the shard of l(y x~^T theta)."""
    return float(data.loss.value(data.y * (data.X_aug @ theta)).sum() / data.n_total)


def prox_center(z_nbhd: np.ndarray, v_in: np.ndarray, c: float) -> np.ndarray:
    """m_j = mean_i (Z_i + V_ij / c) (a sum divided by d_j: np.mean's floats, without its
    Python-level wrapper)."""
    rows = v_in / c
    rows += z_nbhd
    return np.add.reduce(rows, axis=0) / z_nbhd.shape[0]


class ThetaSolve(NamedTuple):
    """A Newton theta step's result: theta, f_j(theta) (read by the stop statistics), and the
    subproblem's gradient norm at theta, how far theta is from the step's exact minimiser in
    gradient units (the stop rule requires it small too: :func:`scaled_residual`)."""

    theta: np.ndarray
    loss: float
    gradient_norm: float


@dataclass
class DescentPoint:
    """The local loss at one theta iterate: its margins y X~ theta and f_j(theta); the loss
    gradient X~^T (y l'/n) and the Newton weights l''/n there once asked for (each computed
    once). Margins are carried along the steps of a solve (one product with X~ per step) and
    from one round to the next; every other entry is a function of them, so a point rebuilt
    from stored margins is bitwise the kept one."""

    theta: np.ndarray
    margin: np.ndarray
    loss_value: float
    first: np.ndarray | None = None  # l'(margin), when computed with the value
    _gradient: np.ndarray | None = None
    _weights: np.ndarray | None = None

    @classmethod
    def at(
        cls, data: LocalData, theta: np.ndarray, margin: np.ndarray | None = None
    ) -> DescentPoint:
        """The point of ``theta``; its margins computed, or the given ones (a checkpoint's)."""
        margin = data.y * (data.X_aug @ theta) if margin is None else margin
        loss_value = (1.0 / data.n_total) * data.loss.value(margin).sum()
        return cls(theta.copy(), margin, float(loss_value))

    def loss_gradient(self, data: LocalData) -> np.ndarray:
        """X~^T (y l'/n) at the margins."""
        if self._gradient is None:
            first = data.loss.derivative(self.margin) if self.first is None else self.first
            self._gradient = data.X_aug.T @ (data.y_over_n * first)
        return self._gradient

    def weights(self, data: LocalData) -> np.ndarray:
        """The Newton weights l''/n at the margins (only a step that forms H reads them)."""
        if self._weights is None:
            self._weights = (1.0 / data.n_total) * data.loss.curvature(self.margin)
        return self._weights


def theta_gradient(
    data: LocalData, z_nbhd: np.ndarray, v_in: np.ndarray, theta: np.ndarray, c: float
) -> np.ndarray:
    """Gradient of the theta step's objective f_j(theta) + (c d_j/2) ||theta - m_j||^2."""
    rho, m = c * z_nbhd.shape[0], prox_center(z_nbhd, v_in, c)
    margin = data.y * (data.X_aug @ theta)
    return data.X_aug.T @ (data.y * data.loss.derivative(margin) / data.n_total) + rho * (theta - m)


NewtonSystem = Literal["dense", "woodbury"]


def weighted_gram(X: np.ndarray, sqrt_weights: np.ndarray, lower: bool = False) -> np.ndarray:
    """The upper (or ``lower``) triangle of S^T S, S = diag(sqrt_weights) X: one symmetric
    product (BLAS dsyrk, half a general product's flops) of S^T, a Fortran-ordered view of a
    row-major S (no copy); the other triangle is zero."""
    scaled = X * sqrt_weights[:, None]
    return dsyrk(1.0, scaled.T, lower=int(lower))


def newton_system_kind(n_rows: int, dim: int) -> NewtonSystem:
    """How the theta step solves H s = g, H = X~^T D X~ + rho I of size ``dim`` = p + 1.

    ``"dense"`` (form H, O(n_j dim^2 + dim^3)) when the shard has n_j >= dim rows,
    ``"woodbury"`` (an n_j x n_j system, O(n_j^2 dim + n_j^3)) when n_j < dim (wide data).
    """
    return "woodbury" if n_rows < dim else "dense"


def newton_direction(
    X: np.ndarray,
    weights: np.ndarray,
    rho: float,
    grad: np.ndarray,
    kind: NewtonSystem,
    gram: np.ndarray | None = None,
) -> np.ndarray:
    r"""H^{-1} grad for H = X^T diag(weights) X + rho I, weights >= 0 (may be exactly 0), rho > 0.

    ``dense``: H = A^T A + rho I with A = S X, S = diag(weights)^{1/2} (a symmetric rank-k
    product, :func:`weighted_gram`), solved by Cholesky (LAPACK dposv); NaN if H has a
    non-finite entry or is not numerically positive definite (the stop rule then stops the
    run as non-finite). ``woodbury``:

        H^{-1} g = (1/rho) [g - X^T S (rho I + S X X^T S)^{-1} S X g],

    an n x n SPD (Cholesky, LAPACK dposv) system that never divides by a weight, NaN as the
    dense one; ``gram`` = X X^T may be passed to reuse it across Newton iterations. See
    docs/algorithms.md.
    """
    if kind == "dense":
        hess = weighted_gram(X, np.sqrt(weights))  # the upper triangle, which dposv reads
        hess.flat[:: hess.shape[0] + 1] += rho
        if not np.isfinite(hess).all():  # posv would "solve" a system with infinite entries
            return np.full_like(grad, np.nan)
        _, step, info = dposv(hess, grad, overwrite_a=True)
        return step if info == 0 else np.full_like(grad, np.nan)
    if kind != "woodbury":
        raise ValueError(f"unknown Newton system kind {kind!r}")
    if X.shape[0] == 0:  # no rows: H = rho I
        return grad / rho
    if gram is None:
        gram = X @ X.T
    s = np.sqrt(weights)
    small = s[:, None] * gram * s[None, :]
    small[np.diag_indices_from(small)] += rho
    if not np.isfinite(small).all():
        return np.full_like(grad, np.nan)
    _, w, info = dposv(small, s * (X @ grad), lower=1, overwrite_a=True)
    if info != 0:  # not numerically positive definite (features spanning ~1e99 and 1)
        return np.full_like(grad, np.nan)
    return (grad - X.T @ (s * w)) / rho


Direction = Callable[["DescentPoint", np.ndarray, float], tuple[np.ndarray, bool]]
"""(the point at theta, the gradient there, its norm) -> (the step s, theta <- theta - s;
whether s is a Newton step, on the matrix of this theta)."""


def theta_step_newton(
    data: LocalData,
    z_nbhd: np.ndarray,
    v_in: np.ndarray,
    theta_prev: np.ndarray,
    c: float,
    *,
    tol: float = NEWTON_TOL,
    max_iter: int = NEWTON_MAX_ITER,
    system: NewtonSystem | None = None,
    relative: float = 0.0,
) -> ThetaSolve:
    """theta step solved to ``tol`` (gradient norm; or ``relative`` times the gradient norm
    at ``theta_prev`` if that is larger) by damped Newton from ``theta_prev``.

    The Newton system (H = X~^T D X~ + c d_j I, D = diag(l''/n)) is solved as ``system``
    says, by default ``newton_system_kind(n_j, p+1)``: dense for tall shards, by the Woodbury
    identity when n_j < p + 1 (see :func:`newton_direction`); the iterations are those of
    :func:`_descend`.
    """
    X = data.X_aug
    kind = newton_system_kind(*X.shape) if system is None else system
    gram = X @ X.T if kind == "woodbury" else None  # O(n_j^2 (p+1)), once per theta step
    rho = c * z_nbhd.shape[0]

    def newton(point: DescentPoint, grad: np.ndarray, _: float) -> tuple[np.ndarray, bool]:
        return newton_direction(X, point.weights(data), rho, grad, kind, gram), True

    center = prox_center(z_nbhd, v_in, c)
    start = DescentPoint.at(data, theta_prev)
    end, norm = _descend(data, center, rho, start, tol, max_iter, newton, relative)
    return ThetaSolve(end.theta, end.loss_value, norm)


CHORD_CONTRACTION = 0.1
"""A step on a kept Newton matrix must shrink the gradient norm at least this much, or the
matrix is formed anew at the current iterate (:class:`ChordNewton`)."""
CHORD_STEPS = 2
"""A kept Newton matrix serves at most this many steps of one theta step; a further step
forms it anew (:class:`ChordNewton`). Both measured in docs/algorithms.md ("The Newton matrix
is kept")."""


@dataclass
class NewtonAnchor:
    """Where a machine's kept Newton matrix H(theta_a) = X~^T D(theta_a) X~ + rho_a I was
    formed; its Cholesky factor is a cache, rebuilt bitwise from (theta_a, rho_a), and so is
    ``gram``, the data part X~^T D(theta_a) X~ (upper triangle) that a new rho shifts."""

    theta: np.ndarray
    rho: float
    factor: np.ndarray | None = None
    gram: np.ndarray | None = None

    def as_array(self) -> np.ndarray:
        """(theta_a, rho_a) in one vector, for the loop state and its checkpoints."""
        return np.append(self.theta, self.rho)

    @classmethod
    def from_array(cls, stored: np.ndarray) -> NewtonAnchor | None:
        """The anchor of :meth:`as_array`; None for the empty vector of no anchor."""
        if stored.size == 0:
            return None
        return cls(stored[:-1].copy(), float(stored[-1]))


class ChordNewton:
    r"""The theta step by Newton iterations on a kept matrix (a chord / Shamanskii method):
    the step is H(theta_a)^{-1} grad(theta) with H formed at an anchor theta_a from an earlier
    iteration or round. When rho = c d_j changed, the kept data part X~^T D(theta_a) X~ is
    shifted by the new rho and factorized again (d^3 / 3 flops instead of n_j d^2: residual
    balancing's change of c costs no new matrix). H is formed anew at the current iterate when
    there is none, when a step on the kept one shrank the gradient norm less than
    :data:`CHORD_CONTRACTION`, or after :data:`CHORD_STEPS` steps on it in this theta step
    (a matrix that needs more will need them again next round). Between rounds theta moves
    little, so most rounds form no matrix: an iteration costs two products with X~ and a
    triangular solve instead of X~^T D X~ (n_j (p+1)^2) and its factorization. Every step
    is a descent step (H is positive definite) under the same Armijo search, and the step
    stops at the same gradient norm as :func:`theta_step_newton`: the same solution to
    ``tol``. Dense systems only (tall shards). The anchor is part of the loop state (a
    resumed run goes on bitwise): the matrix is always formed from theta_a's own margins.

    The solve's last point is kept (:class:`DescentPoint`): the next round starts from the
    same theta, so its loss and derivatives there are not computed again (their margins are
    loop state too)."""

    def __init__(
        self, data: LocalData, anchor: NewtonAnchor | None, point: DescentPoint | None = None
    ) -> None:
        self.data = data
        self.anchor = anchor
        self.point = point

    def _form(self, theta: np.ndarray, rho: float) -> NewtonAnchor:
        """The anchor at ``theta``: its data part from theta's own margins, shifted by rho."""
        X, y, inv_n = self.data.X_aug, self.data.y, 1.0 / self.data.n_total
        gram = weighted_gram(X, np.sqrt(inv_n * self.data.loss.curvature(y * (X @ theta))))
        return self._shifted(theta.copy(), rho, gram)

    @staticmethod
    def _shifted(theta: np.ndarray, rho: float, gram: np.ndarray) -> NewtonAnchor:
        """The anchor at ``theta`` with data part ``gram``: the Cholesky factor of gram + rho I."""
        hess = gram.copy()
        hess.flat[:: hess.shape[0] + 1] += rho
        factor, info = dpotrf(hess, overwrite_a=True)
        if info != 0 or not np.isfinite(factor).all():
            factor = np.full_like(hess, np.nan)  # a non-finite iterate: the stop rule's
        return NewtonAnchor(theta, rho, factor, gram)

    def __call__(
        self,
        z_nbhd: np.ndarray,
        v_in: np.ndarray,
        theta_prev: np.ndarray,
        c: float,
        *,
        tol: float = NEWTON_TOL,
        max_iter: int = NEWTON_MAX_ITER,
        relative: float = 0.0,
    ) -> ThetaSolve:
        """The theta step, as :func:`theta_step_newton`."""
        rho = c * z_nbhd.shape[0]
        anchor = self.anchor
        if anchor is not None and anchor.rho != rho:  # the same theta_a, shifted anew
            if anchor.gram is None:  # resumed: the data part is rebuilt from theta_a
                self.anchor = self._form(anchor.theta, rho)
            else:
                self.anchor = self._shifted(anchor.theta, rho, anchor.gram)
        # the gradient norm before the last step on a kept matrix, and the steps on it so far
        last_norm, kept_steps = [math.inf], [0]

        def chord(point: DescentPoint, grad: np.ndarray, norm: float) -> tuple[np.ndarray, bool]:
            fresh = (
                self.anchor is None
                or norm > CHORD_CONTRACTION * last_norm[0]
                or kept_steps[0] >= CHORD_STEPS
            )
            if fresh:
                self.anchor = self._form(point.theta, rho)
                last_norm[0], kept_steps[0] = math.inf, 0  # a fresh matrix: a Newton step
            else:
                last_norm[0] = norm
                kept_steps[0] += 1
            assert self.anchor is not None
            if self.anchor.factor is None:  # resumed: the cache is rebuilt from theta_a
                self.anchor = self._form(self.anchor.theta, rho)
            return dpotrs(self.anchor.factor, grad)[0], fresh

        center = prox_center(z_nbhd, v_in, c)
        kept = self.point
        start = (
            kept
            if kept is not None and _same_values(kept.theta, theta_prev)
            else DescentPoint.at(self.data, theta_prev)
        )
        self.point, norm = _descend(self.data, center, rho, start, tol, max_iter, chord, relative)
        # a copy: the kept point's theta stays as it is
        return ThetaSolve(self.point.theta.copy(), self.point.loss_value, norm)


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """np.array_equal(a, b) (NaN unequal, -0.0 == 0.0) without its Python-level wrapper."""
    return a.shape == b.shape and bool((a == b).all())


def _descend(
    data: LocalData,
    m: np.ndarray,
    rho: float,
    start: DescentPoint,
    tol: float,
    max_iter: int,
    direction: Direction,
    relative: float = 0.0,
) -> tuple[DescentPoint, float]:
    """Minimize f_j(theta) + (rho/2) ||theta - m||^2 from ``start`` along ``direction`` until
    the gradient norm is <= ``tol``, or <= ``relative`` times its norm at ``start`` if that
    is larger; returns the last point and the gradient norm there (computed after a final
    Newton step too: the point keeps the derivatives for the next solve from it).

    The subproblem is smooth and rho-strongly convex; Armijo backtracking on the exact
    objective makes every step a descent step. The margins y X~ theta are carried along the
    iterations: a step s moves them by -t y X~ s, one product with X~ per iteration however
    many step lengths the line search tries.
    """
    X, y, inv_n, loss = data.X_aug, data.y, 1.0 / data.n_total, data.loss
    point = start
    theta = point.theta
    shift = theta - m
    f = point.loss_value + 0.5 * rho * np.dot(shift, shift)
    for iteration in range(max_iter + 1):
        grad = point.loss_gradient(data) + rho * shift
        norm = math.sqrt(grad @ grad)
        if iteration == 0:
            tol = max(tol, relative * norm)
        if norm <= tol or iteration == max_iter:
            break
        step, newton = direction(point, grad, norm)
        slope = grad @ step
        moved = y * (X @ step)
        if slope <= FLAT_SLOPE * max(1.0, abs(f)):
            # the predicted decrease is below what function values can resolve, so a line
            # search would only add rounding noise: the full step. A Newton step there ends
            # the solve (quadratic convergence); after a step on a kept matrix the gradient
            # is checked again
            theta, margin = theta - step, point.margin - moved
            point = DescentPoint(theta, margin, float(inv_n * loss.value(margin).sum()))
            shift = theta - m
            if newton:
                return point, _gradient_norm(data, point, rho, shift)
            f = point.loss_value + 0.5 * rho * np.dot(shift, shift)
            continue
        t = 1.0
        while True:
            if t == 1.0:
                cand, cand_margin = theta - step, point.margin - moved
            else:
                cand, cand_margin = theta - t * step, point.margin - t * moved
            values, first = loss.value_and_derivative(cand_margin)
            cand_loss = float(inv_n * values.sum())
            cand_shift = cand - m
            f_cand = cand_loss + 0.5 * rho * np.dot(cand_shift, cand_shift)
            if f_cand <= f - ARMIJO_FRACTION * t * slope or t < SMALLEST_STEP:
                break
            t *= 0.5
        theta, f, shift = cand, f_cand, cand_shift
        point = DescentPoint(theta, cand_margin, cand_loss, first)
    return point, norm


def _gradient_norm(data: LocalData, point: DescentPoint, rho: float, shift: np.ndarray) -> float:
    """The subproblem's gradient norm at ``point`` (``shift`` = theta - m)."""
    grad = point.loss_gradient(data) + rho * shift
    return math.sqrt(grad @ grad)


def theta_update_newton(
    data: LocalData,
    z_nbhd: np.ndarray,
    v_in: np.ndarray,
    theta_prev: np.ndarray,
    c: float,
    *,
    tol: float = NEWTON_TOL,
    max_iter: int = NEWTON_MAX_ITER,
    system: NewtonSystem | None = None,
) -> np.ndarray:
    """The theta of :func:`theta_step_newton`, without its loss."""
    step = theta_step_newton(
        data, z_nbhd, v_in, theta_prev, c, tol=tol, max_iter=max_iter, system=system
    )
    return step.theta


class MajorizedThetaStep:
    r"""Inexact theta step: ``n_steps`` majorize-minimize iterations from ``theta_prev``.

    The loss's curvature bound L >= l'' gives the quadratic upper model of the subproblem with
    the fixed Hessian B = (L/n) X~^T X~ + c d_j I; one iteration is
    theta <- theta - B^{-1} grad(theta), and each one decreases the subproblem's objective. B
    changes only with c, so it is factorized once per value of c: Cholesky of the
    (p+1) x (p+1) matrix for tall shards, and for wide ones (n_j < p + 1) by Woodbury,
    B^{-1} g = (1/rho) [g - X~^T (rho n/L I + X~ X~^T)^{-1} X~ g], rho = c d_j. An iteration
    costs two products with X~ where a Newton iteration forms X~^T D X~ (docs/algorithms.md,
    "Inexact theta steps").
    """

    def __init__(self, data: LocalData, n_steps: int) -> None:
        self.data = data
        self.n_steps = n_steps
        X = data.X_aug
        self.scale = data.loss.curvature_bound / data.n_total
        self.wide = X.shape[0] < X.shape[1]
        self.gram = X @ X.T if self.wide else X.T @ X
        self._factor: tuple[float, tuple[np.ndarray, bool]] | None = None

    def _solve(self, rho: float, grad: np.ndarray) -> np.ndarray:
        if self._factor is None or self._factor[0] != rho:
            shift = rho / self.scale if self.wide else rho
            matrix = self.gram if self.wide else self.scale * self.gram
            matrix = matrix + shift * np.eye(matrix.shape[0])
            try:
                self._factor = (rho, cho_factor(matrix, lower=True, check_finite=False))
            except np.linalg.LinAlgError:  # not numerically positive definite (features
                return np.full_like(grad, np.nan)  # spanning ~1e99 and 1): the stop rule ends it
        factor = self._factor[1]
        if not self.wide:
            return cho_solve(factor, grad, check_finite=False)
        X = self.data.X_aug
        return (grad - X.T @ cho_solve(factor, X @ grad, check_finite=False)) / rho

    def __call__(
        self, z_nbhd: np.ndarray, v_in: np.ndarray, theta_prev: np.ndarray, c: float
    ) -> np.ndarray:
        m = prox_center(z_nbhd, v_in, c)
        rho = c * z_nbhd.shape[0]
        X, y, y_over_n, loss = self.data.X_aug, self.data.y, self.data.y_over_n, self.data.loss
        theta = theta_prev.copy()
        for _ in range(self.n_steps):
            grad = X.T @ (y_over_n * loss.derivative(y * (X @ theta))) + rho * (theta - m)
            theta = theta - self._solve(rho, grad)
        return theta


def theta_update_gradient(
    data: LocalData,
    z_nbhd: np.ndarray,
    v_in: np.ndarray,
    theta_prev: np.ndarray,
    c: float,
    *,
    n_steps: int,
    step_size: float,
) -> np.ndarray:
    """The paper's theta step: ``n_steps`` (U) gradient steps of size ``step_size`` (alpha_beta)."""
    d = z_nbhd.shape[0]
    m = prox_center(z_nbhd, v_in, c)
    rho = c * d
    X, y, y_over_n, loss = data.X_aug, data.y, data.y_over_n, data.loss
    theta = theta_prev.copy()
    for _ in range(n_steps):
        margin = y * (X @ theta)
        theta -= step_size * (X.T @ (y_over_n * loss.derivative(margin)) + rho * (theta - m))
    return theta


def dual_update(
    v_out: np.ndarray,
    v_in: np.ndarray,
    z_own: np.ndarray,
    z_nbhd: np.ndarray,
    theta_own: np.ndarray,
    theta_nbhd: np.ndarray,
    c: float,
) -> None:
    """In place: V_ji += c (Z_j - theta_i) and V_ij += c (Z_i - theta_j) for i in Nbar_j.

    ``z_own`` is Z_j, or one row per i (its over-relaxed copies, see admm.relaxed)."""
    step = z_own - theta_nbhd
    step *= c
    v_out += step
    step = z_nbhd - theta_own
    step *= c
    v_in += step


def residuals(
    z_own: np.ndarray, z_prev: np.ndarray, theta_nbhd: np.ndarray, c: float
) -> tuple[float, float]:
    """Local primal max_i ||Z_j - theta_i|| and dual c sqrt(d_j) ||Z_j - Z_j^prev||."""
    apart = theta_nbhd - z_own
    apart *= apart
    primal = math.sqrt(np.maximum.reduce(np.add.reduce(apart, axis=1)))
    moved = z_own - z_prev
    dual = c * math.sqrt(theta_nbhd.shape[0]) * math.sqrt(moved @ moved)
    return primal, dual


def scaled_residual(
    primal: float | np.ndarray,
    dual: float | np.ndarray,
    c: float,
    norm: float | np.ndarray,
    theta_error: float | np.ndarray = 0.0,
) -> float | np.ndarray:
    """The stop rule's rho_j = max(r_j max(1, c), s_j, g_j) / max(1, ||theta_j||) (floats, or
    arrays over machines; Python's max semantics, NaN included, in both).

    r_j is the primal iterates' disagreement, s_j the dual residual (the primal iterates'
    motion in gradient units), and c r_j is the dual variables' motion in one round
    (V += c (Z - theta)): the global KKT residual is at most a graph constant times
    max_j max(c r_j, s_j) plus L r_j. A penalty so large that nothing moves (c = 1e10: r_j
    ~ 1e-11, s_j = 0 in the group threshold's dead zone) has small r_j and s_j but not c r_j,
    so it is not mistaken for convergence; for c <= 1 the rule is max(r_j, s_j) as before.
    g_j (``theta_error``) is the gradient norm of the round's theta subproblem at theta_j
    (:class:`ThetaSolve`): the bound above assumes each theta step solved, and a step solved
    only to a fraction of the residuals (:func:`theta_tolerance`) adds g_j to it. Without it a
    first step solved to no better than its start (``--theta-rtol 1``) left every residual 0
    and stopped "converged" at theta = 0. 0 for the steps that report none (fixed numbers of
    majorized or gradient iterations; the fixed-work private step).
    """
    if isinstance(primal, float) and isinstance(dual, float) and isinstance(norm, float):
        # one machine's floats (every round of the round loop): Python's max itself
        largest = max(max(primal * max(1.0, c), dual), float(theta_error))
        return largest / (norm if norm > 1.0 else 1.0)
    scaled = primal * max(1.0, c)
    worst = np.where(dual > scaled, dual, scaled)
    worst = np.where(theta_error > worst, theta_error, worst)
    rho = worst / np.where(norm > 1.0, norm, 1.0)
    return rho if np.ndim(rho) else float(rho)
