"""The replay of benchmarks/machine_replay.py is the recorded run: each machine, alone against
its neighbours' recorded buffers, ends with bitwise the same theta after the same rounds (the
benchmark raises otherwise), so its CPU time is that run's per-machine compute."""

import math

from devtools.machine_replay import replay_job


def test_every_machine_replays_its_recorded_run() -> None:
    row = replay_job(2_000, 6, 4, "ring", seed=3, repeats=1, f_star=1.0)
    assert row["J"] == 4 and row["rounds"] > 5
    assert (
        row["max_machine_replay_cpu_ms_per_round"]
        >= row["median_machine_replay_cpu_ms_per_round"]
        > 0
    )
    assert row["rounds_to_gap"] is None and math.isnan(row["compute_to_gap_s"])


def test_compute_to_the_gap_replays_the_rounds_to_the_gap() -> None:
    """With skglm's optimum the run has a round from which the 1e-4 gap holds; the compute to
    it is the CPU of those rounds replayed (less than the whole run's)."""
    row = replay_job(2_000, 6, 3, "complete", seed=3, repeats=1)
    assert row["rounds_to_gap"] is not None and 1 <= row["rounds_to_gap"] < row["rounds"]
    whole = row["max_machine_replay_cpu_ms_per_round"] * 1e-3 * row["rounds"]
    assert 0 < row["compute_to_gap_s"] < whole
