"""Per-machine compute of the decentralized ADMM with every machine alone on a core: a replay.

    python -m benchmarks.machine_replay                      # paper 3's Table 1 runs
    python -m benchmarks.machine_replay --runs 20:complete --profile 0

J machines sharing 2 cores (MPI ranks or threads) measure each other: a machine's CPU time per
round then includes the caches the other machines evicted, and at J = 20 on 2 cores that
triples it. Here the J machines of a job first run once as threads, and every buffer each
machine receives from its neighbours is recorded; then every machine's round loop runs again,
alone in this process (one BLAS thread), against a communicator that hands it the recorded
buffers. The replay is the same computation (its theta and round count are checked bitwise
against the recorded run), so its CPU time per round is what the machine spends on a core of
its own, without any waiting for messages. Per-machine compute to the gap (paper 3's Table
1) = the slowest machine's replayed CPU seconds for the rounds up to the 1e-4 gap: each
machine replays its first "rounds to gap" rounds (the same computation: max_rounds cuts the
loop there), the fastest of --repeats such replays. Early rounds cost more than the run's
average (more Newton iterations, fresh Newton matrices); the CSV also keeps the CPU per round
over the whole recorded run.

The same rounds replayed once more with their flops counted (:mod:`devtools.flop_count`:
products with X~, Newton matrices, factors, solves) give the speed-up of the counted flops:
the machine with the most flops to the gap against J = 1's. It is exact and the same on any
host, and it bounds what any implementation of these iterations reaches at one flop rate
(elementwise work and edge arithmetic are left out, and a small shard runs BLAS slower).

The data and solver are the job's (``benchmarks.scaling.job_argv``: synthetic model III,
privacy off, default solver); ``--profile RANK`` prints cProfile's top functions of one
machine's replay. Writes benchmarks/out/machine_replay.csv.
"""

from __future__ import annotations

import argparse

from benchmarks.common import OUT_DIR, write_csv
from devtools.machine_replay import replay_job

TABLE1_RUNS = ("1:complete", "5:paper5", "10:complete", "20:complete")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", default=list(TABLE1_RUNS), help="J:topology ...")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--n-groups", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", type=int, default=None, metavar="RANK")
    args = parser.parse_args()
    rows = []
    for run in args.runs:
        J, topology = run.split(":")
        row = replay_job(
            args.n, args.n_groups, int(J), topology, args.seed, args.repeats, args.profile
        )
        first = rows[0] if rows else row
        row["speed_up"] = first["compute_to_gap_s"] / row["compute_to_gap_s"]
        row["flop_speed_up"] = first["flops_to_gap"] / row["flops_to_gap"]
        rows.append(row)
        print(
            f"J = {row['J']:3d} {topology:9s}: {row['rounds_to_gap']} rounds to gap, slowest "
            f"machine {row['max_machine_replay_cpu_ms_per_round']:.3f} ms CPU per round alone "
            f"over the run, per-machine compute to gap {row['compute_to_gap_s'] * 1e3:.1f} ms, "
            f"speed-up over the first run {row['speed_up']:.1f} (of the counted flops "
            f"{row['flops_to_gap'] / 1e6:.1f} MFLOP: {row['flop_speed_up']:.1f})",
            flush=True,
        )
    write_csv(rows, OUT_DIR / "machine_replay.csv")


if __name__ == "__main__":
    main()
