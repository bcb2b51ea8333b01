"""Monte Carlo audits (devtools.audit) of the three DP median algorithms on small problems.

Each honest algorithm must show no violation of its claimed epsilon; versions with half the
noise (run at 2 epsilon while claiming epsilon) are caught for Alg. 2 and 3, whose bounds are
attained by the chosen neighbours. Alg. 1's bound (a worst case over the Jacobian and the noise
at once) is not attained by any fixed pair, so only the no-violation check is feasible.
"""

from __future__ import annotations

import numpy as np
import pytest

from devtools.audit import audit_epsilon
from dpnet.baselines.median.algorithms import (
    CERT_SLACK,
    dp_coordinate_descent,
    dp_objective_perturbation,
    irls_fit,
)
from dpnet.baselines.median.privacy import irls_l2_sensitivity
from dpnet.privacy import laplace_mechanism

pytestmark = pytest.mark.slow  # statistical: many runs of a mechanism or of the job

EPS = 1.0


def _pair(n: int, last0: tuple[float, float], last1: tuple[float, float], y_rest: np.ndarray):
    X = np.zeros((n, 1))
    y = y_rest.copy()
    X0, y0, X1, y1 = X.copy(), y.copy(), X.copy(), y.copy()
    (X0[-1, 0], y0[-1]), (X1[-1, 0], y1[-1]) = last0, last1
    return (X0, y0), (X1, y1)


def _llr_statistic(c0: np.ndarray, c1: np.ndarray):
    """Neyman-Pearson statistic of a Laplace shift from c0 to c1: sum |t - c0| - |t - c1|.

    Rounded to 1e-9: at full precision the rounding error of the statistic on its atom
    (|t - c0| - |t - c1| = const) depends on the floating-point grid around c0 vs c1, and the
    audit then finds epsilon_lower ~ 1.3 > 1 for the honest mechanism: Mironov's (2012)
    floating-point weakness of textbook Laplace sampling, a property of the float mechanism in
    dpnet.privacy (reported), not of the sensitivity derived here.
    """
    return lambda t: round(float(np.sum(np.abs(t - c0) - np.abs(t - c1))), 9)


def test_objective_perturbation_audit_no_violation():
    n = 10
    rest = 50.0 * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    d0, d1 = _pair(n, (1.0, 50.0), (1.0, -50.0), rest)
    kw = {"epsilon": EPS, "lam": 0.5, "gamma": 0.05, "x_bound": 1.0, "intercept_ridge": 0.5}

    def mech(data, rng):
        return dp_objective_perturbation(*data, rng=rng, **kw)[0]

    res = audit_epsilon(
        mech, d0, d1, n_trials=3000, rng=np.random.default_rng(0), statistic=lambda t: t[0] + t[1]
    )
    assert res.epsilon_lower <= EPS


@pytest.mark.parametrize("noise_factor, caught", [(1.0, False), (0.5, True)])
def test_irls_output_perturbation_audit(noise_factor, caught):
    """Far residuals: the minimiser moves by ~Delta_2 along (1, 1), attaining the L1 bound."""
    n, lam = 10, 1.0
    rest = 1e3 * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    d0, d1 = _pair(n, (1.0, 1e3), (1.0, -1e3), rest)
    fit = {
        id(d): irls_fit(*d, lam=lam, e=0.05, x_bound=1.0, intercept_ridge=lam)[0] for d in (d0, d1)
    }  # the non-random part of dp_irls, computed once per dataset
    l1 = (
        np.sqrt(2)
        * (1 + 2 * CERT_SLACK)
        * irls_l2_sensitivity(n, lam=lam, intercept_ridge=lam, x_bound=1.0)
    )

    def mech(data, rng):
        return laplace_mechanism(
            fit[id(data)], l1_sensitivity=l1 * noise_factor, epsilon=EPS, rng=rng
        )

    res = audit_epsilon(
        mech,
        d0,
        d1,
        n_trials=20_000,
        rng=np.random.default_rng(1),
        statistic=_llr_statistic(fit[id(d0)], fit[id(d1)]),
    )
    assert (res.epsilon_lower > EPS) is caught
    if not caught:
        assert res.epsilon_lower > 0.5 * EPS  # the audit is sharp enough to matter


@pytest.mark.parametrize("eps_run, caught", [(EPS, False), (2 * EPS, True)])
def test_coordinate_descent_audit(eps_run, caught):
    """One batch; the last row flips sign(r) x, moving the update by the full L1 bound 2 eta/m."""
    n = 20
    rest = np.random.default_rng(5).uniform(-1, 1, n)
    d0, d1 = _pair(n, (1.0, 1.0), (-1.0, 1.0), rest)
    kw = {
        "lam": 0.0,
        "n_splits": 1,
        "step": 30.0,
        "x_bound": 1.0,
        "y_bound": 1.0,
        "beta_bound": 10.0,
        "theta0": np.zeros(2),
    }

    def mech(data, rng):
        return dp_coordinate_descent(*data, epsilon=eps_run, rng=rng, **kw)[0][1]

    res = audit_epsilon(mech, d0, d1, n_trials=20_000, rng=np.random.default_rng(2))
    assert (res.epsilon_lower > EPS) is caught
