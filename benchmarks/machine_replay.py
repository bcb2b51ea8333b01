"""Per-machine compute of the decentralized ADMM with every machine alone on a core: a replay.

    python -m benchmarks.machine_replay                      # paper 3's Table 1 runs
    python -m benchmarks.machine_replay --runs 20:complete --profile 0
    python -m benchmarks.machine_replay --gap 1e-6 --runs 1:complete 5:paper5

J machines sharing 2 cores (MPI ranks or threads) measure each other: a machine's CPU time per
round then includes the caches the other machines evicted, and at J = 20 on 2 cores that
triples it. Here the J machines of a job first run once as threads, and every buffer each
machine receives from its neighbours is recorded; then every machine's round loop runs again,
alone in this process (one BLAS thread), against a communicator that hands it the recorded
buffers. The replay is the same computation (its theta and round count are checked bitwise
against the recorded run), so its CPU time per round is what the machine spends on a core of
its own, without any waiting for messages. Per-machine compute to the gap (paper 3's Table
1; --gap, default 1e-4) = the slowest machine's replayed CPU seconds for the rounds up to the
gap: each machine replays its first "rounds to gap" rounds (the same computation:
max_rounds cuts the loop there), the median of --repeats such replays, taken machine after
machine in turn (a burst of the host's noise then falls on one replay of several machines,
not on every replay of one), as skglm's time is the median of its solves. Early rounds cost
more than the run's average (more Newton iterations, fresh Newton matrices); the CSV also
keeps the CPU per round over the whole recorded run.

The same rounds replayed once more with their flops counted (:mod:`devtools.flop_count`:
products with X~, Newton matrices, factors, solves) give the speed-up of the counted flops:
the machine with the most flops to the gap against J = 1's. It is exact and the same on any
host, and it bounds what any implementation of these iterations reaches at one flop rate
(elementwise work and edge arithmetic are left out, and a small shard runs BLAS slower).

Beside each run: skglm's GroupProxNewton on the same training rows, all on one node (one
thread, the loosest tolerance whose solution is within the gap: benchmarks/speed_vs_skglm.py),
timed twice in each repeat between the run's replays (this host's speed drifts by a third
over minutes, and skglm timed once before all runs moved every ratio with it), and the median
of its CPU times over the slowest machine's compute to the gap, to set beside paper 3's
Table 1 speed-ups (4.8 / 9.4 / 17.3 at J = 5 / 10 / 20).

The data and solver are the job's (``devtools.workloads.job_argv``: synthetic model III,
privacy off, default solver); ``--profile RANK`` prints cProfile's top functions of one
machine's replay. Writes benchmarks/out/machine_replay.csv.
"""

from __future__ import annotations

import argparse
from functools import partial

from benchmarks.common import OUT_DIR, write_csv
from benchmarks.speed_vs_skglm import skglm_solver, skglm_to_gap
from devtools.machine_replay import GAP, replay_job, training_rows

TABLE1_RUNS = ("1:complete", "5:paper5", "10:complete", "20:complete")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", default=list(TABLE1_RUNS), help="J:topology ...")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--n-groups", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gap", type=float, default=GAP)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", type=int, default=None, metavar="RANK")
    args = parser.parse_args()
    X, y, groups, lam = training_rows(args.n, args.n_groups, args.seed)
    sk = skglm_to_gap(X, y, groups, lam, args.gap, args.repeats)
    f_star = sk["f_star"]
    solve = skglm_solver(X, y, groups, lam)
    print(
        f"skglm (GroupProxNewton, one thread) reaches a {args.gap:g} gap at tol {sk['tol']:g} "
        f"on the same training rows ({sk['cpu_s'] * 1e3:.1f} ms CPU); each run times it again "
        "between its replays",
        flush=True,
    )
    rows = []
    for run in args.runs:
        J, topology = run.split(":")
        row = replay_job(
            args.n,
            args.n_groups,
            int(J),
            topology,
            args.seed,
            args.repeats,
            args.profile,
            f_star=f_star,
            gap=args.gap,
            reference=partial(solve, sk["tol"]),
        )
        first = rows[0] if rows else row
        row["gap"] = args.gap
        row["speed_up"] = first["compute_to_gap_s"] / row["compute_to_gap_s"]
        row["flop_speed_up"] = first["flops_to_gap"] / row["flops_to_gap"]
        row["skglm_cpu_to_gap_s"] = row.pop("reference_cpu_s")
        row["skglm_tol_at_gap"] = sk["tol"]
        row["speed_up_over_skglm"] = row["skglm_cpu_to_gap_s"] / row["compute_to_gap_s"]
        rows.append(row)
        print(
            f"J = {row['J']:3d} {topology:9s}: {row['rounds_to_gap']} rounds to the gap, slowest "
            f"machine {row['max_machine_replay_cpu_ms_per_round']:.3f} ms CPU per round alone "
            f"over the run, per-machine compute to the gap {row['compute_to_gap_s'] * 1e3:.1f} "
            f"ms: {row['speed_up_over_skglm']:.1f}x shorter than skglm's "
            f"{row['skglm_cpu_to_gap_s'] * 1e3:.1f} ms, speed-up over the "
            f"first run {row['speed_up']:.1f} (of the counted flops "
            f"{row['flops_to_gap'] / 1e6:.1f} MFLOP: {row['flop_speed_up']:.1f})",
            flush=True,
        )
    write_csv(rows, OUT_DIR / "machine_replay.csv")


if __name__ == "__main__":
    main()
