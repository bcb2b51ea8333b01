"""Rounds to a 1e-6 gap against algebraic connectivity, and per-machine compute against skglm,
for J in {16, 64, 256, 1000} machines (batched simulator, ~100 rows per machine).

    nice -n 10 python -m benchmarks.topology_sweep                          # the whole grid
    python -m benchmarks.topology_sweep --machines 16 64 --topologies ring grid --start curvature

For every (topology, J) and start (``--start``, both by default): the run of
``large_network.one_run`` (synthetic model-III data, p = 48, lambda = 0.1, centred columns,
default ADMM constants with residual balancing) from the curvature-scaled start (the default
under label privacy) or the spectral start c_0 (``feature_curvature=None``) on the same centred
data, and, side by side on the same rows, skglm's centralized GroupProxNewton
(``speed_vs_skglm.skglm_to_gap``).
Per-machine compute per round is estimated as the simulator's seconds per round / J (every
machine's share of the batched arrays); "ratio" = rounds to the gap x that / skglm's time to
the same gap. Writes benchmarks/out/topology_sweep.csv (column ``start``) and
topology_sweep_<start>.png.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from benchmarks.common import OUT_DIR, write_csv
from benchmarks.large_network import MACHINES, TOPOLOGIES, plot
from benchmarks.speed_vs_skglm import skglm_to_gap
from devtools.large_network import GAP, LAM, N_GROUPS, one_run
from dpnet.data import make_group_logistic

STARTS: dict[str, dict[str, Any]] = {"spectral": {"feature_curvature": None}, "curvature": {}}


def skglm_seconds(n: int, seed: int, repeats: int) -> tuple[float, float]:
    """skglm's wall seconds to a GAP solution and to tol 1e-12 on ``one_run``'s data."""
    data = make_group_logistic(n, n_groups=N_GROUPS, rng=np.random.default_rng(seed))
    sk = skglm_to_gap(data.X, data.y, data.groups, LAM, GAP, repeats)
    return sk["wall_s"], sk["wall_tightest_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, nargs="+", default=list(MACHINES))
    parser.add_argument("--topologies", nargs="+", default=list(TOPOLOGIES))
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--max-rounds", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="skglm timings (median)")
    parser.add_argument(
        "--start", choices=[*STARTS, "both"], default="both", help="the ADMM's starting penalty"
    )
    parser.add_argument("--output", default="topology_sweep")
    args = parser.parse_args()
    starts = list(STARTS) if args.start == "both" else [args.start]
    rows: list[dict[str, Any]] = []
    for n_mach in args.machines:
        sk_gap, sk_full = skglm_seconds(args.rows * n_mach, args.seed, args.repeats)
        for topo, start_name in ((t, s) for t in args.topologies for s in starts):
            start = time.perf_counter()
            row = {"start": start_name} | one_run(
                topo, n_mach, args.rows, 1e-8, args.max_rounds, args.seed, **STARTS[start_name]
            )
            machine_round = row["s_per_round"] / n_mach
            compute = (row["rounds_to_gap"] or np.nan) * machine_round
            row |= {
                "machine_compute_ms_per_round": machine_round * 1e3,
                "machine_compute_to_gap_s": compute,
                "skglm_to_gap_s": sk_gap,
                "skglm_tol_1e-12_s": sk_full,
                "ratio_to_skglm_gap": compute / sk_gap,
            }
            rows.append(row)
            print(
                f"{topo:>15} J={n_mach:5d} {start_name:>9} "
                f"lambda2={row['algebraic_connectivity']:.3g} "
                f"rounds_to_{GAP:g}={row['rounds_to_gap']} stop={row['rounds']} "
                f"{row['stop_reason']} c_final={row['c_final']:.3g} "
                f"bytes/machine/round={row['bytes_per_machine_round_mean']:.0f} "
                f"machine compute to gap {compute:.3f}s vs skglm {sk_gap:.3f}s "
                f"(ratio {row['ratio_to_skglm_gap']:.2f}) [{time.perf_counter() - start:.1f}s]",
                flush=True,
            )
            write_csv(rows, OUT_DIR / f"{args.output}.csv")
    for start_name in starts:
        plot([r for r in rows if r["start"] == start_name], f"{args.output}_{start_name}")


if __name__ == "__main__":
    main()
