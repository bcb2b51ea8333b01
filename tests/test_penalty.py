"""The starting penalty from the graph's Laplacian spectrum, c_0 = kappa / (J sqrt(mu_2 mu_J)),
scaled under label privacy by the features' public curvature s,
c_0 = (kappa / 2) sqrt(s) (mu_2 / mu_J)^0.2 / (J sqrt(mu_2 mu_J)), unless c is given; and
residual balancing that waits for its changes to show (docs/algorithms.md)."""

from __future__ import annotations

import math
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest

from dpnet.data.partition import split_rows
from dpnet.data.synthetic import make_group_logistic
from dpnet.decentralized.admm import (
    NO_CHANGES,
    PENALTY_SCALE,
    ADMMConfig,
    initial_penalty,
    network_decision,
    record_change,
)
from dpnet.decentralized.batched import run_batched
from dpnet.decentralized.steps import GroupStructure, LocalData
from dpnet.network.topology import build_topology
from dpnet.penalties.group import groups_from_labels
from tests.reference import group_logistic_objective, group_logistic_optimum

LAM = 0.1


def _spectral(n_mach: int, mu_2: float, mu_max: float) -> float:
    return float(f"{PENALTY_SCALE / (n_mach * math.sqrt(mu_2 * mu_max)):.3g}")


@pytest.mark.parametrize(
    ("topology", "n_mach", "mu_2", "mu_max"),
    [
        # Laplacian spectra in closed form: cycle C_J 2 - 2 cos(2 pi k / J); complete K_J 0, J;
        # star K_{1,J-1} 0, 1, J; P_2 x P_3 grid: sums of the paths' 2 - 2 cos(pi k / n)
        ("ring", 8, 2 - 2 * math.cos(2 * math.pi / 8), 4.0),
        ("complete", 10, 10.0, 10.0),
        ("star", 4, 1.0, 4.0),
        ("grid", 6, 1.0, 5.0),
    ],
)
def test_spectral_start_by_hand(topology, n_mach, mu_2, mu_max):
    graph = build_topology(topology, n_mach)
    assert PENALTY_SCALE == 0.21
    assert initial_penalty(ADMMConfig(), graph) == _spectral(n_mach, mu_2, mu_max)
    assert initial_penalty(ADMMConfig(c=0.02), graph) == 0.02  # a given c is the start
    for curvature in (1.0, 17.3):
        scaled = ADMMConfig(feature_curvature=curvature)
        by_hand = (PENALTY_SCALE / 2 * math.sqrt(curvature) * (mu_2 / mu_max) ** 0.2) / (
            n_mach * math.sqrt(mu_2 * mu_max)
        )
        assert initial_penalty(scaled, graph) == float(f"{by_hand:.3g}")
        assert initial_penalty(replace(scaled, c=0.02), graph) == 0.02


def test_curvature_start_on_one_machine_and_on_binary_data():
    """J = 1: kappa sqrt(s) / 2; centred binary columns (s = 1) on a complete graph get half
    the spectral start, on the 256-ring 0.17 of that half."""
    one = build_topology("ring", 1)
    assert initial_penalty(ADMMConfig(feature_curvature=4.0), one) == PENALTY_SCALE
    binary = ADMMConfig(feature_curvature=1.0)
    complete = nx.complete_graph(20)
    assert initial_penalty(binary, complete) == pytest.approx(
        initial_penalty(ADMMConfig(), complete) / 2, rel=2e-3
    )
    ring = build_topology("ring", 256)
    ratio = initial_penalty(binary, ring) / (initial_penalty(ADMMConfig(), ring) / 2)
    assert ratio == pytest.approx(0.17, abs=0.01)


def test_spectral_start_is_the_degree_rule_on_complete_graphs_and_larger_on_long_cycles():
    """kappa / J^2 = kappa / (J + 2|E|) on K_J; on the 256-ring ~61x the degree rule."""
    for n_mach in (5, 20):
        rule = PENALTY_SCALE / (n_mach + n_mach * (n_mach - 1))
        assert initial_penalty(ADMMConfig(), nx.complete_graph(n_mach)) == pytest.approx(rule, 2e-3)
    ring = build_topology("ring", 256)
    assert initial_penalty(ADMMConfig(), ring) / (PENALTY_SCALE / (3 * 256)) == pytest.approx(
        61.1, abs=0.2
    )
    assert initial_penalty(ADMMConfig(), build_topology("ring", 1)) == PENALTY_SCALE


def test_a_disconnected_graph_is_refused():
    with pytest.raises(ValueError, match="not connected"):
        initial_penalty(ADMMConfig(), nx.Graph([(0, 1), (2, 3)]))


def _stats(primal: float, dual: float) -> np.ndarray:
    """Network statistics (objective, scaled residual, primal, dual, ||theta||)."""
    return np.array([1.0, 1e-3, primal, dual, 1.0])


def test_balancing_waits_for_its_changes_to_show():
    """At most ``adapt_unseen`` (2) unseen doublings: a change at the end of round t shows
    in the statistics of rounds > t only."""
    config = ADMMConfig()
    up = _stats(1.0, 1e-3)  # primal > 30 x dual: double
    assert network_decision(up, 40, config, NO_CHANGES) == (None, 2.0)
    one = record_change(NO_CHANGES, 45, 2.0)
    assert network_decision(up, 40, config, one) == (None, 2.0)
    two = record_change(one, 40, 2.0)  # made at the end of round 40: not in its statistics
    assert network_decision(up, 40, config, two) == (None, 1.0)
    assert network_decision(up, 50, config, two) == (None, 2.0)  # both seen by round 50
    # an unseen halving does not block a doubling, and the block is per direction
    halvings = record_change(record_change(NO_CHANGES, 41, 0.5), 42, 0.5)
    assert network_decision(up, 40, config, halvings) == (None, 2.0)
    assert network_decision(_stats(1e-3, 1.0), 40, config, halvings) == (None, 1.0)
    # inside the dead band (ratio 30) nothing changes
    assert network_decision(_stats(1.0, 0.05), 40, config, NO_CHANGES) == (None, 1.0)
    # at most adapt_max changes
    full = np.array([[r, 2.0] for r in range(config.adapt_max)], dtype=float)
    assert network_decision(up, 1000, config, full) == (None, 1.0)


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


def test_the_estimator_reports_its_penalty_from_the_features_curvature():
    """``penalty_``: on a complete graph of 4 (mu_2 = mu_J = 4) the start is
    0.105 sqrt(s) / 16, s = sigma_max([X - mean, 1])^2 / n (scipy), the same with either
    backend; a given c is the start."""
    from scipy.linalg import svdvals

    from dpnet.estimators import DecentralizedGroupLassoLogistic

    rng = np.random.default_rng(4)
    X = rng.standard_normal((400, 4)) @ rng.standard_normal((4, 4)) + 5.0
    y = (X[:, 0] - X[:, 2] + rng.standard_normal(400) > 0).astype(int)
    s = svdvals(np.hstack([X - X.mean(axis=0), np.ones((400, 1))]))[0] ** 2 / 400
    fits = [
        DecentralizedGroupLassoLogistic(
            n_machines=4, topology="complete", backend=backend, random_state=0
        ).fit(X, y)
        for backend in ("simulated", "threads")
    ]
    assert fits[0].penalty_ == fits[1].penalty_
    assert fits[0].penalty_["start"] == float(f"{0.105 * math.sqrt(s) / 16:.3g}")
    given = DecentralizedGroupLassoLogistic(n_machines=4, c=0.07, random_state=0).fit(X, y)
    assert given.penalty_["start"] == 0.07
