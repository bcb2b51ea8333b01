"""Large networks with the batched simulator (dpnet.decentralized.batched): J up to 1,000.

    nice -n 10 python -m benchmarks.large_network                      # the default grid
    python -m benchmarks.large_network --machines 16 64 --topologies ring grid

For every (topology, J): synthetic model-III data (p = 48, 16 groups), ``--rows`` rows per
machine, privacy off, the columns centred and the penalty started as the job does under label
privacy (``columns.PublicColumns``: the columns' mean and curvature); skglm's centralized
optimum F* on all rows (tests/reference.py); one batched run (tol --tol, at most
--max-rounds rounds). Reported: rounds until the network
objective (sum of the machines' local objectives, as in the round loop's history) stays within
a relative gap of 1e-6 of F* (a run ends at tol, at the round cap, or once the gap is <= 1e-8),
the stop round and reason, the algebraic connectivity of the graph
(networkx, Laplacian), wall time, peak traced memory (tracemalloc) and the bytes each machine
would send per round on a real network. Writes benchmarks/out/large_network.csv (one row per
run, appended as it goes) and large_network.png (rounds vs algebraic connectivity).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings
from typing import Any

import networkx as nx
import numpy as np

from benchmarks.common import (
    OUT_DIR,
    batched_gaps,
    batched_to_optimum,
    first_round_within,
    write_csv,
)
from dpnet.data.partition import split_rows
from dpnet.data.synthetic import make_group_logistic
from dpnet.decentralized.admm import ADMMConfig
from dpnet.decentralized.batched import run_batched
from dpnet.decentralized.columns import public_columns
from dpnet.decentralized.steps import GroupStructure, LocalData
from dpnet.network.topology import build_topology
from dpnet.penalties.group import groups_from_labels
from dpnet.privacy.modes import LabelPrivacy
from tests.reference import group_logistic_objective, group_logistic_optimum

GAP = 1e-6
LAM = 0.1
N_GROUPS = 16
TOPOLOGIES = ("ring", "grid", "erdos-renyi", "small-world", "random-regular")
MACHINES = (16, 64, 256, 1000)


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
    columns = public_columns(LabelPrivacy(), [data.X[p] for p in parts], n)
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


def plot(rows: list[dict[str, Any]], name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for topo in dict.fromkeys(r["topology"] for r in rows):
        pts = [
            (
                r["algebraic_connectivity"],
                r["rounds_to_gap"] or r["rounds"],
                r["rounds_to_gap"] is None,
                r["machines"],
            )
            for r in rows
            if r["topology"] == topo
        ]
        line = ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=topo)[0]
        for x, y, capped, n_mach in pts:
            ax.annotate(str(n_mach), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
            if capped:
                ax.plot([x], [y], marker="^", color=line.get_color(), markersize=10)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("algebraic connectivity (Laplacian)")
    ax.set_ylabel(f"rounds to a relative gap of {GAP:g}")
    ax.set_title("batched ADMM, ~100 rows per machine (labels: J; triangle: cap hit)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT_DIR / f"{name}.png", dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, nargs="+", default=list(MACHINES))
    parser.add_argument("--topologies", nargs="+", default=list(TOPOLOGIES))
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--tol", type=float, default=1e-8)
    parser.add_argument("--max-rounds", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="large_network")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for n_mach in args.machines:
        for topo in args.topologies:
            start = time.perf_counter()
            row = one_run(topo, n_mach, args.rows, args.tol, args.max_rounds, args.seed)
            rows.append(row)
            print(
                f"{topo:>15} J={n_mach:5d} lambda2={row['algebraic_connectivity']:.3g} "
                f"rounds_to_1e-6={row['rounds_to_gap']} stop={row['rounds']} "
                f"{row['stop_reason']} {row['wall_s']:.1f}s ({row['s_per_round'] * 1e3:.1f} "
                f"ms/round) peak={row['peak_mem_mb']:.0f}MB "
                f"bytes/machine/round={row['bytes_per_machine_round_mean']:.0f} "
                f"[total {time.perf_counter() - start:.1f}s]",
                flush=True,
            )
            write_csv(rows, OUT_DIR / f"{args.output}.csv")
    plot(rows, args.output)


if __name__ == "__main__":
    main()
