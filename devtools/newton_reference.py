"""The numpy reference of the compiled Newton theta step (dpnet.decentralized._newton).

The vectorized numpy implementation the kernel replaced, kept for the tests only
(tests/test_newton_kernel.py): damped Newton with kept matrices (chord steps), Woodbury for
wide machines, Armijo backtracking, every machine of a stacked block masked out as its own
solve ends. Its floats differ from the kernel's in the last bits (BLAS dsyrk and dpotri against
a general product and an LU inverse, numpy's pairwise sums against sequential ones); its
iterations are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg.blas import dsyrk
from scipy.linalg.lapack import dposv, dpotrf, dpotri

from dpnet.decentralized import StackedShards
from dpnet.decentralized.stacked import machine_rows, matvecs, stack_matvec
from dpnet.decentralized.steps import NEWTON_TOL
from dpnet.decentralized.theta import ThetaResult

NEWTON_MAX_ITER = 50
ARMIJO_FRACTION = 1e-4  # sufficient decrease: f(theta - t s) <= f - ARMIJO_FRACTION t g^T s
SMALLEST_STEP = 1e-10  # the Armijo halvings stop once t is below this
FLAT_SLOPE = 1e-12  # g^T s <= FLAT_SLOPE max(1, |f|): below what f resolves, the full step
CHORD_CONTRACTION = 0.1
"""A step on a kept Newton matrix must shrink the gradient norm at least this much, or the
matrix is formed anew at the current iterate (:class:`NewtonThetaStep`)."""
CHORD_STEPS = 2
"""A kept Newton matrix serves at most this many steps of one theta step; a further step
forms it anew. Both measured in docs/algorithms.md ("The Newton matrix is kept")."""

NO_ANCHORS = np.empty((0, 0))
"""The Newton state of a block whose theta step keeps no matrix (or has formed none yet)."""
NO_ANCHORS.setflags(write=False)
NO_MACHINES = np.empty(0, dtype=np.intp)
NO_MACHINES.setflags(write=False)


def rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a_j . b_j for every row j."""
    return np.einsum("ij,ij->i", a, b)


@dataclass
class StackedPoints:
    """Every machine's point: at theta (k, dim) the margins y X~ theta (k, n_max), the loss
    f_j(theta) (k,) and its gradient X~^T (y l'/n) (k, dim)."""

    theta: np.ndarray
    margin: np.ndarray
    loss: np.ndarray
    loss_grad: np.ndarray

    @classmethod
    def at(
        cls, data: StackedShards, theta: np.ndarray, margin: np.ndarray | None = None
    ) -> StackedPoints:
        """The points of ``theta``: its margins computed, or the given ones (a checkpoint's)."""
        everyone = np.arange(theta.shape[0])
        if margin is None:
            margin = data.y * stack_matvec(data.X, everyone, theta)
        loss, first = data.margin_loss_sum_and_derivative(everyone, margin)
        loss *= data.inv_n
        return cls(theta.copy(), margin, loss, data.loss_gradient(everyone, margin, first))

    def gradient(
        self, idx: np.ndarray, center: np.ndarray, rho: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The subproblem's gradient f_j' + rho_j (theta_j - m_j) at the points of the machines
        ``idx`` (center, rho: every machine's), and its norm."""
        rows = machine_rows(idx, self.theta.shape[0])
        grad = self.loss_grad[rows] + rho[rows, None] * (self.theta[rows] - center[rows])
        return grad, np.sqrt(rowdot(grad, grad))


@dataclass
class KeptMatrices:
    """Every tall machine's kept Newton matrix H(theta_a) = X~^T D(theta_a) X~ + rho_a I,
    valid where ``kept``: formed at ``anchor[j]`` (theta_a) from theta_a's own margins, held
    as its inverse ``inverse[j]`` (a step is one product) and its data part in ``gram[j]``
    (lower triangle) for a new rho, which shifts it and inverts again. ``tall[j]``: whether
    machine j keeps one (n_j >= p + 1); a wide machine solves by Woodbury instead. A
    matrix is a function of (theta_a, rho_a) alone, so a block restored from the anchors
    (:meth:`restore`) goes on bitwise."""

    gram: np.ndarray  # (k, dim, dim)
    inverse: np.ndarray  # (k, dim, dim)
    anchor: np.ndarray  # (k, dim)
    rho: np.ndarray  # (k,)
    kept: np.ndarray  # (k,) bool
    tall: np.ndarray  # (k,) bool

    @classmethod
    def none(cls, data: StackedShards) -> KeptMatrices:
        n_mach, _, dim = data.X.shape
        return cls(
            np.zeros((n_mach, dim, dim)),
            np.zeros((n_mach, dim, dim)),
            np.zeros((n_mach, dim)),
            np.full(n_mach, np.nan),
            np.zeros(n_mach, dtype=bool),
            data.rows >= dim,
        )

    def form(
        self, data: StackedShards, idx: np.ndarray, theta: np.ndarray, rho: np.ndarray
    ) -> None:
        """Machines ``idx`` form their matrices at ``theta`` (one row each) with ``rho``: S^T S,
        S = diag(sqrt(l''/n)) X~_j at theta's own margins (one product with X~_j each: the
        same floats however many machines form), one symmetric product (BLAS dsyrk on a
        Fortran-ordered view of a row-major S), machine by machine on views of X~."""
        X, dim = data.X, data.X.shape[2]
        machines = idx.tolist()
        margin = np.empty((len(machines), X.shape[1]))
        for k, j in enumerate(machines):
            np.dot(X[j], theta[k], out=margin[k])
        margin *= data.y[idx]
        sqrt_weights = np.sqrt(data.inv_n * data.loss.curvature(margin))  # padded rows: X~ = 0
        scaled = np.empty((X.shape[1], dim))
        hess = np.zeros((dim, dim), order="F")
        for k, j in enumerate(machines):
            np.multiply(X[j], sqrt_weights[k][:, None], out=scaled)
            hess = dsyrk(1.0, scaled.T, c=hess, lower=1, overwrite_c=1)
            self.gram[j] = hess
            _invert_shifted(hess, rho[k], self.inverse[j])
        _finish_inverses(self.inverse, idx)
        self.anchor[idx], self.rho[idx], self.kept[idx] = theta, rho, True

    def shift(self, idx: np.ndarray, rho: np.ndarray) -> None:
        """The kept data parts of machines ``idx`` under a new ``rho``."""
        dim = self.gram.shape[1]
        hess = np.zeros((dim, dim), order="F")
        for k, j in enumerate(idx.tolist()):
            hess[...] = self.gram[j]
            _invert_shifted(hess, rho[k], self.inverse[j])
        _finish_inverses(self.inverse, idx)
        self.rho[idx] = rho

    def anchors(self) -> np.ndarray:
        """(theta_a, rho_a) of every machine, NaN rows where none is kept (loop state)."""
        if not self.kept.any():
            return NO_ANCHORS
        stored = np.column_stack([self.anchor, self.rho])
        stored[~self.kept] = np.nan
        return stored

    def restore(self, data: StackedShards, stored: np.ndarray) -> None:
        """The matrices of :meth:`anchors`, formed again."""
        if stored.size == 0:
            return
        idx = np.flatnonzero(~np.isnan(stored[:, -1]))
        self.form(data, idx, stored[idx, :-1], stored[idx, -1])


def _invert_shifted(hess: np.ndarray, rho: float, out: np.ndarray) -> None:
    """out = L + L^T for L the lower triangle of (hess + rho I)^{-1} (hess: its lower
    triangle, Fortran-ordered, overwritten), by its Cholesky factor (LAPACK dpotrf, dpotri:
    d^3 flops against LU's 2 d^3); NaN where it is not numerically positive definite. The
    strict upper triangle stays zero, so the diagonal of ``out`` is twice the inverse's
    (:func:`_finish_inverses`)."""
    hess.ravel(order="K")[:: hess.shape[0] + 1] += rho  # the diagonal: a view, contiguous
    hess, info = dpotrf(hess, lower=1, clean=0, overwrite_a=1)
    if info == 0:
        hess, info = dpotri(hess, lower=1, overwrite_c=1)
    if info == 0:
        np.add(hess, hess.T, out=out)
    else:
        out[...] = np.nan


def _finish_inverses(out: np.ndarray, idx: np.ndarray) -> None:
    """The inverses of machines ``idx`` from :func:`_invert_shifted`: their diagonals halved
    (exact: (x + x) / 2 = x), and NaN wherever a diagonal entry is not positive, as no
    inverse of a positive definite matrix has: an infinite diagonal entry of H factors with
    info 0 and leaves a zero row and column (features of 1e200; the stop rule's non-finite)."""
    diag = np.arange(out.shape[1])
    out[idx[:, None], diag, diag] *= 0.5
    positive = (out[idx[:, None], diag, diag] > 0).all(axis=1)
    if not positive.all():
        out[idx[~positive]] = np.nan


def woodbury_direction(
    X: np.ndarray, weights: np.ndarray, rho: float, grad: np.ndarray, gram: np.ndarray
) -> np.ndarray:
    r"""H^{-1} grad for H = X^T diag(weights) X + rho I (n < dim rows, weights >= 0, possibly
    0; rho > 0), with gram = X X^T, by the Woodbury identity

        H^{-1} g = (1/rho) [g - X^T S (rho I + S X X^T S)^{-1} S X g],   S = diag(weights)^(1/2),

    an n x n SPD system (Cholesky, LAPACK dposv) that never divides by a weight; NaN where it
    has a non-finite entry or is not numerically positive definite (features spanning ~1e99
    and 1): the stop rule then ends the run as non-finite."""
    if X.shape[0] == 0:  # no rows: H = rho I
        return grad / rho
    s = np.sqrt(weights)
    small = s[:, None] * gram * s[None, :]
    small[np.diag_indices_from(small)] += rho
    if not np.isfinite(small).all():
        return np.full_like(grad, np.nan)
    _, w, info = dposv(small, s * (X @ grad), lower=1, overwrite_a=True)
    if info != 0:
        return np.full_like(grad, np.nan)
    return (grad - X.T @ (s * w)) / rho


class ReferenceNewtonStep:
    r"""The numpy reference of the compiled Newton theta step (dpnet.decentralized._newton):
    the same iterations, every machine masked out of the stacked arrays as its own solve ends.
    ``formed[j]``, ``steps[j]``: the matrices machine j formed, the Newton steps it took.

    Per machine: H_j = X~_j^T diag(l''/n) X~_j + rho_j I; Armijo: f(theta - t s) <=
    f - 1e-4 t g^T s, halving t until it holds or t < 1e-10; the full step once
    g^T s <= 1e-12 max(1, |f|), which ends the solve after a fresh matrix. A tall machine
    forms H_j anew only without a kept one, when a step on it shrank its gradient norm by
    less than CHORD_CONTRACTION, or after CHORD_STEPS steps on it in this solve."""

    def __init__(self, data: StackedShards, theta: np.ndarray, anchors: np.ndarray,
                 margins: np.ndarray) -> None:  # fmt: skip
        self.data = data
        self.kept = KeptMatrices.none(data)
        self.kept.restore(data, anchors)
        self.points = StackedPoints.at(data, theta, margins if margins.size else None)
        self._grams: dict[int, np.ndarray] = {}  # X~_j X~_j^T of the wide machines
        self._everyone = np.arange(data.X.shape[0])
        self.formed = np.zeros(data.X.shape[0], dtype=np.int64)
        self.steps = np.zeros(data.X.shape[0], dtype=np.int64)

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """(anchors, margins) for the loop state."""
        return self.kept.anchors(), self.points.margin

    def _woodbury(self, j: int, margin: np.ndarray, rho: float, grad: np.ndarray) -> np.ndarray:
        data = self.data
        n_j = int(data.rows[j])
        X = data.X[j, :n_j]
        if j not in self._grams:
            self._grams[j] = X @ X.T
        weights = data.inv_n * data.loss.curvature(margin[:n_j])
        return woodbury_direction(X, weights, rho, grad, self._grams[j])

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
        data, kept, points = self.data, self.kept, self.points
        X, y, inv_n = data.X, data.y, data.inv_n
        n_mach = theta_prev.shape[0]
        if points.theta.shape != theta_prev.shape or not (points.theta == theta_prev).all():
            self.points = points = StackedPoints.at(data, theta_prev)
        if kept.kept.any():
            shifted = kept.kept & (kept.rho != rho)
            if shifted.any():  # a new rho: the kept data part shifted anew
                kept.shift(np.flatnonzero(shifted), rho[shifted])
        # every machine's bookkeeping, one allocation: the gradient norm before the last step
        # on a kept matrix, the tolerance, the final gradient norm, the steps on the kept
        # matrix in this solve
        book = np.empty((4, n_mach))
        last_norm, tols, final_norm, kept_steps = book[0], book[1], book[2], book[3]
        last_norm[...], tols[...], book[2:] = np.inf, tol, 0.0
        measured = np.zeros(n_mach, dtype=bool)
        active = self._everyone if self._everyone.size == n_mach else np.arange(n_mach)
        # theta_j - m_j of every machine's point, carried with it (the gradient's and the
        # objective's)
        shift = points.theta - center
        f = points.loss + 0.5 * rho * rowdot(shift, shift)
        for iteration in range(max_iter):
            rows = machine_rows(active, n_mach)  # views while every machine is active
            grad = points.loss_grad[rows] + rho[rows, None] * shift[rows]
            norm = np.sqrt(rowdot(grad, grad))
            if iteration == 0:
                np.maximum(tols, relative * norm, out=tols)
            stopping = norm <= tols[rows]
            if stopping.any():
                going = ~stopping
                stopped = active[stopping]
                final_norm[stopped], measured[stopped] = norm[stopping], True
                active, grad, norm = active[going], grad[going], norm[going]
                if active.size == 0:
                    break
                rows = machine_rows(active, n_mach)
            th, margin = points.theta[rows], points.margin[rows]
            tall = kept.tall[rows]
            form = tall & (
                ~kept.kept[rows]
                | (norm > CHORD_CONTRACTION * last_norm[rows])
                | (kept_steps[rows] >= CHORD_STEPS)
            )
            if form.any():
                new = active[form]
                kept.form(data, new, th[form], rho[new])
                self.formed[new] += 1
                last_norm[new], kept_steps[new] = np.inf, 0.0
            on_kept = tall & ~form
            if on_kept.any():
                chord = active[on_kept]
                last_norm[chord] = norm[on_kept]
                kept_steps[chord] += 1.0
            if tall.all():
                step = stack_matvec(kept.inverse, active, grad)
            else:
                step = np.empty_like(grad)
                step[tall] = matvecs(kept.inverse[active[tall]], grad[tall])
                for r in np.flatnonzero(~tall).tolist():
                    j = int(active[r])
                    step[r] = self._woodbury(j, margin[r], float(rho[j]), grad[r])
            self.steps[active] += 1
            slope = rowdot(grad, step)
            moved = y[rows] * stack_matvec(X, active, step)
            f_act = f[rows]
            rho_act = rho[rows]
            # max(|f|, 1) (NaN stays NaN, as Python's max(nan, 1.0))
            flat = slope <= FLAT_SLOPE * np.maximum(np.abs(f_act), 1.0)
            new_theta, new_margin = th - step, margin - moved
            new_loss, first = data.margin_loss_sum_and_derivative(active, new_margin)
            new_loss *= inv_n
            new_shift = new_theta - center[rows]
            f_new = new_loss + 0.5 * rho_act * rowdot(new_shift, new_shift)
            accepted = flat | (f_new <= f_act - ARMIJO_FRACTION * slope)
            searching = NO_MACHINES if accepted.all() else np.flatnonzero(~accepted)
            if searching.size:
                t = np.ones(active.size)
            while searching.size:
                t[searching] *= 0.5
                trial = th[searching] - t[searching, None] * step[searching]
                trial_margin = margin[searching] - t[searching, None] * moved[searching]
                trial_loss, trial_first = data.margin_loss_sum_and_derivative(
                    active[searching], trial_margin
                )
                trial_loss *= inv_n
                trial_shift = trial - center[active[searching]]
                f_trial = trial_loss + 0.5 * rho_act[searching] * rowdot(trial_shift, trial_shift)
                ok = (
                    f_trial <= f_act[searching] - ARMIJO_FRACTION * t[searching] * slope[searching]
                ) | (t[searching] < SMALLEST_STEP)
                done = searching[ok]
                new_theta[done], new_margin[done] = trial[ok], trial_margin[ok]
                new_loss[done], f_new[done] = trial_loss[ok], f_trial[ok]
                first[done], new_shift[done] = trial_first[ok], trial_shift[ok]
                searching = searching[~ok]
            points.theta[rows], points.margin[rows], points.loss[rows] = (
                new_theta,
                new_margin,
                new_loss,
            )
            points.loss_grad[rows] = data.loss_gradient(active, new_margin, first)
            f[rows], shift[rows] = f_new, new_shift
            if flat.any():
                ends = flat & (~tall | form)  # a full step on a matrix of this iterate
                if ends.any():  # ends the solve
                    active = active[~ends]
                    if active.size == 0:
                        break
        if not measured.all():  # a final Newton step, or max_iter: measured now
            rest = np.flatnonzero(~measured)
            final_norm[rest] = points.gradient(rest, center, rho)[1]
        return ThetaResult(points.theta.copy(), points.loss.copy(), final_norm.copy())
