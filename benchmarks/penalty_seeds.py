"""Rounds to a 1e-6 gap under four penalty schemes, over data seeds (batched simulator).

    nice -n 10 python -m benchmarks.penalty_seeds                      # 256-ring, seeds 0-5
    python -m benchmarks.penalty_seeds --topology grid --machines 64 --seeds 0 1 2

Schemes (docs/algorithms.md, "The penalty c"):
- ``former``: fixed start c_0 = 0.005, no over-relaxation, residual balancing with a band of 10
  and no wait (the code when the scale issue was filed);
- ``degree-rule``: c_0 = 0.3 / (J + 2|E|), over-relaxation 1.5, band 10, no wait;
- ``spectral``: the defaults (band 30, at most 2 unseen changes per direction) from the spectral
  start 0.21 / (J sqrt(mu_2 mu_J)) (``feature_curvature=None``);
- ``now``: the defaults, from the curvature-scaled start (the job's under label privacy).

Data and graphs are ``large_network.one_run``'s (synthetic model-III, 100 rows per machine,
p = 48, lambda = 0.1, centred columns, graph and data from the seed); ``former`` and
``degree-rule`` set c, so the curvature does not move them. Writes benchmarks/out/penalty_seeds.csv.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks.common import OUT_DIR, write_csv
from benchmarks.large_network import one_run
from dpnet.network import build_topology

NO_WAIT = 1000  # adapt_unseen above adapt_max: the wait never binds


def schemes(topology: str, n_mach: int, seed: int) -> dict[str, dict[str, Any]]:
    """ADMMConfig overrides of each scheme on ``one_run``'s graph for ``seed``."""
    graph = build_topology(topology, n_mach, seed=seed)
    degree_rule = 0.3 / (n_mach + 2 * graph.number_of_edges())
    old_balancing = {"adapt_ratio": 10.0, "adapt_unseen": NO_WAIT}
    return {
        "former": {"c": 0.005, "relaxation": 1.0, **old_balancing},
        "degree-rule": {"c": degree_rule, **old_balancing},
        "spectral": {"feature_curvature": None},
        "now": {},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", default="ring")
    parser.add_argument("--machines", type=int, default=256)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(6)))
    parser.add_argument(
        "--schemes", nargs="+", default=["former", "degree-rule", "spectral", "now"]
    )
    parser.add_argument("--max-rounds", type=int, default=3000)
    parser.add_argument("--output", default="penalty_seeds")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for seed in args.seeds:
        for name in args.schemes:
            start = time.perf_counter()
            overrides = schemes(args.topology, args.machines, seed)[name]
            row = one_run(
                args.topology, args.machines, 100, 1e-8, args.max_rounds, seed, **overrides
            )
            rows.append({"scheme": name, "seed": seed} | row)
            print(
                f"{args.topology} J={args.machines} seed {seed} {name:>11}: rounds to 1e-6 "
                f"{row['rounds_to_gap']} (stop {row['rounds']}, {row['stop_reason']}, "
                f"c_final {row['c_final']:.3g}) [{time.perf_counter() - start:.0f} s]",
                flush=True,
            )
            write_csv(rows, OUT_DIR / f"{args.output}.csv")


if __name__ == "__main__":
    main()
