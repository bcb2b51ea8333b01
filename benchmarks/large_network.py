"""Large networks with the batched simulator (dpnet.decentralized.batched): J up to 1,000.

    nice -n 10 python -m benchmarks.large_network                      # the default grid
    python -m benchmarks.large_network --machines 16 64 --topologies ring grid

For every (topology, J): synthetic model-III data (p = 48, 16 groups), ``--rows`` rows per
machine, privacy off, the columns centred and the penalty started as the job does under label
privacy (``columns.PublicColumns``: the columns' mean and curvature); skglm's centralized
optimum F* on all rows (devtools/reference.py); one batched run (tol --tol, at most
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
from typing import Any

from benchmarks.common import (
    OUT_DIR,
    write_csv,
)
from devtools.large_network import GAP, one_run

TOPOLOGIES = ("ring", "grid", "erdos-renyi", "small-world", "random-regular")
MACHINES = (16, 64, 256, 1000)


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
