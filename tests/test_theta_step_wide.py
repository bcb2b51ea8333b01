"""The Woodbury theta step for wide shards (n_j < p + 1) against the dense Newton step, and the
full ADMM on wide data against skglm's optimum with either Newton system."""

from __future__ import annotations

import functools
import warnings

import networkx as nx
import numpy as np
import pytest

from dpnet.decentralized import admm
from dpnet.decentralized.steps import (
    GroupStructure,
    LocalData,
    newton_direction,
    newton_system_kind,
    theta_step_newton,
    theta_update_newton,
)
from dpnet.losses.margin import Logistic, MarginLoss, UnbiasedLogistic
from dpnet.network.inprocess import run_in_process
from dpnet.penalties.group import groups_from_labels
from tests.reference import group_logistic_objective, group_logistic_optimum


def _wide(
    rng: np.random.Generator,
    n: int = 20,
    p: int = 300,
    scale: float = 1.0,
    loss: MarginLoss | None = None,
) -> LocalData:
    X = rng.standard_normal((n, p)) * scale
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return LocalData(np.hstack([X, np.ones((n, 1))]), y, 5 * n, loss or Logistic())


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_newton_system_kind():
    assert newton_system_kind(20, 5001) == "woodbury"
    assert newton_system_kind(400, 401) == "woodbury"  # p = 400 features + intercept
    assert newton_system_kind(401, 401) == "dense"
    assert newton_system_kind(399, 400) == "woodbury"
    assert newton_system_kind(0, 7) == "woodbury"


@pytest.mark.parametrize("rho", [1e-3, 0.05, 3.0])
def test_woodbury_direction_solves_the_dense_system(rho):
    """H^{-1} g by Woodbury == np.linalg.solve on the explicitly formed H, weights with zeros."""
    rng = np.random.default_rng(1)
    n, dim = 25, 200
    X = rng.standard_normal((n, dim))
    weights = rng.random(n) / 100
    weights[:5] = 0.0  # curvature that underflowed
    weights[5:8] = 1e-300  # and denormal-small curvature: no division by weights
    g = rng.standard_normal(dim)
    hess = X.T @ np.diag(weights) @ X + rho * np.eye(dim)
    ref = np.linalg.solve(hess, g)
    step = newton_direction(X, weights, rho, g, "woodbury")
    assert _rel(step, ref) < 1e-10
    assert np.array_equal(step, newton_direction(X, weights, rho, g, "woodbury", X @ X.T))
    assert _rel(newton_direction(X, weights, rho, g, "dense"), ref) < 1e-10
    # no rows at all: H = rho I
    assert np.allclose(newton_direction(X[:0], weights[:0], rho, g, "woodbury"), g / rho)


@pytest.mark.parametrize(
    ("loss", "scale"),
    [
        (Logistic(), 1.0),
        (UnbiasedLogistic(0.8), 1.0),
        # margins of thousands: curvature underflows to 0 (slow: ~17 s on a shared 2-core
        # machine, the other three ~3 s; the unbiased loss keeps this case in the fast loop)
        pytest.param(Logistic(), 3000.0, marks=pytest.mark.slow),
        (UnbiasedLogistic(0.7), 3000.0),
    ],
)
def test_woodbury_theta_step_matches_the_dense_one(loss, scale):
    rng = np.random.default_rng(7)
    data = _wide(rng, scale=scale, loss=loss)
    dim = data.X_aug.shape[1]
    c = 0.05
    z_nbhd = rng.standard_normal((3, dim)) * 0.05
    v_in = rng.standard_normal((3, dim)) * 0.001
    theta0 = rng.standard_normal(dim) * 0.01
    dense = theta_update_newton(data, z_nbhd, v_in, theta0, c, system="dense")
    wood = theta_update_newton(data, z_nbhd, v_in, theta0, c, system="woodbury")
    assert _rel(wood, dense) < 1e-10
    # the automatic choice on a wide shard is the Woodbury system, bit for bit
    assert np.array_equal(theta_update_newton(data, z_nbhd, v_in, theta0, c), wood)
    if scale > 1:  # D has exact zeros in the first Newton system (and, unbiased, at the end)
        for theta in (theta0, wood) if isinstance(loss, UnbiasedLogistic) else (theta0,):
            curvature = loss.curvature(data.y * (data.X_aug @ theta))
            assert np.count_nonzero(curvature == 0.0) >= 5


def _theta_update_newton_before(data, z_nbhd, v_in, theta_prev, c, tol=1e-12, max_iter=50):
    """Verbatim copy of the theta step before the Woodbury path (the dense reference)."""
    d = z_nbhd.shape[0]
    m = (z_nbhd + v_in / c).mean(axis=0)
    rho = c * d
    X, y, inv_n, loss = data.X_aug, data.y, 1.0 / data.n_total, data.loss
    theta = theta_prev.copy()

    def value(t):
        return inv_n * loss.value(y * (X @ t)).sum() + 0.5 * rho * np.dot(t - m, t - m)

    f = value(theta)
    for _ in range(max_iter):
        margin = y * (X @ theta)
        grad = X.T @ (inv_n * y * loss.derivative(margin)) + rho * (theta - m)
        if np.linalg.norm(grad) <= tol:
            break
        hess = (X.T * (inv_n * loss.curvature(margin))) @ X
        hess[np.diag_indices_from(hess)] += rho
        step = np.linalg.solve(hess, grad)
        slope = grad @ step
        if slope <= 1e-12 * max(1.0, abs(f)):
            theta = theta - step
            break
        t = 1.0
        while True:
            cand = theta - t * step
            f_cand = value(cand)
            if f_cand <= f - 1e-4 * t * slope or t < 1e-10:
                break
            t *= 0.5
        theta, f = cand, f_cand
    return theta


@pytest.mark.parametrize(("n", "p", "system"), [(80, 6, None), (40, 39, None), (20, 60, "dense")])
def test_dense_path_is_the_old_step_to_rounding(n, p, system):
    """The Cholesky (posv) solve and the carried margins change only the last bits."""
    rng = np.random.default_rng(3)
    for loss in (Logistic(), UnbiasedLogistic(0.8)):
        data = _wide(rng, n=n, p=p, loss=loss)
        z_nbhd = rng.standard_normal((3, p + 1))
        v_in = rng.standard_normal((3, p + 1)) * 0.01
        new = theta_update_newton(data, z_nbhd, v_in, np.zeros(p + 1), 0.05, system=system)
        old = _theta_update_newton_before(data, z_nbhd, v_in, np.zeros(p + 1), 0.05)
        assert np.abs(new - old).max() <= 1e-12 * max(1.0, np.abs(old).max())


# wide ADMM problem: p = 400 features (100 groups of 4), n = 60 rows on J = 3 machines (20 each)
N, P, J, LAM = 60, 400, 3, 0.2


@pytest.fixture(scope="module")
def wide_problem():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((N, P))
    beta = np.zeros(P)
    beta[:8] = rng.standard_normal(8)
    y = np.where(rng.random(N) < 1 / (1 + np.exp(-(X @ beta + 0.3))), 1.0, -1.0)
    groups = np.arange(P) // 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta_star = group_logistic_optimum(X, y, groups, LAM)
    f_star = group_logistic_objective(X, y, groups, LAM, theta_star)
    return X, y, groups, theta_star, f_star


def _run_wide(X, y, groups, monkeypatch, system):
    if system is not None:
        monkeypatch.setattr(
            admm, "theta_step_newton", functools.partial(theta_step_newton, system=system)
        )
    ptr, idx = groups_from_labels(groups)
    structure = GroupStructure(ptr, idx, np.full(len(ptr) - 1, LAM / (2 * J)))
    shards = [
        LocalData(np.hstack([X[r], np.ones((len(r), 1))]), y[r], N)
        for r in np.array_split(np.arange(N), J)
    ]
    graph = nx.cycle_graph(J)
    cfg = admm.ADMMConfig(lam=LAM, tol=1e-9, max_rounds=3000)
    return run_in_process(
        graph, lambda comm: admm.run_machine(comm, shards[comm.rank], structure, cfg, graph)
    )


@pytest.mark.parametrize("system", ["woodbury", "dense", None])
def test_admm_on_wide_data_reaches_the_skglm_optimum(wide_problem, monkeypatch, system):
    X, y, groups, theta_star, f_star = wide_problem
    assert newton_system_kind(N // J, P + 1) == "woodbury"
    results = _run_wide(X, y, groups, monkeypatch, system)
    assert results[0].stop_reason == "converged"
    assert np.count_nonzero(theta_star[:-1]) < P / 2  # a sparse optimum, not all groups
    for r in results:
        gap = (group_logistic_objective(X, y, groups, LAM, r.z) - f_star) / f_star
        assert abs(gap) < 1e-8
        assert np.abs(r.z - theta_star).max() < 1e-5
    if system is None:  # the automatic choice runs the Woodbury step, bit for bit
        forced = _run_wide(X, y, groups, monkeypatch, "woodbury")
        assert all(np.array_equal(a.z, b.z) for a, b in zip(results, forced, strict=True))
