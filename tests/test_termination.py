"""The stop statistics: exact network-wide aggregates, the same on every machine, in messages
whose size does not depend on the number of machines or the diameter."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from dpnet.decentralized import TreeAggregator, tree_plan
from dpnet.decentralized.termination import MESSAGE_SIZE, N_STATS, combine
from dpnet.network import run_in_process

ROUNDS = 40


def _stats(rank: int, t: int) -> np.ndarray:
    rng = np.random.default_rng([rank, t])
    return rng.standard_normal(N_STATS)


def _run(graph: nx.Graph) -> list[dict[int, np.ndarray]]:
    def machine(comm):
        agg = TreeAggregator(tree_plan(graph, comm.rank), comm.neighbours)
        seen = {}
        for t in range(1, ROUNDS + 1):
            received = comm.neighbour_exchange(agg.outgoing())
            assert received.shape == (len(comm.neighbours), MESSAGE_SIZE)
            agg.receive(t, _stats(comm.rank, t), received)
            g = agg.network_stats(t)
            if g is not None:
                seen[t - agg.plan.lag] = g
        return seen

    return run_in_process(graph, machine)


@pytest.mark.parametrize(
    "graph",
    [
        nx.path_graph(1),
        nx.path_graph(2),
        nx.cycle_graph(7),
        nx.path_graph(9),
        nx.star_graph(6),
        nx.complete_graph(5),
        nx.grid_2d_graph(3, 4),
        nx.random_regular_graph(3, 12, seed=1),
        nx.barbell_graph(4, 3),
    ],
    ids=lambda g: f"{g.number_of_nodes()}-{g.number_of_edges()}",
)
def test_every_machine_gets_the_exact_aggregate_of_round_t_minus_2h(graph):
    graph = nx.convert_node_labels_to_integers(graph)
    J = graph.number_of_nodes()
    height = tree_plan(graph, 0).height
    assert height <= nx.diameter(graph) <= 2 * height
    seen = _run(graph)
    expected_rounds = set(range(1, ROUNDS - 2 * height + 1))
    for machine in seen:
        assert set(machine) == expected_rounds
    for s in expected_rounds:
        all_stats = np.stack([_stats(j, s) for j in range(J)])
        truth = np.concatenate([[all_stats[:, 0].sum()], all_stats[:, 1:].max(axis=0)])
        for machine in seen:
            np.testing.assert_array_equal(machine[s], seen[0][s])  # bitwise the same everywhere
        np.testing.assert_allclose(seen[0][s], truth, rtol=1e-12, atol=1e-12)


def test_combine_sums_the_objective_in_row_order_and_takes_the_other_maxima():
    """Bit for bit the column sums (own first, then the rows in order) and the NaN-propagating
    maxima of the stacked rows; no children: own itself."""
    rng = np.random.default_rng(2)
    own, children = rng.standard_normal(N_STATS) * 1e3, rng.standard_normal((19, N_STATS))
    children[4, 3] = np.nan
    rows = np.vstack([own, children])
    want = np.concatenate([rows.sum(axis=0)[:1], rows.max(axis=0)[1:]])
    assert combine(own, children).tobytes() == want.tobytes()
    assert combine(own, children[:0]) is own


@pytest.mark.parametrize("graph", [nx.complete_graph(5), nx.path_graph(5)], ids=["K5", "P5"])
def test_a_restored_aggregator_sends_what_the_running_one_sends(graph):
    """Every round, an aggregator restored from the running one's state (a resumed run)
    sends bitwise its message: the root's U, known from its last receive, is not lost."""

    def machine(comm):
        agg = TreeAggregator(tree_plan(graph, comm.rank), comm.neighbours)
        for t in range(1, 12):
            restored = TreeAggregator(tree_plan(graph, comm.rank), comm.neighbours)
            restored.restore(agg.state())
            message = agg.outgoing()
            assert restored.outgoing().tobytes() == message.tobytes()
            agg.receive(t, _stats(comm.rank, t), comm.neighbour_exchange(message))

    run_in_process(graph, machine)


def test_nan_on_one_machine_reaches_everyone():
    graph = nx.cycle_graph(6)

    def machine(comm):
        agg = TreeAggregator(tree_plan(graph, comm.rank), comm.neighbours)
        out = []
        for t in range(1, 15):
            stats = _stats(comm.rank, t)
            if comm.rank == 4 and t == 3:
                stats[2] = np.nan
            agg.receive(t, stats, comm.neighbour_exchange(agg.outgoing()))
            g = agg.network_stats(t)
            out.append(None if g is None else bool(np.isfinite(g).all()))
        return out

    flags = run_in_process(graph, machine)
    assert all(f == flags[0] for f in flags)
    lag = 2 * tree_plan(graph, 0).height
    assert flags[0][3 + lag - 1] is False and flags[0][2 + lag - 1] is True


@pytest.mark.parametrize("n_machines", [8, 40])
def test_message_size_does_not_grow_with_the_network(n_machines):
    from dpnet.data import make_group_logistic
    from dpnet.estimators import DecentralizedGroupLassoLogistic

    data = make_group_logistic(20 * n_machines, rng=np.random.default_rng(0))
    model = DecentralizedGroupLassoLogistic(
        0.1,
        groups=data.groups,
        topology="ring",
        n_machines=n_machines,
        tol=1e-6,
        max_rounds=60,
        random_state=0,
    )
    model.fit(data.X, data.y)
    dim = data.n_features + 1
    # two exchanges per round: Z (dim floats), theta + statistics (dim + MESSAGE_SIZE floats)
    assert model.traffic_["bytes_per_message"] == 8 * (2 * dim + MESSAGE_SIZE) / 2
