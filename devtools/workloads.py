"""The main job's synthetic workload as command-line options (model III, privacy off, the
default solver): shared by the benchmarks and the replay (devtools/machine_replay.py)."""

from __future__ import annotations


def job_argv(n: int, n_groups: int, seed: int, tol: float, max_rounds: int) -> list[str]:
    return [
        "--n-samples",
        str(n),
        "--n-groups",
        str(n_groups),
        "--n-test",
        "2000",
        "--seed",
        str(seed),
        "--tol",
        str(tol),
        "--max-rounds",
        str(max_rounds),
        "--progress-every",
        "1",
        "--epsilon",
        "inf",  # privacy off, asked for: the non-private comparisons (default: epsilon 1)
    ]
