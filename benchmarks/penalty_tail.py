"""Rounds to the job's own stop with and without the descent of c in the tail (batched simulator).

    nice -n 10 python -m benchmarks.penalty_tail                       # 12 graphs, seeds 0-2
    python -m benchmarks.penalty_tail --graphs ring:16 grid:64 --seeds 0

Residual balancing leaves c 8-64x above its start, where the tail is slow; the descent
(``ADMMConfig.descend_c``, docs/algorithms.md "The descent of c in the tail") halves it back
while the residual ratio says it helps. For every graph and data seed: one run with the
defaults and one with ``descend_c=False``, each to the default stop (tol 1e-9, at most
--max-rounds rounds), on ``large_network.one_run``'s data (synthetic model III, 100 rows per
machine, p = 48, lambda = 0.1, centred columns, the curvature-scaled start). Reported: rounds
to the stop, rounds to a 1e-6 gap of skglm's F*, the worst machine's largest coefficient error
against skglm's optimum at the stop, and the final c; then the totals and the ratio of rounds.
Writes benchmarks/out/penalty_tail.csv.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks.common import OUT_DIR, write_csv
from benchmarks.large_network import one_run
from dpnet.decentralized import ADMMConfig

GRAPHS = (
    "ring:16",
    "grid:16",
    "erdos-renyi:16",
    "random-regular:16",
    "complete:5",
    "complete:20",
    "ring:64",
    "grid:64",
    "small-world:64",
    "erdos-renyi:64",
    "random-regular:64",
    "random-regular:256",
)
RULES = {"balancing": {"descend_c": False}, "descent": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), help="topology:J ...")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--max-rounds", type=int, default=4000)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    totals = dict.fromkeys(RULES, 0)
    for seed in args.seeds:
        for graph in args.graphs:
            topology, n_mach = graph.split(":")
            start = time.perf_counter()
            runs = {
                rule: one_run(
                    topology,
                    int(n_mach),
                    args.rows,
                    ADMMConfig.tol,
                    args.max_rounds,
                    seed,
                    until_optimum=False,
                    **overrides,
                )
                for rule, overrides in RULES.items()
            }
            for rule, row in runs.items():
                totals[rule] += row["rounds"]
                rows.append({"rule": rule, "seed": seed} | row)
            old, new = runs["balancing"], runs["descent"]
            print(
                f"seed {seed} {topology:>14} J={n_mach:>4}: stop {old['rounds']:5d} -> "
                f"{new['rounds']:5d} ({old['rounds'] / new['rounds']:.2f}x; {new['stop_reason']})"
                f", 1e-6 gap {old['rounds_to_gap']} -> {new['rounds_to_gap']}, coefficient "
                f"error {old['coef_error']:.1e} -> {new['coef_error']:.1e}, c "
                f"{old['c_final']:.3g} -> {new['c_final']:.3g} "
                f"[{time.perf_counter() - start:.0f} s]",
                flush=True,
            )
            write_csv(rows, OUT_DIR / "penalty_tail.csv")
    old_total, new_total = totals["balancing"], totals["descent"]
    ratio = old_total / new_total
    print(f"rounds to the stop, all runs: {old_total} -> {new_total} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
