"""The starting penalty from the graph: c_0 = 0.3 / (J + 2|E|) unless c is given
(docs/algorithms.md)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from dpnet.data.partition import split_rows
from dpnet.data.synthetic import make_group_logistic
from dpnet.decentralized.admm import PENALTY_SCALE, ADMMConfig, initial_penalty
from dpnet.decentralized.batched import run_batched
from dpnet.decentralized.steps import GroupStructure, LocalData
from dpnet.network.topology import build_topology
from dpnet.penalties.group import groups_from_labels
from tests.reference import group_logistic_objective, group_logistic_optimum

LAM = 0.1


@pytest.mark.parametrize(
    ("topology", "n_mach", "closed_degrees"),
    [
        ("ring", 1, [1]),
        ("paper5", 5, [4, 3, 4, 3, 3]),  # 5-cycle + chord {0, 2}
        ("star", 4, [4, 2, 2, 2]),
        ("complete", 10, [10] * 10),
        ("grid", 6, [3, 4, 3, 3, 4, 3]),  # 2 x 3 grid
    ],
)
def test_graph_rule_by_hand(topology, n_mach, closed_degrees):
    """c_0 = kappa / sum_j d_j, d_j = |N_j| + 1: the number of constraints Z_j = theta_i."""
    graph = build_topology(topology, n_mach)
    assert PENALTY_SCALE == 0.3
    assert initial_penalty(ADMMConfig(), graph) == 0.3 / sum(closed_degrees)
    assert initial_penalty(ADMMConfig(c=0.02), graph) == 0.02  # a given c is the start


def _problem(n_mach: int, n: int, seed: int = 1):
    data = make_group_logistic(n, n_groups=16, rng=np.random.default_rng(seed))
    shards = [
        LocalData(np.hstack([data.X[p], np.ones((len(p), 1))]), data.y[p], n)
        for p in split_rows(n, n_mach)
    ]
    grp_ptr, grp_indices = groups_from_labels(data.groups)
    groups = GroupStructure(grp_ptr, grp_indices, np.full(16, LAM / (2 * n_mach)))
    theta = group_logistic_optimum(data.X, data.y, data.groups, LAM)
    return shards, groups, group_logistic_objective(data.X, data.y, data.groups, LAM, theta)


def _rounds_to_gap(n_mach: int, shards, groups, f_star: float, gap: float) -> int:
    """First round from which the network objective stays within ``gap`` (relative) of F*."""
    result = run_batched(
        shards,
        groups,
        ADMMConfig(lam=LAM, tol=1e-12, max_rounds=600),
        nx.complete_graph(n_mach),
        stop_when=lambda r: abs(r.objective - f_star) <= 0.1 * gap * abs(f_star),
    )
    assert result.stop_reason == "stop_when"
    gaps = np.array([abs(h.objective - f_star) / abs(f_star) for h in result.history])
    above = np.flatnonzero(gaps > gap)
    return int(result.history[above[-1] + 1].round) if len(above) else 1


def test_complete_graph_rounds_do_not_grow_with_the_degree():
    """Complete graphs J = 10 and 20 on the same 4,000 rows: rounds to a 1e-6 gap within 1.5x
    (with the former fixed c_0 = 0.005 they were 77 and 210 on paper 3's n = 1e4 data)."""
    n = 4000
    rounds = {}
    for n_mach in (10, 20):
        shards, groups, f_star = _problem(n_mach, n)
        rounds[n_mach] = _rounds_to_gap(n_mach, shards, groups, f_star, 1e-6)
    assert rounds[20] <= 1.5 * rounds[10], rounds
