"""One run of the large-network sweep (benchmarks/large_network.py): synthetic model-III data
on J machines, privacy off, the columns centred and the penalty started as the job does under
label privacy, skglm's centralized optimum F*, one batched run; its rounds to the gap, stop,
graph facts, time, memory and traffic. Shared by the benchmark and tests/test_penalty.py."""

from __future__ import annotations

import math
import tracemalloc
import warnings
from typing import Any

import networkx as nx
import numpy as np

from devtools.convergence import batched_gaps, batched_to_optimum, first_round_within
from devtools.reference import group_logistic_objective, group_logistic_optimum
from dpnet.data import make_group_logistic, split_rows
from dpnet.decentralized import ADMMConfig, GroupStructure, LocalData, public_columns
from dpnet.decentralized.batched import run_batched
from dpnet.network import build_topology
from dpnet.penalties import groups_from_labels
from dpnet.privacy import LabelPrivacy

GAP = 1e-6

LAM = 0.1

N_GROUPS = 16


def one_run(
    topology: str,
    n_mach: int,
    rows: int,
    tol: float,
    max_rounds: int,
    seed: int,
    until_optimum: bool = True,
    **admm: Any,
) -> dict[str, Any]:
    """One batched run on the sweep's data; ``admm`` overrides ADMMConfig's defaults (the
    start's ``feature_curvature`` is the data's, as in the job). ``until_optimum``: also end
    once the gap is <= 1e-8 (else the run's own stop only)."""
    graph = build_topology(topology, n_mach, seed=seed)
    n = rows * n_mach
    data = make_group_logistic(n, n_groups=N_GROUPS, rng=np.random.default_rng(seed))
    parts = split_rows(n, n_mach, rng=np.random.default_rng(seed + 1))
    columns = public_columns(LabelPrivacy(math.inf), [data.X[p] for p in parts], n)
    assert columns is not None  # label privacy pools the columns' facts
    X = data.X - columns.shift  # the columns the machines fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta_star = group_logistic_optimum(X, data.y, data.groups, LAM)
    f_star = group_logistic_objective(X, data.y, data.groups, LAM, theta_star)
    grp_ptr, grp_indices = groups_from_labels(data.groups)
    groups = GroupStructure(grp_ptr, grp_indices, np.full(N_GROUPS, LAM / (2 * n_mach)))
    shards = [LocalData(np.hstack([X[p], np.ones((len(p), 1))]), data.y[p], n) for p in parts]
    config = ADMMConfig(
        lam=LAM,
        tol=tol,
        max_rounds=max_rounds,
        **({"feature_curvature": columns.curvature} | admm),
    )

    tracemalloc.start()
    tracemalloc.reset_peak()
    result = (
        batched_to_optimum(shards, groups, config, graph, f_star)
        if until_optimum
        else run_batched(shards, groups, config, graph)
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    gaps = batched_gaps(result, f_star)
    final = group_logistic_objective(X, data.y, data.groups, LAM, result.consensus)
    degrees = np.array([d for _, d in graph.degree()])
    return {
        "topology": topology,
        "machines": n_mach,
        "rows_per_machine": rows,
        "p": data.X.shape[1],
        "edges": graph.number_of_edges(),
        "mean_degree": float(degrees.mean()),
        "diameter": nx.diameter(graph),
        "algebraic_connectivity": float(
            nx.algebraic_connectivity(graph, method="tracemin_lu", seed=0)
        ),
        "rounds_to_gap": first_round_within(*gaps, GAP),
        "rounds": result.rounds,
        "stop_reason": result.stop_reason,
        "final_rel_gap": abs(final - f_star) / abs(f_star),
        "coef_error": float(np.abs(result.theta - theta_star).max()),  # worst machine, entry
        "c_final": result.c_final,
        "wall_s": result.seconds,
        "s_per_round": result.seconds / result.rounds,
        "peak_mem_mb": peak / 2**20,
        "bytes_per_machine_round_mean": float(result.bytes_per_round.mean()),
        "bytes_per_machine_round_max": int(result.bytes_per_round.max()),
    }
