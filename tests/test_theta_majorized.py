"""The inexact theta step by majorize-minimize (``--theta-solver majorized``,
theta.MajorizedThetaStep)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from devtools.reference import (
    exact_theta_step,
    group_logistic_objective,
    group_logistic_optimum,
    theta_subproblem_gradient,
)
from dpnet.data import make_group_logistic
from dpnet.decentralized import GroupStructure, LocalData, MajorizedThetaStep, StackedShards, admm
from dpnet.decentralized.batched import run_batched
from dpnet.losses import Logistic, MarginLoss, UnbiasedLogistic
from dpnet.network import build_topology, run_in_process
from dpnet.penalties import groups_from_labels


def _subproblem(n: int, p: int, loss: MarginLoss | None = None, seed: int = 0):  # noqa: ANN202
    """A shard, a centre and rho as an ADMM round forms them (c = 0.02, three neighbours),
    and a start."""
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n, p)), np.ones((n, 1))])
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    data = LocalData(X, y, 4 * n, loss or Logistic())
    c = 0.02
    center = (rng.standard_normal((3, p + 1)) + 0.1 * rng.standard_normal((3, p + 1)) / c).mean(0)
    return data, center, 3 * c, 0.05 * rng.standard_normal(p + 1)


def _objective(data: LocalData, center: np.ndarray, rho: float, theta: np.ndarray) -> float:
    loss = data.loss.value(data.y * (data.X_aug @ theta)).sum() / data.n_total
    return float(loss + 0.5 * rho * np.dot(theta - center, theta - center))


def _mm(data: LocalData, n_steps: int) -> MajorizedThetaStep:
    return MajorizedThetaStep(StackedShards.one(data), n_steps)


@pytest.mark.parametrize(
    ("n", "p", "loss"),
    [
        (200, 10, None),
        (30, 80, None),
        (200, 10, UnbiasedLogistic(0.8)),
        (30, 80, UnbiasedLogistic(0.7)),
    ],
)
def test_iterations_descend_to_the_exact_theta_step(n: int, p: int, loss: MarginLoss) -> None:
    """Every MM iteration lowers the subproblem's objective; many reach the exact minimiser
    (devtools/reference.py) (tall shards: Cholesky of the (p+1) system; wide ones: Woodbury,
    n_j < p + 1)."""
    data, center, rho, theta0 = _subproblem(n, p, loss)
    values = [_objective(data, center, rho, theta0)]
    theta = theta0[None]
    step = _mm(data, 1)
    for _ in range(40):
        theta = step(center[None], np.array([rho]), theta)
        values.append(_objective(data, center, rho, theta[0]))
    assert np.all(np.diff(values) <= 1e-15 * np.abs(values[:-1]))
    assert values[-1] < values[0]
    exact = exact_theta_step(data, center, rho, theta0)
    assert np.linalg.norm(theta_subproblem_gradient(data, center, rho, exact)) <= 1e-12
    many = _mm(data, 3000)(center[None], np.array([rho]), theta0[None])[0]
    assert np.abs(many - exact).max() < 1e-9


def _mm_step_dense(data: LocalData, center, rho: float, theta) -> np.ndarray:  # noqa: ANN001
    """One MM iteration written out: theta - B^{-1} g, B = (L/n) X~^T X~ + rho I formed
    densely and solved by np.linalg.solve."""
    X = data.X_aug
    B = data.loss.curvature_bound / data.n_total * (X.T @ X) + rho * np.eye(X.shape[1])
    return theta - np.linalg.solve(B, theta_subproblem_gradient(data, center, rho, theta))


def test_wide_and_tall_factorizations_agree() -> None:
    """One MM iteration on a tall shard (n = p + 1: Cholesky of B) and on a wide one (n = p:
    Woodbury) is the dense formula theta - B^{-1} g, alone and side by side in one block, and
    after a change of rho (B factorized anew)."""
    tall, center, rho, theta0 = _subproblem(40, 39)
    wide = LocalData(tall.X_aug[:39], tall.y[:39], tall.n_total)
    block = MajorizedThetaStep(StackedShards.stack([tall, wide]), 1)
    singles = [_mm(tall, 1), _mm(wide, 1)]
    for new_rho in (rho, 0.3):
        rhos = np.array([new_rho, new_rho])
        both = block(np.stack([center, center]), rhos, np.stack([theta0, theta0]))
        for j, data in enumerate((tall, wide)):
            dense = _mm_step_dense(data, center, new_rho, theta0)
            alone = singles[j](center[None], rhos[:1], theta0[None])[0]
            assert np.allclose(alone, dense, rtol=1e-10, atol=1e-13)
            assert np.allclose(both[j], dense, rtol=1e-10, atol=1e-13)
    # the two shards differ in one row: their steps differ too (the test can tell them apart)
    assert not np.allclose(both[0], both[1], rtol=1e-6)


LAM = 0.15


@pytest.fixture(scope="module")
def centralized():  # noqa: ANN201
    data = make_group_logistic(800, rng=np.random.default_rng(3)).validate()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta_star = group_logistic_optimum(data.X, data.y, data.groups, LAM)
    f_star = group_logistic_objective(data.X, data.y, data.groups, LAM, theta_star)
    return data, theta_star, f_star


@pytest.mark.parametrize("backend", ["threads", "simulated"])
def test_majorized_solver_reaches_the_centralized_optimum(centralized, backend: str) -> None:  # noqa: ANN001
    """The ADMM with the majorized theta step (beta_steps = 10) on the paper's 5-machine
    network reaches skglm's optimum, on a machine per thread and in the simulator."""
    data, theta_star, f_star = centralized
    graph = build_topology("paper5", 5)
    n_mach = graph.number_of_nodes()
    n = len(data.y)
    shards = [
        LocalData(np.hstack([data.X[r], np.ones((len(r), 1))]), data.y[r], n)
        for r in np.array_split(np.random.default_rng(0).permutation(n), n_mach)
    ]
    ptr, idx = groups_from_labels(data.groups)
    structure = GroupStructure(ptr, idx, np.full(len(ptr) - 1, LAM / (2 * n_mach)))
    config = admm.ADMMConfig(lam=LAM, theta_solver="majorized")
    if backend == "simulated":
        result = run_batched(shards, structure, config, graph)
        zs, reason = list(result.z), result.stop_reason
    else:
        results = run_in_process(
            graph, lambda comm: admm.run_machine(comm, shards[comm.rank], structure, config, graph)
        )
        zs, reason = [r.z for r in results], results[0].stop_reason
    assert reason == "converged"
    for z in zs:
        gap = (group_logistic_objective(data.X, data.y, data.groups, LAM, z) - f_star) / f_star
        assert abs(gap) < 1e-6
        assert np.abs(z - theta_star).max() < 1e-4
