"""The inexact theta step by majorize-minimize (``--theta-solver majorized``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpnet.data.synthetic import make_group_logistic
from dpnet.decentralized.steps import LocalData, MajorizedThetaStep, theta_update_newton
from dpnet.estimators import DecentralizedGroupLassoLogistic
from dpnet.losses.margin import Logistic, UnbiasedLogistic
from tests.reference import group_logistic_objective, group_logistic_optimum


def _subproblem(n: int, p: int, loss=None, seed: int = 0):  # noqa: ANN001, ANN202
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n, p)), np.ones((n, 1))])
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    data = LocalData(X, y, 4 * n, loss or Logistic())
    z_nbhd = rng.standard_normal((3, p + 1))
    v_in = 0.1 * rng.standard_normal((3, p + 1))
    return data, z_nbhd, v_in, 0.05 * rng.standard_normal(p + 1)


def _objective(data: LocalData, z_nbhd, v_in, c: float, theta) -> float:  # noqa: ANN001
    m = (z_nbhd + v_in / c).mean(axis=0)
    rho = c * z_nbhd.shape[0]
    loss = data.loss.value(data.y * (data.X_aug @ theta)).sum() / data.n_total
    return float(loss + 0.5 * rho * np.dot(theta - m, theta - m))


@pytest.mark.parametrize(
    ("n", "p", "loss"),
    [
        (200, 10, None),
        (30, 80, None),
        (200, 10, UnbiasedLogistic(0.8)),
        (30, 80, UnbiasedLogistic(0.7)),
    ],
)
def test_iterations_descend_to_the_exact_theta_step(n: int, p: int, loss) -> None:  # noqa: ANN001
    """Every MM iteration lowers the subproblem's objective; many reach Newton's minimiser
    (tall shards: Cholesky of the (p+1) system; wide ones: Woodbury, n_j < p + 1)."""
    data, z_nbhd, v_in, theta0 = _subproblem(n, p, loss)
    c = 0.02
    values = [_objective(data, z_nbhd, v_in, c, theta0)]
    theta = theta0
    step = MajorizedThetaStep(data, 1)
    for _ in range(40):
        theta = step(z_nbhd, v_in, theta, c)
        values.append(_objective(data, z_nbhd, v_in, c, theta))
    assert np.all(np.diff(values) <= 1e-15 * np.abs(values[:-1]))
    exact = theta_update_newton(data, z_nbhd, v_in, theta0, c)
    many = MajorizedThetaStep(data, 3000)(z_nbhd, v_in, theta0, c)
    assert np.abs(many - exact).max() < 1e-9


def test_wide_and_tall_factorizations_agree() -> None:
    data, z_nbhd, v_in, theta0 = _subproblem(40, 39)  # n = p + 1: the tall (dense) path
    dense = MajorizedThetaStep(data, 5)
    wide_data = LocalData(data.X_aug[:39], data.y[:39], data.n_total)
    assert MajorizedThetaStep(wide_data, 1).wide and not dense.wide
    # the same B^{-1} g by both formulas, on the wide shard
    tall_view = MajorizedThetaStep(wide_data, 1)
    tall_view.wide = False
    tall_view.gram = wide_data.X_aug.T @ wide_data.X_aug
    g = np.random.default_rng(1).standard_normal(40)
    assert np.allclose(
        MajorizedThetaStep(wide_data, 1)._solve(0.3, g), tall_view._solve(0.3, g), rtol=1e-10
    )


def test_majorized_solver_reaches_the_centralized_optimum() -> None:
    data = make_group_logistic(800, rng=np.random.default_rng(3)).validate()
    lam = 0.15
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta_star = group_logistic_optimum(data.X, data.y, data.groups, lam)
    f_star = group_logistic_objective(data.X, data.y, data.groups, lam, theta_star)
    model = DecentralizedGroupLassoLogistic(
        lam,
        topology="paper5",
        n_machines=5,
        theta_solver="majorized",
        random_state=0,
        groups=data.groups,
    ).fit(data.X, data.y)
    assert model.stop_reason_ == "converged"
    for z in model.machine_coefs_:
        gap = (group_logistic_objective(data.X, data.y, data.groups, lam, z) - f_star) / f_star
        assert abs(gap) < 1e-6
        assert np.abs(z - theta_star).max() < 1e-4
