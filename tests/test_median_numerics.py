"""Non-private median-regression numerics against independent solvers of record."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from dpnet.baselines.median import simulate_median_data
from dpnet.baselines.median.algorithms import irls_fit
from dpnet.baselines.median.numerics import (
    huber_loss,
    lad_descent_direction,
    lp_lad,
    newton_minimise,
    residuals,
    ridge_lad_exact,
)


@pytest.fixture(scope="module")
def data():
    return simulate_median_data(600, rng=np.random.default_rng(3))


def test_lp_agrees_with_quantreg_and_quantile_regressor(data):
    sm = pytest.importorskip("statsmodels.api")
    from sklearn.linear_model import QuantileRegressor

    X, y = data
    theta = lp_lad(X, y)
    qr = sm.QuantReg(y, sm.add_constant(X)).fit(q=0.5, max_iter=10_000, p_tol=1e-12).params
    skl = QuantileRegressor(quantile=0.5, alpha=0.0, solver="highs").fit(X, y)
    np.testing.assert_allclose(theta, np.r_[skl.intercept_, skl.coef_], atol=1e-8)
    np.testing.assert_allclose(theta, qr, atol=1e-5)


def test_certified_finite_smoothing_equals_lp_without_ridge(data):
    X, y = data
    np.testing.assert_allclose(ridge_lad_exact(X, y, 0.0), lp_lad(X, y), atol=1e-10)


def test_ridge_lad_exact_matches_qp_reference():
    """lam > 0: compare with SLSQP on the QP  min (1/n) 1^T t + (lam/2)||beta||^2, -t <= r <= t."""
    X, y = simulate_median_data(50, rng=np.random.default_rng(7))
    n, d = X.shape
    lam = 0.05
    Z = np.hstack([np.ones((n, 1)), X])

    def fun(v):
        return v[d + 1 :].sum() / n + 0.5 * lam * v[1 : d + 1] @ v[1 : d + 1]

    def jac(v):
        return np.r_[0.0, lam * v[1 : d + 1], np.full(n, 1.0 / n)]

    A = np.block([[Z, np.eye(n)], [-Z, np.eye(n)]])  # t - r >= 0 and t + r >= 0
    cons = {"type": "ineq", "fun": lambda v: A @ v - np.r_[y, -y], "jac": lambda v: A}
    v0 = np.r_[np.zeros(d + 1), np.abs(y) + 1.0]
    ref = optimize.minimize(
        fun,
        v0,
        jac=jac,
        constraints=[cons],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    assert ref.success
    exact = ridge_lad_exact(X, y, lam)
    np.testing.assert_allclose(exact, ref.x[: d + 1], atol=1e-6)

    def obj(th):
        return np.abs(residuals(X, y, th)).mean() + 0.5 * lam * th[1:] @ th[1:]

    assert obj(exact) <= obj(ref.x[: d + 1]) + 1e-12


def _scipy_minimise(X, y, value, deriv, ridge, linear):
    n = X.shape[0]

    def f(th):
        r = residuals(X, y, th)
        return value(r).mean() + 0.5 * ridge @ (th * th) + linear @ th

    def g(th):
        psi = deriv(residuals(X, y, th))
        return np.r_[psi.mean(), X.T @ psi / n] + ridge * th + linear

    res = optimize.minimize(
        f,
        np.zeros(X.shape[1] + 1),
        jac=g,
        method="L-BFGS-B",
        options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 10_000},
    )
    return res.x


def test_noise_free_objective_perturbation_is_smoothed_minimiser(data):
    X, y = data
    gamma, ridge = 0.05, np.r_[0.04, 0.002, 0.002, 0.002]
    linear = np.array([0.01, -0.02, 0.005, 0.03])
    value, deriv, _ = huber_loss(gamma)
    theta, gnorm = newton_minimise(X, y, huber_loss(gamma), ridge=ridge, linear=linear)
    assert gnorm < 1e-10
    ref = _scipy_minimise(X, y, value, deriv, ridge, linear)
    np.testing.assert_allclose(theta, ref, atol=1e-6)


def test_irls_fixed_point_minimises_log_smoothed_objective(data):
    from dpnet.losses import log_smoothed_abs, log_smoothed_abs_derivative

    X, y = data
    e, lam, a_mu = 0.05, 0.002, 0.04
    theta, iters = irls_fit(X, y, lam=lam, e=e, x_bound=1.0, intercept_ridge=a_mu)
    assert 1 <= iters <= 200
    ref = _scipy_minimise(
        X,
        y,
        lambda r: log_smoothed_abs(r, e),
        lambda r: log_smoothed_abs_derivative(r, e),
        np.r_[a_mu, np.full(3, lam)],
        np.zeros(4),
    )
    np.testing.assert_allclose(theta, ref, atol=1e-6)


def test_descent_direction_matches_numerical_directional_derivatives():
    rng = np.random.default_rng(0)
    X, y = simulate_median_data(40, rng=rng)
    beta, mu, lam = np.array([1.0, -0.5, 0.3]), 0.7, 0.1
    y[:2] = mu + X[:2] @ beta  # two exact zeros: the |x_ik| terms of eqs. (8)-(9)

    def loss(b):
        return np.abs(mu + X @ b - y).mean() + 0.5 * lam * b @ b

    u = lad_descent_direction(X, residuals(X, y, np.r_[mu, beta]), beta, lam)
    h = 1e-7
    for k in range(3):
        ek = np.eye(3)[k]
        fwd = (loss(beta + h * ek) - loss(beta)) / h
        bwd = (loss(beta - h * ek) - loss(beta)) / h
        expected = -fwd if fwd < 0 else (bwd if bwd < 0 else 0.0)
        assert u[k] == pytest.approx(expected, abs=1e-5)


def test_warm_started_fits_are_the_minimisers_on_all_rows():
    """n = 40,000: Alg. 1's Newton and Alg. 2's IRLS loop first run on every 4th row
    (WARM_START_ROWS); the results must still be the minimisers on all rows (L-BFGS)."""
    import math

    from dpnet.baselines.median.algorithms import WARM_START_ROWS, dp_objective_perturbation
    from dpnet.baselines.median.privacy import calibrate_objective_perturbation
    from dpnet.losses import log_smoothed_abs, log_smoothed_abs_derivative
    from dpnet.privacy import objective_perturbation_noise

    X, y = simulate_median_data(40_000, rng=np.random.default_rng(11))
    n, d = X.shape
    assert n // WARM_START_ROWS >= 2  # the warm-start path is taken
    lam, a_mu = 0.002, 1.0 / math.sqrt(n)
    e = gamma = 0.05
    theta, _ = irls_fit(X, y, lam=lam, e=e, x_bound=1.0, intercept_ridge=a_mu)
    ref = _scipy_minimise(
        X,
        y,
        lambda r: log_smoothed_abs(r, e),
        lambda r: log_smoothed_abs_derivative(r, e),
        np.r_[a_mu, np.full(d, lam)],
        np.zeros(d + 1),
    )
    np.testing.assert_allclose(theta, ref, atol=1e-6)

    theta, _ = dp_objective_perturbation(
        X,
        y,
        epsilon=1.0,
        lam=lam,
        gamma=gamma,
        x_bound=1.0,
        intercept_ridge=a_mu,
        rng=np.random.default_rng(5),
    )
    cal = calibrate_objective_perturbation(
        n, 1.0, gamma=gamma, lam=lam, intercept_ridge=a_mu, x_bound=1.0
    )
    b, _ = objective_perturbation_noise(
        d + 1,
        epsilon=cal.noise_epsilon,
        sensitivity=cal.sensitivity,
        rng=np.random.default_rng(5),
        jacobian_log_bound=cal.jacobian_log,
    )  # the same draw as inside dp_objective_perturbation
    value, deriv, _ = huber_loss(gamma)
    ridge = np.r_[a_mu, np.full(d, lam)] + cal.extra_ridge
    ref = _scipy_minimise(X, y, value, deriv, ridge, b / n)
    np.testing.assert_allclose(theta, ref, atol=1e-6)
