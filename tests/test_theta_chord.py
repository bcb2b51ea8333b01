"""The Newton theta step on kept matrices (theta.NewtonThetaStep, its compiled kernel _newton): the
default for tall shards, a block of machines at a time."""

from __future__ import annotations

import copy

import networkx as nx
import numpy as np
import pytest

from devtools.reference import plain_newton_theta_step, theta_subproblem_gradient
from dpnet.decentralized import (
    ADMMConfig,
    ArrayBlock,
    GroupStructure,
    LocalData,
    NewtonThetaStep,
    StackedShards,
    run_block,
)
from dpnet.decentralized._newton import COUNTS
from dpnet.decentralized.theta import NO_ANCHORS
from dpnet.losses import Logistic, MarginLoss, UnbiasedLogistic


def _shard(n: int, p: int, n_total: int, loss: MarginLoss, rng: np.random.Generator) -> LocalData:
    X = np.hstack([rng.standard_normal((n, p)), np.ones((n, 1))])
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return LocalData(X, y, n_total, loss)


def _rounds(
    n: int, p: int, k: int, seed: int = 0, loss: MarginLoss | None = None
) -> tuple[LocalData, list[np.ndarray]]:
    """A shard and k theta-step centres that drift as an ADMM run's do."""
    rng = np.random.default_rng(seed)
    data = _shard(n, p, 4 * n, loss or Logistic(), rng)
    m0, drift = rng.standard_normal(p + 1), rng.standard_normal(p + 1)
    return data, [m0 + drift * 0.5**r for r in range(k)]


def _fresh(data: StackedShards) -> NewtonThetaStep:
    """A block's Newton step from theta = 0, no kept matrix."""
    return NewtonThetaStep(
        data, np.zeros((data.X.shape[0], data.X.shape[2])), NO_ANCHORS, NO_ANCHORS
    )


def _forms(step: NewtonThetaStep) -> int:
    """Newton matrices the step has formed (restored ones included)."""
    return int(step.counts[:, COUNTS.index("matrices")].sum())


@pytest.mark.parametrize("loss", [Logistic(), UnbiasedLogistic(0.75)])
def test_every_round_reaches_the_newton_solution(loss: MarginLoss) -> None:
    """Same tolerance as Newton, fewer matrices: over 20 drifting rounds the kept-matrix
    steps end where plain Newton (a matrix formed at every iteration, devtools/reference.py)
    does, gradient norm <= 1e-12 each, forming under a third of the matrices Newton forms
    (two or more per round; at this tolerance most solves take more than CHORD_STEPS
    steps)."""
    data, centers = _rounds(400, 12, 20, loss=loss)
    rho = 0.15
    step = _fresh(StackedShards.one(data))
    theta, theta_n, newton_forms = np.zeros(13), np.zeros(13), 0
    for center in centers:
        solved = step(center[None], np.array([rho]), theta[None], tol=1e-12)
        theta = solved.theta[0]
        theta_n, formed = plain_newton_theta_step(data, center, rho, theta_n, tol=1e-12)
        newton_forms += formed
        grad = theta_subproblem_gradient(data, center, rho, theta)
        assert np.linalg.norm(grad) <= 1e-11
        assert solved.error[0] <= 1e-12  # what the step says it reached
        assert np.abs(theta - theta_n).max() <= 1e-10
        value = loss.value(data.y * (data.X_aug @ theta)).sum() / data.n_total
        assert solved.loss is not None and solved.loss[0] == pytest.approx(value, rel=1e-13)
    assert newton_forms >= 2 * len(centers)
    assert 3 * _forms(step) < newton_forms


def test_a_new_penalty_shifts_the_kept_matrix() -> None:
    """Residual balancing's change of c keeps the anchor theta_a: the kept data part is
    shifted by the new rho and inverted again, bitwise the matrix a resumed block rebuilds
    from (theta_a, rho); the first step after the change is taken on it, without a new
    matrix, and the solve still reaches the tolerance."""
    data, centers = _rounds(200, 6, 2)
    stacked = StackedShards.one(data)
    step = _fresh(stacked)
    theta = step(centers[0][None], np.array([0.05 * 3]), np.zeros((1, 7))).theta
    assert step.kept[0] and step.anchor_rho[0] == 0.05 * 3
    theta_a = step.anchor.copy()
    formed = _forms(step)
    new_rho = np.array([0.1 * 3])
    unmoved = step(centers[1][None], new_rho, theta, max_iter=0)  # the shift alone: no step
    assert np.array_equal(unmoved.theta, theta)
    assert _forms(step) == formed and np.array_equal(step.anchor, theta_a)
    assert step.anchor_rho[0] == 0.1 * 3
    stored = step.state()[0]
    assert np.array_equal(stored, np.column_stack([theta_a, new_rho]))
    rebuilt = NewtonThetaStep(stacked, theta, stored, NO_ANCHORS)
    assert _forms(rebuilt) == 1  # the rebuilt one
    assert np.array_equal(step.factor, rebuilt.factor)
    assert np.array_equal(step.gram, rebuilt.gram)
    center = centers[1][None]
    one = step(center, new_rho, theta, max_iter=1)  # one step: on the shifted matrix
    assert _forms(step) == formed and np.array_equal(step.anchor, theta_a)
    before = np.linalg.norm(theta_subproblem_gradient(data, center[0], new_rho[0], theta[0]))
    after = np.linalg.norm(theta_subproblem_gradient(data, center[0], new_rho[0], one.theta[0]))
    assert after < before
    solved = step(center, new_rho, theta)
    grad = theta_subproblem_gradient(data, center[0], new_rho[0], solved.theta[0])
    assert np.linalg.norm(grad) <= 1e-11


def _mixed_block(seed: int = 4) -> StackedShards:
    """Two tall shards of unequal sizes (padded, masked) and a wide one (no kept matrix)."""
    rng = np.random.default_rng(seed)
    sizes, p = (300, 250, 6), 8
    return StackedShards.stack([_shard(n, p, 900, Logistic(), rng) for n in sizes])


def test_a_stored_anchor_goes_on_bitwise() -> None:
    """The loop state stores (theta_a, rho_a) of every machine and the last point's margins
    only (NaN rows where no matrix is kept: the wide machine); the matrices and the loss
    derivatives rebuilt from them are the same, so a restored block takes bitwise the steps
    of the uninterrupted one, through a change of rho too."""
    data = _mixed_block()
    assert list(_fresh(data).tall) == [True, True, False]
    rng = np.random.default_rng(5)
    drift = rng.standard_normal((3, 9))
    centers = [drift * 0.5**r for r in range(7)]
    rhos = [np.array([0.15, 0.1, 0.2])] * 5 + [np.array([0.3, 0.2, 0.4])] * 2
    step = _fresh(data)
    assert step.state()[0].size == 0  # nothing kept before the first step
    theta = np.zeros((3, 9))
    for center, rho in zip(centers[:3], rhos[:3], strict=True):
        theta = step(center, rho, theta).theta
    anchors, margins = step.state()
    assert anchors.shape == (3, 10)
    assert np.isfinite(anchors[:2]).all() and np.isnan(anchors[2]).all()
    resumed = NewtonThetaStep(data, theta.copy(), anchors.copy(), margins.copy())
    theta_r = theta.copy()
    tol = np.array([1e-12, 1e-9, 1e-10])  # per machine, as the round loop's theta_tol
    for center, rho in zip(centers[3:], rhos[3:], strict=True):
        solved = step(center, rho, theta, tol=tol)
        solved_r = resumed(center, rho, theta_r, tol=tol)
        theta, theta_r = solved.theta, solved_r.theta
        assert np.array_equal(theta, theta_r)
        assert np.array_equal(solved.loss, solved_r.loss)
        assert np.array_equal(solved.error, solved_r.error)
        assert (solved.error <= tol).all()


def test_a_resumed_round_loop_goes_on_bitwise() -> None:
    """run_block from the LoopState of round 12 (anchors, margins and theta_tol included)
    ends bitwise where the uninterrupted run does, machines with and without kept
    matrices in one block."""
    data = _mixed_block(seed=6)
    graph = nx.path_graph(3)
    groups = GroupStructure(np.arange(9), np.arange(8), np.full(8, 0.01))
    config = ADMMConfig(lam=0.06, max_rounds=30, tol=1e-14)
    saved: list = []

    def keep(state) -> None:  # noqa: ANN001
        if state.round == 12:
            saved.append(copy.deepcopy(state))

    whole = run_block(ArrayBlock(graph), data, groups, config, graph, on_round=keep)
    assert whole.rounds == 30 and len(saved) == 1
    assert saved[0].newton_anchor.shape == (3, 10) and saved[0].theta_margins.size
    resumed = run_block(ArrayBlock(graph), data, groups, config, graph, start_state=saved[0])
    assert resumed.rounds == 30 and resumed.start_round == 12
    assert np.array_equal(whole.theta, resumed.theta) and np.array_equal(whole.z, resumed.z)
    assert np.array_equal(whole.local_objective, resumed.local_objective)


@pytest.mark.parametrize(("n", "p"), [(50, 3), (2, 3)])
def test_a_non_finite_matrix_gives_a_non_finite_step(n: int, p: int) -> None:
    """Features of 1e200 overflow H (tall: the kept matrix; wide: the Woodbury system): the
    step is NaN (the stop rule's 'non-finite'), never a finite step computed from an
    infinite matrix."""
    data, centers = _rounds(n, p, 1)
    data.X_aug[:, 0] *= 1e200
    with np.errstate(all="ignore"):
        solved = _fresh(StackedShards.one(data))(
            centers[0][None], np.array([0.15]), np.zeros((1, p + 1))
        )
    assert not np.isfinite(solved.theta).all()
