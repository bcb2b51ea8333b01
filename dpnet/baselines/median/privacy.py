"""Privacy calibration of the three DP median-regression algorithms (proofs:
docs/privacy-median-regression.md).

Relation: replace-one record (bounded DP; n is public). Every row obeys ||x_i||_2 <= X (rows
clipped to the user's x_bound) and, where used, |y_i| <= B (clipped to y_bound). The design
row of the intercept model is z_i = (1, x_i), ||z_i||_2 <= G = sqrt(1 + X^2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import optimize


def design_norm_bound(x_bound: float) -> float:
    """G = sqrt(1 + X^2) >= ||(1, x)||_2."""
    return math.sqrt(1.0 + x_bound * x_bound)


@dataclass(frozen=True)
class ObjectivePerturbation:
    """Calibration of Algorithm 1 (objective perturbation of the Huber-smoothed loss).

    noise_epsilon: the b-density exp(-noise_epsilon ||b|| / sensitivity); extra_ridge: Delta added
    to every coordinate's ridge; jacobian_log: the log Jacobian-ratio bound; the release is
    (noise_epsilon + jacobian_log)-DP.
    """

    noise_epsilon: float
    extra_ridge: float
    jacobian_log: float
    sensitivity: float


def jacobian_log_bound(
    n: int, *, gamma: float, lam: float, intercept_ridge: float, x_bound: float, extra: float
) -> float:
    """log(1 + (1/(gamma n)) (1/(a_mu + Delta) + X^2/(lam + Delta))).

    One record's Hessian term is rho''(r) z z^T with rho'' <= 1/gamma; by the matrix determinant
    lemma the ratio of the two Jacobian determinants is at most 1 + (1/gamma) z^T M^-1 z with
    M >= n diag(a_mu + Delta, (lam + Delta) I).
    """
    quad = 1.0 / (intercept_ridge + extra) + x_bound**2 / (lam + extra)
    return math.log1p(quad / (gamma * n))


def calibrate_objective_perturbation(
    n: int,
    epsilon: float,
    *,
    gamma: float,
    lam: float,
    intercept_ridge: float,
    x_bound: float,
) -> ObjectivePerturbation:
    """Split epsilon between the noise and the Jacobian (Chaudhuri, Monteleoni & Sarwate 2011,
    Alg. 2, with the tighter rank-one Jacobian bound).

    If the Jacobian term without extra ridge is <= epsilon/2, Delta = 0 and the noise gets the
    rest; otherwise Delta > 0 solves jacobian_log(Delta) = epsilon/2 and the noise gets epsilon/2.
    Noise sensitivity: the stationarity condition gives b = -sum_i rho'(r_i) z_i - n M theta, and
    replacing one record moves b by at most 2G (|rho'| <= 1).
    """
    kw = {"gamma": gamma, "lam": lam, "intercept_ridge": intercept_ridge, "x_bound": x_bound}
    jac0 = jacobian_log_bound(n, extra=0.0, **kw)
    if jac0 <= epsilon / 2:
        extra, jac = 0.0, jac0
    else:
        hi = 1.0
        while jacobian_log_bound(n, extra=hi, **kw) > epsilon / 2:
            hi *= 10.0
        extra = optimize.brentq(
            lambda t: jacobian_log_bound(n, extra=t, **kw) - epsilon / 2, 0.0, hi, xtol=1e-15
        )
        # brentq's root may sit on either side: nudge up until the bound holds
        while jacobian_log_bound(n, extra=extra, **kw) > epsilon / 2:
            extra *= 1.0 + 1e-12
        jac = jacobian_log_bound(n, extra=extra, **kw)
    return ObjectivePerturbation(
        noise_epsilon=rest_of_budget(epsilon, jac),
        extra_ridge=extra,
        jacobian_log=jac,
        sensitivity=2.0 * design_norm_bound(x_bound),
    )


def irls_l2_sensitivity(n: int, *, lam: float, intercept_ridge: float, x_bound: float) -> float:
    """L2 sensitivity of argmin (1/n) sum phi_e(r_i) + (1/2)(a_mu mu^2 + lam ||beta||^2).

    |phi_e'| < 1, so one record changes the gradient by at most 2G/n; the objective is
    min(a_mu, lam)-strongly convex: ||theta(D) - theta(D')|| <= 2G / (n min(a_mu, lam))
    (Chaudhuri, Monteleoni & Sarwate 2011, Cor. 8). Needs neither |y| <= B nor ||beta|| <= v.
    """
    return 2.0 * design_norm_bound(x_bound) / (n * min(intercept_ridge, lam))


def coordinate_beta_l1_sensitivity(
    step: float, batch_size: int, *, d: int, x_bound: float
) -> float:
    """L1 sensitivity of one batch's coordinate update eta * u (u from lad_descent_direction).

    u_k = -soft_threshold(g_k, a_k) is 1-Lipschitz in (g_k, a_k) jointly (l1), and one record moves
    (g_k, a_k) by at most (|x_k| + |x'_k|)/m in l1: ||eta (u - u')||_1 <= eta (||x||_1 + ||x'||_1)/m
    <= 2 eta sqrt(d) X / m. The paper's per-coordinate noise at 2 eta/m composes to d epsilon.
    """
    return 2.0 * step * math.sqrt(d) * x_bound / batch_size


def coordinate_mu_sensitivity(
    batch_size: int, *, x_bound: float, y_bound: float, beta_bound: float
) -> float:
    """Sensitivity of mu = (1/m) sum (y_i - x_i^T beta) with |y| <= B, ||beta|| <= v (projected).

    |y_i - x_i^T beta| <= B + X v, so replacing one record moves the mean by <= 2(B + X v)/m.
    """
    return 2.0 * (y_bound + x_bound * beta_bound) / batch_size


def split_epsilon(
    epsilon: float, beta_scale: float, mu_scale: float, d: int
) -> tuple[float, float]:
    """Split epsilon = eps_beta + eps_mu to minimise total Laplace variance.

    Variance 2 d (s_b/eps_b)^2 + 2 (s_m/eps_m)^2 is minimised at eps_i proportional to
    (c_i)^(1/3), c_b = d s_b^2, c_m = s_m^2.
    """
    wb = (d * beta_scale**2) ** (1.0 / 3.0)
    wm = (mu_scale**2) ** (1.0 / 3.0)
    eps_beta = epsilon * wb / (wb + wm)
    return eps_beta, rest_of_budget(epsilon, eps_beta)


def rest_of_budget(total: float, spent: float) -> float:
    """The largest float r <= total - spent with spent + r <= total: a rounded-to-nearest
    subtraction can give one unit in the last place more (when spent < total / 2), and two
    releases' epsilons must compose to at most ``total``."""
    rest = total - spent
    while spent + rest > total:
        rest = math.nextafter(rest, 0.0)
    return rest
