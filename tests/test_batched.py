"""The batched simulator (all machines as arrays) against the round loop run in process."""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pytest

from devtools.reference import group_logistic_objective, group_logistic_optimum
from dpnet.data import make_group_logistic, split_rows
from dpnet.decentralized import (
    ADMMConfig,
    GroupStructure,
    LocalData,
    NewtonThetaStep,
    StackedShards,
    run_machine,
)
from dpnet.decentralized.batched import run_batched
from dpnet.decentralized.block import BlockEdges, network_sum, tree_sum
from dpnet.decentralized.theta import NO_ANCHORS
from dpnet.losses import Logistic, MarginLoss, UnbiasedLogistic
from dpnet.network import build_topology, run_in_process
from dpnet.penalties import groups_from_labels

LAM = 0.1


def _problem(
    n_mach: int,
    rows: int,
    *,
    n_groups: int = 8,
    seed: int = 0,
    sizes: list[int] | None = None,
    loss: MarginLoss | None = None,
):
    n = sum(sizes) if sizes else n_mach * rows
    data = make_group_logistic(n, n_groups=n_groups, rng=np.random.default_rng(seed))
    parts = split_rows(n, n_mach, sizes=sizes, rng=np.random.default_rng(seed + 1))
    shards = [
        LocalData(np.hstack([data.X[p], np.ones((len(p), 1))]), data.y[p], n, loss or Logistic())
        for p in parts
    ]
    grp_ptr, grp_indices = groups_from_labels(data.groups)
    groups = GroupStructure(grp_ptr, grp_indices, np.full(n_groups, LAM / (2 * n_mach)))
    return data, shards, groups


def _round_loop(graph, shards, groups, config):
    return run_in_process(
        graph, lambda comm: run_machine(comm, shards[comm.rank], groups, config, graph)
    )


def _assert_equal_runs(reference, batched):
    assert batched.rounds == reference[0].rounds
    assert batched.stop_reason == reference[0].stop_reason
    # the same changes of c (balancing, and the descent's on the 8-machine graphs)
    assert np.array_equal(batched.penalty.changes, reference[0].penalty.changes)
    theta = np.stack([r.theta for r in reference])
    z = np.stack([r.z for r in reference])
    assert np.abs(theta - batched.theta).max() <= 1e-10
    assert np.abs(z - batched.z).max() <= 1e-10


@pytest.mark.parametrize(
    ("topology", "n_mach"),
    [
        ("ring", 1),
        ("ring", 5),
        ("paper5", 5),
        ("star", 5),
        ("grid", 8),
        ("ring", 8),
        ("star", 8),
    ],
)
def test_batched_equals_the_round_loop(topology, n_mach):
    graph = build_topology(topology, n_mach)
    _, shards, groups = _problem(n_mach, 60)
    config = ADMMConfig(lam=LAM, adapt_c=True, max_rounds=3000)
    reference = _round_loop(graph, shards, groups, config)
    batched = run_batched(shards, groups, config, graph)
    assert batched.stop_reason == "converged"
    _assert_equal_runs(reference, batched)
    # the traffic the round loop counted, per machine and round
    sent = np.array([r.traffic["bytes_sent"] for r in reference]) / reference[0].rounds
    assert np.array_equal(sent, batched.bytes_per_round)


def test_unequal_shards_and_the_unbiased_loss_equal_the_round_loop():
    """Padded rows of zero weight; the Natarajan loss; a path (H = 3) and no adaptation."""
    graph = nx.path_graph(6)
    _, shards, groups = _problem(6, 0, sizes=[40, 75, 52, 60, 90, 45], loss=UnbiasedLogistic(0.9))
    config = ADMMConfig(lam=LAM, adapt_c=False, c=0.01, max_rounds=400)
    _assert_equal_runs(
        _round_loop(graph, shards, groups, config), run_batched(shards, groups, config, graph)
    )


@pytest.mark.parametrize("relaxation", [1.0, 1.8])
def test_plain_and_other_relaxations_equal_the_round_loop(relaxation: float) -> None:
    """alpha = 1 (plain ADMM, no relaxed copies) and a stronger over-relaxation."""
    graph = build_topology("ring", 5)
    _, shards, groups = _problem(5, 300)
    config = ADMMConfig(lam=LAM, relaxation=relaxation, max_rounds=300)
    _assert_equal_runs(
        _round_loop(graph, shards, groups, config), run_batched(shards, groups, config, graph)
    )


def test_batched_theta_step_follows_each_machines_own_newton_sequence():
    """Starting points far and near the solution: different iteration and halving counts."""
    rng = np.random.default_rng(5)
    _, shards, _ = _problem(6, 50)
    data = StackedShards.stack(shards)
    dim = data.X.shape[2]
    center = rng.standard_normal((6, dim)) * 0.3
    rho = np.array([0.005, 0.01, 0.02, 0.015, 0.1, 1.0])
    start = rng.standard_normal((6, dim)) * np.array([0.0, 3.0, 0.1, 10.0, 1.0, 0.0])[:, None]
    none = np.empty((0, 0))
    got = NewtonThetaStep(data, start, NO_ANCHORS, none)(center, rho, start).theta
    for j, shard in enumerate(shards):  # each machine alone: a block of one
        alone = NewtonThetaStep(StackedShards.one(shard), start[j : j + 1], NO_ANCHORS, none)
        want = alone(center[j : j + 1], rho[j : j + 1], start[j : j + 1]).theta[0]
        assert np.abs(want - got[j]).max() <= 1e-12


def test_edge_index_reverse_and_degrees():
    graph = build_topology("paper5", 5)
    edges = BlockEdges.of(graph)
    assert np.array_equal(edges.row[edges.rev], edges.col)
    assert np.array_equal(edges.col[edges.rev], edges.row)
    assert edges.degree.tolist() == [4, 3, 4, 3, 3]  # closed neighbourhoods


def test_non_finite_input_stops_at_the_round_loops_round():
    """Features of 1e200 on one machine overflow: 'non-finite' in the same round."""
    graph = nx.cycle_graph(4)
    rng = np.random.default_rng(0)
    grp_ptr, grp_indices = groups_from_labels(np.arange(3))
    groups = GroupStructure(grp_ptr, grp_indices, np.full(3, 0.01))
    y = np.where(np.arange(10) % 2 == 0, 1.0, -1.0)
    shards = [
        LocalData(
            np.hstack(
                [rng.standard_normal((10, 3)) * (1e200 if j == 2 else 1.0), np.ones((10, 1))]
            ),
            y,
            40,
        )
        for j in range(4)
    ]
    config = ADMMConfig(lam=0.1, max_rounds=500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        reference = _round_loop(graph, shards, groups, config)
        batched = run_batched(shards, groups, config, graph)
    assert {r.stop_reason for r in reference} == {"non-finite"}
    assert batched.stop_reason == "non-finite"
    assert batched.rounds == reference[0].rounds < 20


@pytest.mark.slow
def test_200_machines_reach_the_centralized_optimum():
    n_mach = 200
    graph = build_topology("random-regular", n_mach, seed=0)
    data, shards, groups = _problem(n_mach, 40, n_groups=6, seed=2)
    result = run_batched(shards, groups, ADMMConfig(lam=LAM, tol=1e-6, max_rounds=2000), graph)
    assert result.stop_reason == "converged"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta_star = group_logistic_optimum(data.X, data.y, data.groups, LAM)
    f_star = group_logistic_objective(data.X, data.y, data.groups, LAM, theta_star)
    for z in (result.consensus, result.z[0], result.z[-1]):
        gap = group_logistic_objective(data.X, data.y, data.groups, LAM, z) - f_star
        assert abs(gap) / f_star < 1e-5


@pytest.mark.parametrize("topology", ["paper5", "star", "grid"])
def test_tree_sum_is_bitwise_the_round_loops_network_sum(topology):
    """The simulator's network sums (CV fold sizes, lambda_max, scores) add in the spanning
    tree's order: bitwise what every machine of the round loop holds."""
    n_mach = 5 if topology == "paper5" else 8
    graph = build_topology(topology, n_mach)
    values = np.random.default_rng(1).standard_normal((n_mach, 3, 4)) * 10.0 ** np.arange(4)
    held = run_in_process(graph, lambda comm: network_sum(comm, graph, values[comm.rank]))
    total = tree_sum(graph, values)
    assert all(np.array_equal(h, total) for h in held)
    assert np.allclose(total, values.sum(axis=0), rtol=1e-14)


def test_machines_write_their_rows_into_the_stack_once() -> None:
    """fit_private_block's path: each machine's X~ written into its row of the block's
    designs, so the stack is those rows (no copy), padded with zeros; a shard whose X~ is
    not its row is refused."""
    rng = np.random.default_rng(0)
    sizes, dim = [3, 5, 4], 4
    designs = StackedShards.designs(sizes, dim)
    assert designs is not None and designs.shape == (3, 5, dim)
    assert StackedShards.designs([7], dim) is None  # a block of one views its own X~
    shards = []
    for j, n in enumerate(sizes):
        designs[j, :n] = rng.standard_normal((n, dim))
        shards.append(LocalData(designs[j, :n], np.ones(n), sum(sizes)))
    copied = StackedShards.stack(shards)
    stacked = StackedShards.stack(shards, designs)
    assert stacked.X is designs
    assert np.array_equal(stacked.X, copied.X) and np.array_equal(stacked.mask, copied.mask)
    own = [LocalData(s.X_aug.copy(), s.y, s.n_total) for s in shards]
    with pytest.raises(ValueError, match="not row 0"):
        StackedShards.stack(own, designs)
