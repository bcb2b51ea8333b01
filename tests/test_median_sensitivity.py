"""Sensitivity and Jacobian bounds of the DP median algorithms on adversarial neighbours."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from devtools.audit import max_sensitivity, replace_one_pairs
from dpnet.baselines.median.algorithms import CERT_SLACK, irls_fit
from dpnet.baselines.median.numerics import lad_descent_direction
from dpnet.baselines.median.privacy import (
    calibrate_objective_perturbation,
    coordinate_beta_l1_sensitivity,
    coordinate_mu_sensitivity,
    design_norm_bound,
    irls_l2_sensitivity,
    jacobian_log_bound,
    split_epsilon,
)
from dpnet.losses import huber_curvature, huber_derivative

X_BOUND = 1.0


def _extreme_records(d: int, y_values: tuple[float, ...]) -> list[tuple[np.ndarray, float]]:
    """Candidate rows on the sphere ||x|| = X (axes, diagonals) with extreme responses."""
    dirs = [s * np.eye(d)[k] for k in range(d) for s in (1.0, -1.0)]
    dirs += [np.array(v) / math.sqrt(d) for v in itertools.product((1.0, -1.0), repeat=d)]
    return [(X_BOUND * u, yv) for u in dirs for yv in y_values]


def _max_over_neighbours(statistic, X, y, candidates, norm) -> float:
    """devtools.audit.max_sensitivity over D, D' whose last row is replaced by candidates."""
    pairs = replace_one_pairs(X, y, candidates, indices=[X.shape[0] - 1])
    return max_sensitivity(lambda data: statistic(*data), pairs, norm)


def _small_data(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d)) / math.sqrt(d)
    return X, X.sum(axis=1) + rng.laplace(0, 1, n)


def test_objective_perturbation_noise_sensitivity_is_2G_and_tight():
    """b(theta; D) = -sum rho'(r_i) z_i - n M theta: one replaced row moves it by <= 2G."""
    X, y = _small_data(30, 2, 0)
    theta = np.array([0.3, 0.5, -0.2])
    gamma, M = 0.05, np.diag([0.1, 0.01, 0.01])

    def b_of(Xd, yd):
        psi = huber_derivative(theta[0] + Xd @ theta[1:] - yd, gamma)
        return -np.r_[psi.sum(), Xd.T @ psi] - len(yd) * M @ theta

    worst = _max_over_neighbours(b_of, X, y, _extreme_records(2, (-50.0, 50.0, 0.3)), 2)
    bound = calibrate_objective_perturbation(
        30, 1.0, gamma=gamma, lam=0.01, intercept_ridge=0.1, x_bound=X_BOUND
    ).sensitivity
    assert bound == pytest.approx(2 * design_norm_bound(X_BOUND))
    assert worst <= bound * (1 + 1e-12)
    assert worst >= 0.999 * bound  # attained: same x, residuals on opposite sides


def test_jacobian_ratio_bound_holds_and_is_attained():
    """log det J_D - log det J_D' <= jacobian_log_bound, J = sum rho''(r_i) z_i z_i^T + n M."""
    n, d, gamma, lam, a_mu, extra = 40, 2, 0.05, 0.01, 0.1, 0.003
    X, y = _small_data(n, d, 1)
    theta = np.array([0.0, 0.2, 0.1])
    y = y + 100.0 * np.sign(np.random.default_rng(2).standard_normal(n))  # others out of zone
    M = np.diag([a_mu + extra] + [lam + extra] * d)

    def logdet(Xd, yd):
        h = huber_curvature(theta[0] + Xd @ theta[1:] - yd, gamma)
        Z = np.hstack([np.ones((n, 1)), Xd])
        return np.linalg.slogdet(Z.T @ (h[:, None] * Z) + n * M)[1]

    worst = -np.inf
    for x_new, _ in _extreme_records(d, (0.0,)):
        in_zone = theta[0] + x_new @ theta[1:]  # residual 0: curvature 1/gamma
        for y_new, y_alt in ((in_zone, in_zone + 10.0), (in_zone + 10.0, in_zone)):
            Xa, ya, Xb, yb = X.copy(), y.copy(), X.copy(), y.copy()
            Xa[-1], ya[-1], Xb[-1], yb[-1] = x_new, y_new, x_new, y_alt
            worst = max(worst, logdet(Xa, ya) - logdet(Xb, yb))
    bound = jacobian_log_bound(
        n, gamma=gamma, lam=lam, intercept_ridge=a_mu, x_bound=X_BOUND, extra=extra
    )
    assert worst <= bound + 1e-12
    assert worst >= 0.999 * bound
    c, big_lambda = design_norm_bound(X_BOUND) ** 2 / gamma, min(a_mu, lam) + extra
    cms = math.log(1 + 2 * c / (n * big_lambda) + (c / (n * big_lambda)) ** 2)
    assert bound <= cms  # tighter than Chaudhuri-Monteleoni-Sarwate's (1 + c/(n Lambda))^2


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
def test_objective_perturbation_budget_adds_up(epsilon):
    for n in (500, 5000, 5_000_000):
        cal = calibrate_objective_perturbation(
            n, epsilon, gamma=0.05, lam=0.002, intercept_ridge=1 / math.sqrt(n), x_bound=1.0
        )
        assert cal.noise_epsilon + cal.jacobian_log == pytest.approx(epsilon, rel=1e-12)
        assert cal.noise_epsilon >= epsilon / 2 * (1 - 1e-12)
        if cal.extra_ridge > 0:
            assert cal.jacobian_log == pytest.approx(epsilon / 2, rel=1e-9)
            assert cal.jacobian_log <= epsilon / 2


def test_irls_minimiser_sensitivity_on_adversarial_neighbours():
    n, d, lam, a_mu, e = 40, 2, 0.05, 0.05, 0.05
    X, y = _small_data(n, d, 4)
    y = 1e3 * np.sign(y)  # far residuals: tiny data curvature, the ridge alone holds theta

    def fit(Xd, yd):
        return irls_fit(Xd, yd, lam=lam, e=e, x_bound=X_BOUND, intercept_ridge=a_mu)[0]

    worst = _max_over_neighbours(fit, X, y, _extreme_records(d, (-1e4, 1e4)), 2)
    bound = irls_l2_sensitivity(n, lam=lam, intercept_ridge=a_mu, x_bound=X_BOUND)
    assert worst <= bound * (1 + 2 * CERT_SLACK)
    assert worst >= 0.95 * bound  # nearly attained


def test_coordinate_step_sensitivities():
    """One batch's update eta u (L1) and mu = mean(y - X beta) (|.|) on adversarial rows."""
    m, d, eta, lam = 30, 3, 0.7, 0.01
    X, y = _small_data(m, d, 5)
    beta_bound, y_bound = 2.0, 3.0
    y = np.clip(y, -y_bound, y_bound)
    beta = np.array([1.0, -1.0, 1.0]) * beta_bound / math.sqrt(3)  # on the sphere ||beta|| = v
    mu = 0.2

    def update(Xd, yd):
        return eta * lad_descent_direction(Xd, mu + Xd @ beta - yd, beta, lam)

    def mu_stat(Xd, yd):
        return np.array([np.mean(yd - Xd @ beta)])

    cands = _extreme_records(d, (-y_bound, y_bound))
    cands.append((X_BOUND * beta / beta_bound, mu + X_BOUND * beta_bound))  # residual exactly 0
    worst_u = _max_over_neighbours(update, X, y, cands, 1)
    bound_u = coordinate_beta_l1_sensitivity(eta, m, d=d, x_bound=X_BOUND)
    assert worst_u <= bound_u * (1 + 1e-12)
    assert worst_u >= 0.999 * bound_u  # attained on a diagonal row
    worst_mu = _max_over_neighbours(mu_stat, X, y, cands, 1)
    bound_mu = coordinate_mu_sensitivity(m, x_bound=X_BOUND, y_bound=y_bound, beta_bound=beta_bound)
    assert worst_mu <= bound_mu * (1 + 1e-12)
    assert worst_mu >= 0.999 * bound_mu


def test_a_split_budget_composes_to_at_most_epsilon() -> None:
    """split_epsilon's two parts sum to at most epsilon in floating point, and as close to
    it as floats allow, over a grid of budgets and scales (a plain epsilon - eps_beta rounds
    one unit in the last place above epsilon on some of them)."""
    rng = np.random.default_rng(3)
    over = 0
    for epsilon in rng.uniform(0.01, 10.0, 300):
        s_beta, s_mu = rng.uniform(1e-4, 10.0, 2)
        eps_beta, eps_mu = split_epsilon(float(epsilon), s_beta, s_mu, 3)
        assert eps_beta + eps_mu <= epsilon
        assert eps_beta + eps_mu == pytest.approx(epsilon, rel=4e-16)
        over += eps_beta + (epsilon - eps_beta) > epsilon
    assert over > 0  # the grid has cases the plain subtraction gets wrong
