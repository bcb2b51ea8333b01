"""Non-private numerics for median (least-absolute-deviation) regression, theta = (mu, beta).

Residuals r_i = mu + x_i^T beta - y_i, design rows z_i = (1, x_i). Solvers:

- :func:`newton_minimise`: J(theta) = (1/n) sum l(r_i) + (1/2) sum_j a_j theta_j^2 + c^T theta
  for a convex C^1 loss l with bounded, a.e. defined l'' (Huber, log-smoothed absolute);
  regularised Newton with the exact (generalised) Hessian and Armijo backtracking.
- :func:`irls`: the reweighted least squares of Schlossmacher (1973) / Hunter & Lange (2000),
  weights 1/(e + |r|), a majorise-minimise scheme for l = phi_e.
- :func:`lp_lad`: the exact unpenalised LAD fit as a linear program (HiGHS).
- :func:`ridge_lad_exact`: the exact minimiser of (1/n) sum |r_i| + (lam/2)||beta||^2 by finite
  smoothing (Madsen & Nielsen 1993) and a KKT certificate; :func:`exact_lad` dispatches.
- :func:`lad_descent_direction`: steepest coordinatewise descent direction of the LAD loss.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import linalg, optimize, sparse

from dpnet.errors import DpnetError
from dpnet.losses.absolute import (
    log_smoothed_abs,
    log_smoothed_abs_curvature,
    log_smoothed_abs_derivative,
)
from dpnet.losses.huber import huber, huber_curvature, huber_derivative
from dpnet.penalties.l1 import soft_threshold

# (value, derivative, curvature) of a scalar loss, elementwise on residuals
Loss = tuple[Callable[[np.ndarray], np.ndarray], ...]


def huber_loss(gamma: float) -> Loss:
    """The Huber loss rho_gamma as a (value, derivative, curvature) triple."""
    return (
        lambda r: huber(r, gamma),
        lambda r: huber_derivative(r, gamma),
        lambda r: huber_curvature(r, gamma),
    )


def log_abs_loss(e: float) -> Loss:
    """The log-smoothed absolute loss phi_e as a (value, derivative, curvature) triple."""
    return (
        lambda r: log_smoothed_abs(r, e),
        lambda r: log_smoothed_abs_derivative(r, e),
        lambda r: log_smoothed_abs_curvature(r, e),
    )


def clip_rows_safe(X: np.ndarray, bound: float) -> np.ndarray:
    """Rows scaled to L2 norm <= bound, x_i min(1, bound/||x_i||), for any finite magnitude.

    Each row is divided by its largest |entry| before squaring, so ||x_i|| neither overflows
    (1e300-sized rows: np.linalg.norm gives inf, the clipped row 0) nor underflows (1e-200-sized
    rows against a 1e-250 bound: it gives 0, the row stays unclipped). Rows within the bound are
    returned unchanged; a clipped row is (x/s) bound/||x/s||, s = max_j |x_ij|.

    Fast path (one pass): when 1e-100 <= bound and every squared norm sum_j x_ij^2 is finite,
    the squared norms are accurate to a few ulps wherever they are compared with bound^2 >=
    1e-200 (a square that underflows is below 1e-308, negligible there), so the rows are
    compared and scaled directly; otherwise the scaled computation above.
    """
    if X.shape[1] and bound >= 1e-100:
        sq = np.einsum("ij,ij->i", X, X)
        if np.isfinite(sq.max(initial=0.0)):
            idx = np.flatnonzero(sq > bound * bound)
            out = X.copy()
            out[idx] = X[idx] * (bound / np.sqrt(sq[idx]))[:, None]
            return out
    s = np.max(np.abs(X), axis=1) if X.shape[1] else np.zeros(X.shape[0])
    s = np.where(s > 0, s, 1.0)
    unit = X / s[:, None]  # entries in [-1, 1], largest exactly 1: the norm lies in [1, sqrt(d)]
    unit_norm = np.linalg.norm(unit, axis=1)
    with np.errstate(under="ignore"):
        clip = unit_norm > bound / s  # ||x|| > bound without forming ||x||
    factor = bound / np.where(clip, unit_norm, 1.0)
    return np.where(clip[:, None], unit * factor[:, None], X)


def residuals(X: np.ndarray, y: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """r = mu + X beta - y for theta = (mu, beta)."""
    return theta[0] + X @ theta[1:] - y


def _residuals_t(XT: np.ndarray, y: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """:func:`residuals` from the feature-major copy XT = X^T (d, n), in place: one pass."""
    r = theta[1:] @ XT
    r += theta[0]
    r -= y
    return r


def _design_gram(XT: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(1/n) sum_i h_i z_i z_i^T with z_i = (1, x_i), from XT = X^T (d, n) C-contiguous: the
    products are BLAS calls on contiguous rows (on X itself, X^T (X * h) is 4x slower for small
    d). Rows with h_i = 0 are dropped when they are the majority (Huber curvature)."""
    d, n = XT.shape
    if np.count_nonzero(h) < n // 2:
        idx = np.flatnonzero(h)
        XT, h = XT[:, idx], h[idx]
    out = np.empty((d + 1, d + 1))
    out[0, 0] = h.sum()
    out[0, 1:] = out[1:, 0] = XT @ h
    out[1:, 1:] = (XT * h) @ XT.T
    return out / n


def newton_minimise(
    X: np.ndarray,
    y: np.ndarray,
    loss: Loss,
    *,
    ridge: np.ndarray,
    linear: np.ndarray | None = None,
    theta0: np.ndarray | None = None,
    gtol: float = 1e-10,
    max_iter: int = 200,
) -> tuple[np.ndarray, float]:
    """Minimise (1/n) sum l(r_i) + (1/2) sum_j ridge_j theta_j^2 + linear^T theta.

    Returns (theta, ||gradient||_2 at theta). Stops at ||gradient|| <= gtol or when no Armijo
    step decreases J any more (floating-point floor); the caller checks the gradient norm.
    Works on one feature-major copy of X (see :func:`_design_gram`).
    """
    value, deriv, curv = loss
    n, d = X.shape
    XT = np.ascontiguousarray(X.T)
    a = np.asarray(ridge, dtype=float)
    c = np.zeros(d + 1) if linear is None else np.asarray(linear, dtype=float)
    theta = np.zeros(d + 1) if theta0 is None else np.array(theta0, dtype=float)

    def objective(r: np.ndarray, th: np.ndarray) -> float:
        return float(value(r).mean() + 0.5 * a @ (th * th) + c @ th)

    def gradient(r: np.ndarray, th: np.ndarray) -> np.ndarray:
        psi = deriv(r)
        return np.concatenate(([psi.mean()], XT @ psi / n)) + a * th + c

    r = _residuals_t(XT, y, theta)
    f = objective(r, theta)
    g = gradient(r, theta)
    gnorm = float(np.linalg.norm(g))
    for _ in range(max_iter):
        if gnorm <= gtol:
            break
        # regularised Newton (Li, Fukushima & Qi 2004): H + ||g|| I keeps steps bounded where the
        # generalised Hessian is singular (empty quadratic zone) and vanishes at the solution
        H = _design_gram(XT, curv(r)) + np.diag(a)
        damp = min(gnorm, 1.0)
        while True:
            try:
                step = -linalg.cho_solve(linalg.cho_factor(H + damp * np.eye(d + 1)), g)
                break
            except linalg.LinAlgError:
                damp = max(10.0 * damp, 1e-12 * (1.0 + np.abs(np.diag(H)).max()))
        dr = step[1:] @ XT
        dr += step[0]
        slope = float(g @ step)
        t = 1.0
        while t > 1e-12:
            f_new = objective(r + t * dr, theta + t * step)
            if f_new <= f + 1e-4 * t * slope:
                break
            # below the float resolution of f, accept a step that shrinks the gradient
            if f_new <= f + 1e-13 * (1.0 + abs(f)):
                th = theta + t * step
                if np.linalg.norm(gradient(_residuals_t(XT, y, th), th)) < gnorm:
                    break
            t *= 0.5
        else:
            break
        theta = theta + t * step
        r = _residuals_t(XT, y, theta)  # fresh residuals: the returned gradient norm is exact
        f = objective(r, theta)
        g = gradient(r, theta)
        gnorm = float(np.linalg.norm(g))
    return theta, gnorm


def irls(
    X: np.ndarray,
    y: np.ndarray,
    *,
    e: float,
    ridge: np.ndarray,
    theta0: np.ndarray | None = None,
    tol: float = 1e-6,
    max_iter: int = 200,
) -> tuple[np.ndarray, int]:
    """Reweighted least squares: theta+ = argmin (1/(2n)) sum w_i r_i^2 + (1/2) sum a_j theta_j^2.

    w_i = 1/(e + |r_i(theta)|); closed form ((1/n) Z^T W Z + diag(a)) theta+ = (1/n) Z^T W y.
    Stops when max_j |theta+_j - theta_j| <= tol (paper's tau) or after max_iter steps;
    returns (theta, iterations).
    """
    n, d = X.shape
    XT = np.ascontiguousarray(X.T)
    a = np.asarray(ridge, dtype=float)
    theta = np.zeros(d + 1) if theta0 is None else np.array(theta0, dtype=float)
    it = 0
    while it < max_iter:
        it += 1
        w = np.abs(_residuals_t(XT, y, theta))
        w += e
        np.reciprocal(w, out=w)
        wy = w * y
        rhs = np.concatenate(([wy.sum()], XT @ wy)) / n
        new = linalg.solve(_design_gram(XT, w) + np.diag(a), rhs, assume_a="pos")
        done = np.max(np.abs(new - theta)) <= tol
        theta = new
        if done:
            break
    return theta, it


def lp_lad(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Exact argmin (1/n) sum |mu + x_i^T beta - y_i| as an LP solved by HiGHS.

    Variables (theta, t+, t-): min 1^T (t+ + t-) s.t. Z theta + t+ - t- = y, t+- >= 0.
    """
    n, d = X.shape
    Z = sparse.hstack([sparse.csr_matrix(np.ones((n, 1))), sparse.csr_matrix(X)])
    eye = sparse.identity(n, format="csr")
    A = sparse.hstack([Z, eye, -eye], format="csr")
    cost = np.concatenate((np.zeros(d + 1), np.ones(2 * n)))
    bounds = [(None, None)] * (d + 1) + [(0, None)] * (2 * n)
    res = optimize.linprog(cost, A_eq=A, b_eq=y, bounds=bounds, method="highs")
    if res.status != 0:
        raise DpnetError(f"HiGHS failed on the LAD linear program: {res.message}")
    return res.x[: d + 1]


def kkt_certificate(
    X: np.ndarray, y: np.ndarray, lam: float, active: np.ndarray, sign_from: np.ndarray
) -> np.ndarray | None:
    """Solve the KKT system of (1/n) sum |r_i| + (lam/2)||beta||^2 on a guessed active set.

    Unknowns theta and u_A:  r_i(theta) = 0 (i in A),
    (1/n) (sum_{i not in A} s_i z_i + sum_{i in A} u_i z_i) + lam (0, beta) = 0,
    s = sign(sign_from).
    Returns theta if it is certified optimal (|u_i| <= 1 and s_i r_i(theta) >= 0 off A: the
    subgradient condition, sufficient by convexity), else None.
    """
    n, d = X.shape
    p, m = d + 1, active.size
    off = np.ones(n, dtype=bool)
    off[active] = False
    s = np.sign(sign_from[off])
    g = np.concatenate(([s.sum()], X[off].T @ s)) / n
    ZA = np.hstack([np.ones((m, 1)), X[active]])
    M = np.zeros((m + p, m + p))
    M[:m, :p] = ZA
    M[m:, :p] = lam * np.diag(np.r_[0.0, np.ones(d)])
    M[m:, p:] = ZA.T / n
    try:
        sol = linalg.solve(M, np.concatenate((y[active], -g)))
    except (linalg.LinAlgError, ValueError):
        return None
    theta, u = sol[:p], sol[p:]
    if not np.all(np.isfinite(sol)) or np.any(np.abs(u) > 1.0 + 1e-9):
        return None
    r_off = residuals(X[off], y[off], theta)
    if np.any(s * r_off < -1e-12 * (1.0 + np.abs(y).max())):
        return None
    return theta


def ridge_lad_exact(
    X: np.ndarray, y: np.ndarray, lam: float, *, theta0: np.ndarray | None = None
) -> np.ndarray:
    """Exact argmin (1/n) sum |r_i| + (lam/2)||beta||^2 by finite smoothing + KKT certificate.

    Minimise the Huber-smoothed objective for gamma = 0.1, 0.01, ... (warm starts); for small
    enough gamma the zone {|r_i| <= gamma} is the active set of the exact solution
    (Madsen & Nielsen 1993), which :func:`kkt_certificate` then solves for and certifies.
    """
    d = X.shape[1]
    ridge = lam * np.r_[0.0, np.ones(d)]
    theta = theta0
    gamma = 0.1
    while gamma > 1e-13:
        theta, _ = newton_minimise(X, y, huber_loss(gamma), ridge=ridge, theta0=theta, gtol=1e-13)
        r = residuals(X, y, theta)
        active = np.flatnonzero(np.abs(r) <= gamma * (1.0 + 1e-9))
        if active.size <= d + 1:
            exact = kkt_certificate(X, y, lam, active, r)
            if exact is not None:
                return exact
        gamma *= 0.1
    raise DpnetError("finite smoothing found no certified exact LAD solution")


def exact_lad(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """The exact non-private fit: HiGHS LP for lam = 0, certified finite smoothing for lam > 0."""
    return lp_lad(X, y) if lam == 0 else ridge_lad_exact(X, y, lam)


def lad_descent_direction(
    Xb: np.ndarray, rb: np.ndarray, beta: np.ndarray, lam: float
) -> np.ndarray:
    """Coordinatewise steepest descent direction of (1/m) sum |r_i| + (lam/2)||beta||^2 in beta.

    Forward / backward directional derivatives along +-e_k (paper eqs. 8-9, sign of the ridge
    corrected): d+_k = g_k + a_k, d-_k = -g_k + a_k with g = (1/m) sum_{r_i != 0} sign(r_i) x_i
    + lam beta and a = (1/m) sum_{r_i = 0} |x_i|. Move along whichever is negative:
    u = -soft_threshold(g, a) (0 when both are >= 0).
    """
    m = rb.shape[0]
    g = Xb.T @ np.sign(rb) / m + lam * beta
    a = np.abs(Xb[rb == 0]).sum(axis=0) / m
    return -soft_threshold(g, a)
