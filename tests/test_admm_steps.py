"""The pure-numpy ADMM steps against direct numerical minimisation of their definitions."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import minimize

from dpnet.decentralized import (
    ADMMConfig,
    GroupStructure,
    LocalData,
    NewtonThetaStep,
    StackedShards,
    _edges,
    run_machine,
)
from dpnet.decentralized.admm import StepClock, balance_penalty
from dpnet.decentralized.block import BlockEdges
from dpnet.decentralized.steps import z_update
from dpnet.decentralized.theta import NO_ANCHORS, gradient_thetas
from dpnet.losses import Logistic, UnbiasedLogistic
from dpnet.network import run_in_process
from dpnet.penalties import groups_from_labels

RNG = np.random.default_rng(42)
LABELS = np.array([0, 0, 1, 1, 1, 2])
PTR, IDX = groups_from_labels(LABELS)


def _structure(thresholds):
    return GroupStructure(PTR, IDX, np.asarray(thresholds, float))


def _one_machine(d: int) -> BlockEdges:
    """The edges of one machine with d - 1 neighbours (a star's centre): d rows, itself
    included."""
    return BlockEdges.of(nx.star_graph(d - 1), [0])


@pytest.mark.parametrize("thresholds", [[0.05, 0.3, 10.0], [0.0, 0.0, 0.0]])
def test_z_update_is_the_exact_minimiser(thresholds):
    d, dim, c = 3, 7, 0.7
    theta_nbhd = RNG.standard_normal((d, dim))
    v_out = RNG.standard_normal((d, dim)) * 0.1
    z = z_update(theta_nbhd, v_out, np.zeros((1, dim)), c, _structure(thresholds), _one_machine(d))[
        0
    ]

    def objective(zz):
        pen = sum(t * np.linalg.norm(zz[:-1][LABELS == g]) for g, t in enumerate(thresholds))
        return pen + 0.5 * c * np.sum((zz[None] - theta_nbhd + v_out / c) ** 2)

    ref = minimize(
        objective,
        z + 0.1,
        method="Powell",
        options={"xtol": 1e-12, "ftol": 1e-15, "maxiter": 200000},
    ).x
    assert objective(z) <= objective(ref) + 1e-10
    assert np.allclose(z, ref, atol=1e-4)
    if thresholds[2] == 10.0:
        assert np.all(z[:-1][LABELS == 2] == 0.0)  # a large threshold zeroes its group


def test_z_update_damped_step():
    theta_nbhd = RNG.standard_normal((2, 7))
    v_out = np.zeros((2, 7))
    z0 = RNG.standard_normal((1, 7))
    edges, groups = _one_machine(2), _structure([0.1, 0.1, 0.1])
    exact = z_update(theta_nbhd, v_out, z0, 1.0, groups, edges)
    half = z_update(theta_nbhd, v_out, z0, 1.0, groups, edges, alpha_z=0.5)
    assert np.allclose(half, 0.5 * (z0 + exact))


def _local(n=80, p=6, loss=None):
    X = RNG.standard_normal((n, p))
    y = np.where(RNG.random(n) < 0.5, 1.0, -1.0)
    return LocalData(np.hstack([X, np.ones((n, 1))]), y, 3 * n, loss or Logistic())


@pytest.mark.parametrize("loss", [Logistic(), UnbiasedLogistic(0.8)])
def test_the_newton_theta_step_matches_scipy(loss):
    data = _local(loss=loss)
    d, dim, c = 3, 7, 0.05
    z_nbhd = RNG.standard_normal((d, dim))
    v_in = RNG.standard_normal((d, dim)) * 0.01

    def objective(t):
        m = data.y * (data.X_aug @ t)
        return loss.value(m).sum() / data.n_total + 0.5 * c * np.sum(
            (z_nbhd - t[None] + v_in / c) ** 2
        )

    # the subproblem's centre m = mean_i (Z_i + V_ij / c) and rho = c d
    center, rho, zero = (
        (z_nbhd + v_in / c).mean(axis=0)[None],
        np.array([c * d]),
        np.zeros((1, dim)),
    )
    block = StackedShards.one(data)
    theta = NewtonThetaStep(block, zero, NO_ANCHORS, NO_ANCHORS)(center, rho, zero).theta[0]
    ref = minimize(objective, np.zeros(dim), method="BFGS", options={"gtol": 1e-12}).x
    assert objective(theta) <= objective(ref) + 1e-12
    assert np.allclose(theta, ref, atol=1e-6)
    # the gradient variant (paper's U steps) approaches the same point
    slow = gradient_thetas(block, center, rho, zero, n_steps=3000, step_size=2.0)[0]
    assert np.allclose(slow, theta, atol=1e-6)


def test_dual_copies_stay_equal_on_both_ends_of_an_edge():
    """Machines i and j, each a block of one with rows [i, j], relax and step their copies of
    V_ij and V_ji from the same numbers: bitwise equal, over-relaxed or not."""
    c, dim = 0.3, 4
    z_i, z_j, t_i, t_j, new_i, new_j = (RNG.standard_normal((1, dim)) for _ in range(6))
    ptr = np.array([0, 2])
    for alpha in (1.0, 1.7):
        copies = []
        for z, t, new in ((z_i, t_i, new_i), (z_j, t_j, new_j)):
            v_out, v_in = np.zeros((2, dim)), np.zeros((2, dim))
            z_in, z_out = np.empty((2, dim)), np.empty((2, dim))
            _edges.relaxed_centers(
                z, np.vstack([z_i, z_j]), t, np.vstack([t_i, t_j]), v_in, ptr, alpha, c, z_in, z_out
            )
            _edges.dual_step(v_out, v_in, z_out, z_in, new, np.vstack([new_i, new_j]), ptr, c)
            copies.append((v_out, v_in))
        (out_i, in_i), (out_j, in_j) = copies
        assert np.array_equal(out_i[1], in_j[0])  # V_ij on i == V_ij on j
        assert np.array_equal(out_j[0], in_i[1])  # V_ji on j == V_ji on i
        assert np.any(out_i[1] != 0.0)


def test_balance_penalty():
    assert balance_penalty(1.0, 0.01, 10, 2) == 2
    assert balance_penalty(0.01, 1.0, 10, 2) == 0.5
    assert balance_penalty(1.0, 0.5, 10, 2) == 1.0


def test_every_machine_stops_in_the_same_round_on_a_long_path():
    """Pipelined max-consensus: identical stop decisions even with diameter 7."""
    graph = nx.path_graph(8)
    groups = GroupStructure(PTR, IDX, np.full(3, 0.01))
    shards = [_local(n=40) for _ in range(8)]
    cfg = ADMMConfig(lam=0.08, tol=1e-6, max_rounds=3000)
    results = run_in_process(
        graph, lambda comm: run_machine(comm, shards[comm.rank], groups, cfg, graph)
    )
    assert {r.rounds for r in results} == {results[0].rounds}
    assert results[0].stop_reason == "converged"
    zs = np.stack([r.z for r in results])
    assert np.abs(zs - zs.mean(0)).max() < 1e-4


def test_a_failing_machine_stops_the_in_process_network():
    graph = nx.cycle_graph(5)
    groups = GroupStructure(PTR, IDX, np.full(3, 0.01))
    shards = [_local(n=20) for _ in range(5)]
    cfg = ADMMConfig(lam=0.08, max_rounds=100, fail_at=(2, 3))
    with pytest.raises(RuntimeError, match="injected fault on machine 2 in round 3"):
        run_in_process(
            graph,
            lambda comm: run_machine(comm, shards[comm.rank], groups, cfg, graph),
            peer_timeout=30,
        )


def test_step_clock_charges_each_lap_to_its_step():
    ticks = iter([0.0, 1.0, 3.0, 7.0, 15.0, 31.0])
    clock = StepClock(lambda: next(ticks))
    clock.lap("z_step")  # 1 - 0
    clock.lap(None)  # 3 - 1: dropped (a communication call)
    clock.lap("theta_step")  # 7 - 3
    clock.lap("statistics")  # 15 - 7
    clock.lap("theta_step")  # 31 - 15
    assert clock.seconds == {"z_step": 1.0, "theta_step": 20.0, "statistics": 8.0}
