"""The three DP median-regression algorithms of Chen, Miao & Tang (2020), corrected.

Each takes clipped data (||x_i|| <= x_bound, |y_i| <= y_bound where used), a Generator and
returns (theta = (mu, beta), releases), a release being (event, label, guarantee) for the
ledger. Derivations: docs/privacy-median-regression.md and docs/algorithms-median.md.
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting import dp_event

from dpnet.baselines.median.numerics import (
    huber_loss,
    irls,
    lad_descent_direction,
    log_abs_loss,
    newton_minimise,
)
from dpnet.baselines.median.privacy import (
    calibrate_objective_perturbation,
    coordinate_beta_l1_sensitivity,
    coordinate_mu_sensitivity,
    irls_l2_sensitivity,
    split_epsilon,
)
from dpnet.errors import DpnetError
from dpnet.privacy.events import PureDpEvent
from dpnet.privacy.mechanisms import laplace_mechanism, objective_perturbation_noise

Release = tuple[dp_event.DpEvent, str, str]

# IRLS release: the certified iterate is within CERT_SLACK * Delta_2 of the exact minimiser
CERT_SLACK = 1e-3
# Warm starts: Alg. 1's Newton and Alg. 2's IRLS loop first run on every (n // WARM_START_ROWS)-th
# row (a data-independent subsample; all rows when n < 2 WARM_START_ROWS); Newton on all rows then
# needs ~3 passes instead of ~12 (Alg. 1) or ~40 IRLS passes (Alg. 2). Only speed depends on it:
# what is released is the minimiser on all rows, certified by its gradient norm.
WARM_START_ROWS = 10_000


def _warm_start_stride(n: int) -> int:
    return max(1, n // WARM_START_ROWS)


def _ridge(d: int, lam: float, intercept_ridge: float) -> np.ndarray:
    return np.r_[intercept_ridge, np.full(d, lam)]


def dp_objective_perturbation(
    X: np.ndarray,
    y: np.ndarray,
    *,
    epsilon: float,
    lam: float,
    gamma: float,
    x_bound: float,
    intercept_ridge: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, list[Release]]:
    """Algorithm 1: argmin (1/n) sum rho_gamma(r_i) + theta^T (A + Delta I) theta/2 + b^T theta/n.

    A = diag(a_mu, lam I); b has density exp(-eps_b ||b|| / 2G); Delta and eps_b from
    :func:`calibrate_objective_perturbation`. Guarantee: epsilon-DP for the exact minimiser.
    """
    n, d = X.shape
    cal = calibrate_objective_perturbation(
        n, epsilon, gamma=gamma, lam=lam, intercept_ridge=intercept_ridge, x_bound=x_bound
    )
    b, event = objective_perturbation_noise(
        d + 1,
        epsilon=cal.noise_epsilon,
        sensitivity=cal.sensitivity,
        rng=rng,
        jacobian_log_bound=cal.jacobian_log,
    )
    ridge = _ridge(d, lam, intercept_ridge) + cal.extra_ridge
    k = _warm_start_stride(n)
    theta0 = None
    if k > 1:  # the same objective on every k-th row: a start only
        theta0, _ = newton_minimise(X[::k], y[::k], huber_loss(gamma), ridge=ridge, linear=b / n)
    theta, gnorm = newton_minimise(
        X, y, huber_loss(gamma), ridge=ridge, linear=b / n, theta0=theta0
    )
    if gnorm > 1e-8:
        # the message names the tolerance only: the gradient norm is a function of the raw data
        raise DpnetError("objective perturbation: Newton did not reach gradient norm 1e-8")
    guarantee = (
        f"{epsilon:g}-DP (objective perturbation, CMS 2011 Thm 9 with rank-one Jacobian bound): "
        f"noise eps {cal.noise_epsilon:.4g} + log-Jacobian {cal.jacobian_log:.4g}, "
        f"extra ridge {cal.extra_ridge:.3g}; assumes the exact minimiser is released"
    )
    return theta, [(event, "median objective perturbation (Alg. 1)", guarantee)]


def irls_fit(
    X: np.ndarray,
    y: np.ndarray,
    *,
    lam: float,
    e: float,
    x_bound: float,
    intercept_ridge: float,
    tol: float = 1e-6,
    max_iter: int = 200,
) -> tuple[np.ndarray, int]:
    """Non-private part of Algorithm 2: the certified minimiser of the IRLS objective.

    J_e(theta) = (1/n) sum phi_e(r_i) + (1/2)(a_mu mu^2 + lam ||beta||^2). IRLS (paper's
    loop, tolerance tau) on every (n // WARM_START_ROWS)-th row (all rows for small n), then
    Newton on all rows until ||grad J_e|| <= Lambda * CERT_SLACK * Delta_2, which puts the
    iterate within CERT_SLACK * Delta_2 of the exact minimiser on all rows (strong convexity),
    however it was reached. IRLS converges linearly (~40 passes over the rows at tau = 1e-6),
    Newton quadratically from the subsample's fixed point (~3 passes).
    Returns (theta, IRLS iterations).
    """
    n, d = X.shape
    ridge = _ridge(d, lam, intercept_ridge)
    k = _warm_start_stride(n)
    theta, iters = irls(X[::k], y[::k], e=e, ridge=ridge, tol=tol, max_iter=max_iter)
    delta2 = irls_l2_sensitivity(
        X.shape[0], lam=lam, intercept_ridge=intercept_ridge, x_bound=x_bound
    )
    gtol = min(lam, intercept_ridge) * CERT_SLACK * delta2
    theta, gnorm = newton_minimise(
        X, y, log_abs_loss(e), ridge=ridge, theta0=theta, gtol=min(gtol, 1e-10)
    )
    if gnorm > gtol:
        raise DpnetError(f"IRLS: minimiser not certified (gradient {gnorm:.3g} > {gtol:.3g})")
    return theta, iters


def dp_irls(
    X: np.ndarray,
    y: np.ndarray,
    *,
    epsilon: float,
    lam: float,
    e: float,
    x_bound: float,
    intercept_ridge: float,
    rng: np.random.Generator,
    tol: float = 1e-6,
    max_iter: int = 200,
) -> tuple[np.ndarray, list[Release]]:
    """Algorithm 2: :func:`irls_fit` + Laplace noise per coordinate, L1 sensitivity
    sqrt(d+1) (1 + 2 CERT_SLACK) Delta_2. Guarantee: epsilon-DP, no convergence assumption."""
    n, d = X.shape
    theta, _ = irls_fit(
        X,
        y,
        lam=lam,
        e=e,
        x_bound=x_bound,
        intercept_ridge=intercept_ridge,
        tol=tol,
        max_iter=max_iter,
    )
    delta2 = irls_l2_sensitivity(n, lam=lam, intercept_ridge=intercept_ridge, x_bound=x_bound)
    l1 = math.sqrt(d + 1) * (1.0 + 2.0 * CERT_SLACK) * delta2
    out, event = laplace_mechanism(theta, l1_sensitivity=l1, epsilon=epsilon, rng=rng)
    guarantee = (
        f"{epsilon:g}-DP (output perturbation of the certified minimiser of the phi_e objective, "
        f"L2 sensitivity {delta2:.4g}, Laplace L1 sensitivity {l1:.4g})"
    )
    return np.asarray(out), [(event, "median IRLS output perturbation (Alg. 2)", guarantee)]


def private_start_share(
    n: int,
    d: int,
    *,
    lam: float,
    intercept_ridge: float,
    x_bound: float,
    y_bound: float,
    beta_bound: float,
    n_splits: int,
    step: float,
) -> float:
    """Share of epsilon for Algorithm 3's private start (Algorithm 2) that minimises the total
    Laplace variance of the released theta (the rest goes to the descent).

    Start: d + 1 coordinates of Laplace(l1_0 / eps_0), l1_0 as in :func:`dp_irls` (with its
    ridges lam, intercept_ridge), variance c_0 / eps_0^2, c_0 = 2 (d + 1) l1_0^2. Descent (its
    epsilon eps_1 split in each step by :func:`split_epsilon`): beta_N carries the sum of the
    steps' noises, sum_t 2 d (s_beta,t / eps_beta,t)^2, the released intercept
    sum_t (m_t/n) mu_t carries sum_t (m_t/n)^2 2 (s_mu,t / eps_mu,t)^2; together c_1 / eps_1^2.
    c_0 / eps_0^2 + c_1 / eps_1^2 with eps_0 + eps_1 = epsilon is least at
    eps_0 / epsilon = c_0^(1/3) / (c_0^(1/3) + c_1^(1/3)), which does not depend on epsilon.
    Only public quantities (n, d, the bounds and parameters) enter: the split is fixed before
    the data are read, as sequential composition needs.
    """
    l1_0 = (
        math.sqrt(d + 1)
        * (1.0 + 2.0 * CERT_SLACK)
        * irls_l2_sensitivity(n, lam=lam, intercept_ridge=intercept_ridge, x_bound=x_bound)
    )
    c0 = 2.0 * (d + 1) * l1_0**2
    c1 = 0.0
    q, r = divmod(n, n_splits)
    for t in range(n_splits):  # batch sizes of np.array_split: r of q + 1, then q
        m = q + 1 if t < r else q
        s_beta = coordinate_beta_l1_sensitivity(step / (t + 1), m, d=d, x_bound=x_bound)
        s_mu = coordinate_mu_sensitivity(m, x_bound=x_bound, y_bound=y_bound, beta_bound=beta_bound)
        p_beta, p_mu = split_epsilon(1.0, s_beta, s_mu, d)
        c1 += 2.0 * d * (s_beta / p_beta) ** 2 + 2.0 * (m / n) ** 2 * (s_mu / p_mu) ** 2
    w0, w1 = c0 ** (1.0 / 3.0), c1 ** (1.0 / 3.0)
    return w0 / (w0 + w1)


def _project_ball(beta: np.ndarray, radius: float) -> np.ndarray:
    norm = float(np.linalg.norm(beta))
    return beta if norm <= radius else beta * (radius / norm)


def dp_coordinate_descent(
    X: np.ndarray,
    y: np.ndarray,
    *,
    epsilon: float,
    lam: float,
    n_splits: int,
    step: float,
    x_bound: float,
    y_bound: float,
    beta_bound: float,
    theta0: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, list[Release]]:
    """Algorithm 3: one noisy coordinate-descent step per disjoint batch (random split).

    Step t on batch S_t (size m_t), eta_t = step/(t+1): beta <- P_v(beta + eta_t u + Lap),
    u = :func:`lad_descent_direction`; mu_t <- mean_{S_t}(y - X beta) + Lap. theta0 must be
    public (data-independent) or already paid for. Each record is read in one step only, the
    split is data-independent: parallel composition, epsilon-DP overall. Returns
    (sum_t (m_t/n) mu_t, beta_N): the intercept averages the released mu_t (post-processing).
    """
    n, d = X.shape
    batches = np.array_split(rng.permutation(n), n_splits)
    mu, beta = float(theta0[0]), _project_ball(np.array(theta0[1:], dtype=float), beta_bound)
    mu_sum = 0.0  # sum_t m_t mu_t: the released intercept is its mean over the rows
    for t, idx in enumerate(batches):
        Xb, yb = X.take(idx, axis=0), y.take(idx)  # take: half the time of X[idx]
        eta = step / (t + 1)
        u = lad_descent_direction(Xb, mu + Xb @ beta - yb, beta, lam)
        s_beta = coordinate_beta_l1_sensitivity(eta, idx.size, d=d, x_bound=x_bound)
        s_mu = coordinate_mu_sensitivity(
            idx.size, x_bound=x_bound, y_bound=y_bound, beta_bound=beta_bound
        )
        eps_beta, eps_mu = split_epsilon(epsilon, s_beta, s_mu, d)
        noisy, _ = laplace_mechanism(
            beta + eta * u, l1_sensitivity=s_beta, epsilon=eps_beta, rng=rng
        )
        beta = _project_ball(np.asarray(noisy), beta_bound)
        mu_val, _ = laplace_mechanism(
            float(np.mean(yb - Xb @ beta)), l1_sensitivity=s_mu, epsilon=eps_mu, rng=rng
        )
        mu = float(mu_val)
        mu_sum += idx.size * mu
    event = PureDpEvent(epsilon=epsilon, mechanism="coordinate_descent_disjoint_batches", dim=d + 1)
    guarantee = (
        f"{epsilon:g}-DP: per batch Laplace on the update (L1 sens. 2 eta sqrt(d) X/m) and on mu "
        f"(sens. 2(B + X v)/m) compose to {epsilon:g}; {n_splits} disjoint batches of a "
        "data-independent split compose in parallel"
    )
    # post-processing of the released mu_t: sum_t (m_t/n) mu_t is the mean residual over all n
    # rows (up to the drift of beta_t), where the last mu_t alone reads n/N rows
    return np.r_[mu_sum / n, beta], [(event, "median coordinate descent (Alg. 3)", guarantee)]
