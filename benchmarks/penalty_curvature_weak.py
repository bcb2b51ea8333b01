"""Curvature-scaled starting penalties in weak scaling: rounds to the 1e-4 and 1e-6 gaps on the
data of docs/algorithms.md's topology tables (batched simulator).

    nice -n 19 python -m benchmarks.penalty_curvature_weak              # the docs' table
    python -m benchmarks.penalty_curvature_weak --runs 256:ring --seeds 0 1 2 --rules spectral sqrtL

The data and graphs are ``benchmarks.large_network.one_run``'s (``topology_sweep`` and
``penalty_seeds``): synthetic model III, 100 rows per machine, p = 48 in 16 groups,
lambda = 0.1, graph and data drawn from the seed, the columns as generated (not centred, as in
those tables; ``--centre`` fits them centred, as the job does under label privacy). The
rules are ``benchmarks.penalty_strong_scaling.RULES``; their curvature measures are computed
from the features only (centred, all rows), each start rounded to 3 significant digits and
given as ``--c``; balancing and over-relaxation as by default. Reported: rounds from which the
network objective stays within 1e-4 / 1e-6 of the centralized optimum (runs end at a 1e-8 gap
or ``--max-rounds``; tol 1e-8 as in ``one_run``) and a table of seed means. Writes
benchmarks/out/<--output>.csv.
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np

from benchmarks.common import (
    OUT_DIR,
    batched_gaps,
    batched_to_optimum,
    first_round_within,
    write_csv,
)
from benchmarks.penalty_strong_scaling import GAPS, RULES, Curvature, fmt
from devtools.large_network import LAM, N_GROUPS
from devtools.reference import group_logistic_objective, group_logistic_optimum
from dpnet.data import make_group_logistic, split_rows
from dpnet.decentralized import ADMMConfig, GroupStructure, LocalData
from dpnet.network import build_topology
from dpnet.penalties import groups_from_labels

RUNS = (
    "16:ring",
    "64:ring",
    "256:ring",
    "16:grid",
    "64:grid",
    "256:grid",
    "64:erdos-renyi",
    "64:random-regular",
)
ROWS = 100


def run(spec: str, seed: int, rules: list[str], centre: bool, max_rounds: int) -> list[dict]:
    """One data draw and graph of ``one_run``; a batched run per distinct start."""
    n_mach, topology = int(spec.split(":")[0]), spec.split(":")[1]
    graph = build_topology(topology, n_mach, seed=seed)
    n = ROWS * n_mach
    data = make_group_logistic(n, n_groups=N_GROUPS, rng=np.random.default_rng(seed))
    X = data.X - data.X.mean(axis=0) if centre else data.X
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta_star = group_logistic_optimum(X, data.y, data.groups, LAM)
    f_star = group_logistic_objective(X, data.y, data.groups, LAM, theta_star)
    curvature = Curvature.of(data.X)
    grp_ptr, grp_indices = groups_from_labels(data.groups)
    groups = GroupStructure(grp_ptr, grp_indices, np.full(N_GROUPS, LAM / (2 * n_mach)))
    shards = [
        LocalData(np.hstack([X[p], np.ones((len(p), 1))]), data.y[p], n)
        for p in split_rows(n, n_mach, rng=np.random.default_rng(seed + 1))
    ]
    out, done = [], {}
    for rule in rules:
        start = time.perf_counter()
        c0 = float(f"{RULES[rule](graph, curvature):.3g}")
        if c0 not in done:
            config = ADMMConfig(lam=LAM, tol=1e-8, max_rounds=max_rounds, c=c0)  # as one_run
            result = batched_to_optimum(shards, groups, config, graph, f_star)
            gaps = batched_gaps(result, f_star)
            done[c0] = {f"rounds_to_{g:g}": first_round_within(*gaps, g) for g in GAPS} | {
                "rounds": result.rounds,
                "c_final": result.c_final,
                "adapted": result.n_adapted,
            }
        out.append(
            {"data": "model-III", "seed": seed, "J": n_mach, "topology": topology}
            | {"rows_per_machine": ROWS, "centred": centre, "rule": rule, "c0": c0}
            | {f"curvature_{k}": v for k, v in vars(curvature).items()}
            | done[c0]
            | {"seconds": time.perf_counter() - start}
        )
    return out


def main() -> None:
    from benchmarks.penalty_strong_scaling import markdown

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=list(RUNS), help="J:topology")
    parser.add_argument(
        "--rules", nargs="+", default=["spectral", "sqrtL", "sqrtL-spec", "sqrtL-spec0.2"]
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--centre", action="store_true", help="fit centred columns")
    parser.add_argument("--max-rounds", type=int, default=3000)
    parser.add_argument("--output", default="penalty_curvature_weak")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for spec in args.runs:
        for seed in args.seeds:
            got = run(spec, seed, args.rules, args.centre, args.max_rounds)
            rows += got
            print(
                f"seed {seed} {spec:>16} "
                + "  ".join(
                    f"{r['rule']} c0={r['c0']:.3g}: {fmt(r['rounds_to_0.0001'])}/"
                    f"{fmt(r['rounds_to_1e-06'])}"
                    for r in got
                ),
                flush=True,
            )
            write_csv(rows, OUT_DIR / f"{args.output}.csv")
    print(markdown(rows))


if __name__ == "__main__":
    main()
