"""The Woodbury theta step for wide shards (n_j < p + 1) against the dense system and the exact
minimiser, and the full ADMM on wide data against skglm's optimum on every backend."""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pytest

from devtools.reference import (
    exact_theta_step,
    group_logistic_objective,
    group_logistic_optimum,
    plain_newton_theta_step,
    theta_subproblem_gradient,
)
from dpnet.decentralized import GroupStructure, LocalData, NewtonThetaStep, StackedShards, admm
from dpnet.decentralized._newton import woodbury
from dpnet.decentralized.batched import run_batched
from dpnet.decentralized.theta import NO_ANCHORS
from dpnet.losses import Logistic, MarginLoss, UnbiasedLogistic
from dpnet.network import run_in_process
from dpnet.penalties import groups_from_labels


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


def _newton(data: LocalData, center: np.ndarray, rho: float, theta0: np.ndarray):  # noqa: ANN202
    """One machine's Newton theta step (a block of one) from theta0."""
    step = NewtonThetaStep(StackedShards.one(data), theta0[None], NO_ANCHORS, NO_ANCHORS)
    return step, step(center[None], np.array([rho]), theta0[None])


def _assert_minimises(data: LocalData, center, rho: float, theta, exact) -> None:  # noqa: ANN001
    """theta is the subproblem's minimiser to what its gradient allows: the subproblem is
    rho-strongly convex, so ||theta - theta*|| <= ||g(theta)|| / rho, against an exact
    minimiser of gradient norm <= 1e-12 (devtools/reference.py, scipy's trust-ncg)."""
    grad = np.linalg.norm(theta_subproblem_gradient(data, center, rho, theta))
    grad_exact = np.linalg.norm(theta_subproblem_gradient(data, center, rho, exact))
    assert grad_exact <= 1e-12
    assert np.linalg.norm(theta - exact) <= (grad + grad_exact) / rho * (1 + 1e-6) + 1e-15
    assert _rel(theta, exact) < 1e-9


def test_which_machines_keep_a_matrix() -> None:
    """A machine with n_j >= p + 1 rows keeps its Newton matrix, one with fewer (none at all
    included) solves by Woodbury; in one block the step reaches every machine's exact
    minimiser (a machine without rows: the centre itself, H = rho I)."""
    rng = np.random.default_rng(2)
    dim = 41
    shards = [_wide(rng, n=n, p=dim - 1) for n in (40, 41, 42, 0)]
    shards = [LocalData(s.X_aug, s.y, 200) for s in shards]
    data = StackedShards.stack(shards)
    zero = np.zeros((1, 5001))
    assert not NewtonThetaStep(
        StackedShards.one(_wide(rng, n=20, p=5000)), zero, NO_ANCHORS, NO_ANCHORS
    ).tall[0]
    center = 0.1 * rng.standard_normal((4, dim))
    rho = np.array([0.05, 0.1, 0.15, 0.2])
    step = NewtonThetaStep(data, np.zeros((4, dim)), NO_ANCHORS, NO_ANCHORS)
    assert list(step.tall) == [False, True, True, False]
    solved = step(center, rho, np.zeros((4, dim)))
    assert list(step.kept) == [False, True, True, False]
    for j, shard in enumerate(shards):
        exact = exact_theta_step(shard, center[j], rho[j])
        _assert_minimises(shard, center[j], rho[j], solved.theta[j], exact)
    assert np.allclose(solved.theta[3], center[3], rtol=1e-15, atol=0.0)


@pytest.mark.parametrize("rho", [1e-3, 0.05, 3.0])
def test_woodbury_solves_the_dense_system(rho: float) -> None:
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
    s = np.sqrt(weights)
    step = woodbury(X, X @ X.T, s, rho, g)
    assert _rel(step, ref) < 1e-10
    # no rows at all: H = rho I
    assert np.allclose(woodbury(X[:0], np.empty((0, 0)), s[:0], rho, g), g / rho)
    # a non-finite system: NaN, not a step
    X[0, 0] = 1e200
    with np.errstate(all="ignore"):
        assert np.isnan(woodbury(X, X @ X.T, np.sqrt(weights + 1.0), rho, g)).all()


@pytest.mark.parametrize(
    ("loss", "scale"),
    [
        (Logistic(), 1.0),
        (UnbiasedLogistic(0.8), 1.0),
        # margins of thousands: curvature underflows to 0
        (Logistic(), 3000.0),
        (UnbiasedLogistic(0.7), 3000.0),
    ],
)
def test_newton_step_on_wide_data_is_the_exact_minimiser(loss: MarginLoss, scale: float) -> None:
    """The Newton step on a wide shard (Woodbury, no kept matrix formed) ends at the exact
    minimiser of its subproblem, with the loss and gradient norm it reports."""
    rng = np.random.default_rng(7)
    data = _wide(rng, scale=scale, loss=loss)
    dim = data.X_aug.shape[1]
    center = (rng.standard_normal((3, dim)) * 0.05).mean(axis=0)
    center += (rng.standard_normal((3, dim)) * 0.001).mean(axis=0) / 0.05
    rho = 0.05 * 3
    theta0 = rng.standard_normal(dim) * 0.01
    step, solved = _newton(data, center, rho, theta0)
    theta = solved.theta[0]
    assert not step.kept.any() and step.state()[0].size == 0
    exact = exact_theta_step(data, center, rho, theta0)
    _assert_minimises(data, center, rho, theta, exact)
    grad = np.linalg.norm(theta_subproblem_gradient(data, center, rho, theta))
    assert solved.error[0] == pytest.approx(grad, rel=1e-6, abs=1e-12)
    value = loss.value(data.y * (data.X_aug @ theta)).sum() / data.n_total
    assert solved.loss is not None and solved.loss[0] == pytest.approx(value, rel=1e-12)
    if scale > 1:  # D has exact zeros in the first Newton system (and, unbiased, at the end)
        for point in (theta0, theta) if isinstance(loss, UnbiasedLogistic) else (theta0,):
            curvature = loss.curvature(data.y * (data.X_aug @ point))
            assert np.count_nonzero(curvature == 0.0) >= 5


@pytest.mark.parametrize(("n", "p"), [(80, 6), (40, 39), (20, 60)])
def test_newton_step_is_plain_newton_to_rounding(n: int, p: int) -> None:
    """Against plain dense Newton (devtools/reference.py, the theta step before kept matrices and
    Woodbury): on a wide shard the Newton iterations are the same and the Woodbury solves
    and the carried margins change only the last bits; on a tall one the steps on kept
    matrices take other iterates to the same gradient tolerance 1e-12, so the two ends lie
    within what the tolerance allows (rho-strong convexity: |theta - theta*| <= |g| / rho)."""
    rng = np.random.default_rng(3)
    rho = 0.15
    for loss in (Logistic(), UnbiasedLogistic(0.8)):
        data = _wide(rng, n=n, p=p, loss=loss)
        center = (rng.standard_normal((3, p + 1)) + rng.standard_normal((3, p + 1)) / 5).mean(0)
        step, solved = _newton(data, center, rho, np.zeros(p + 1))
        old, _ = plain_newton_theta_step(data, center, rho, np.zeros(p + 1))
        new = solved.theta[0]
        gap = np.abs(new - old).max()
        if n < p + 1:
            assert not step.kept.any()
            assert gap <= 1e-12 * max(1.0, np.abs(old).max())
        else:
            assert step.kept.all()
            grads = [theta_subproblem_gradient(data, center, rho, t) for t in (new, old)]
            assert max(np.linalg.norm(g) for g in grads) <= 1e-12
            assert np.linalg.norm(new - old) <= sum(np.linalg.norm(g) for g in grads) / rho


# wide ADMM problem: p = 400 features (100 groups of 4), n = 60 rows on J = 3 machines (20 each)
N, P, J, LAM = 60, 400, 3, 0.2


@pytest.fixture(scope="module")
def wide_problem():  # noqa: ANN201
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


def _run_wide(X: np.ndarray, y: np.ndarray, groups: np.ndarray, backend: str) -> list[np.ndarray]:
    """Every machine's Z and the stop reason of the ADMM on ``backend``."""
    ptr, idx = groups_from_labels(groups)
    structure = GroupStructure(ptr, idx, np.full(len(ptr) - 1, LAM / (2 * J)))
    shards = [
        LocalData(np.hstack([X[r], np.ones((len(r), 1))]), y[r], N)
        for r in np.array_split(np.arange(N), J)
    ]
    assert (StackedShards.stack(shards).rows < X.shape[1] + 1).all()  # all wide
    graph = nx.cycle_graph(J)
    cfg = admm.ADMMConfig(lam=LAM, tol=1e-9, max_rounds=3000)
    if backend == "simulated":
        result = run_batched(shards, structure, cfg, graph)
        return list(result.z), result.stop_reason
    results = run_in_process(
        graph, lambda comm: admm.run_machine(comm, shards[comm.rank], structure, cfg, graph)
    )
    assert len({r.stop_reason for r in results}) == 1
    return [r.z for r in results], results[0].stop_reason


@pytest.mark.parametrize("backend", ["threads", "simulated"])
def test_admm_on_wide_data_reaches_the_skglm_optimum(wide_problem, backend: str) -> None:  # noqa: ANN001
    X, y, groups, theta_star, f_star = wide_problem
    zs, reason = _run_wide(X, y, groups, backend)
    assert reason == "converged"
    assert np.count_nonzero(theta_star[:-1]) < P / 2  # a sparse optimum, not all groups
    for z in zs:
        gap = (group_logistic_objective(X, y, groups, LAM, z) - f_star) / f_star
        assert abs(gap) < 1e-8
        assert np.abs(z - theta_star).max() < 1e-5
