"""The release boundary end to end: with the randomized labels held fixed, changing one raw
label must not change one byte of what the job prints, writes or plots.

The job runs through ``tests.fixed_labels`` (the real CLI with randomized response replaced by
labels that do not depend on the raw ones, and a clock that reads 0). The oracle file, which
is outside the boundary, must change: that shows the changed label reached the job.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from dpnet.data import train_test_split_indices
from tests.launch import run_job

J = 5
N = 60
SEED = 3
TEST_FRACTION = 0.25


def _data(rng_seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(rng_seed)
    X = rng.standard_normal((N, 6))
    y = np.where(X[:, 0] - X[:, 2] + 0.5 * rng.standard_normal(N) > 0, 1.0, -1.0)
    return X, y, np.repeat(np.arange(3), 2)


def _release(workdir: Path, args: list[str], n_ranks: int | None) -> dict[str, bytes]:
    """Run in ``workdir`` (which holds the data) with relative paths, so that the two runs'
    command lines are equal; return every released byte string."""
    res = run_job(
        [
            *args,
            "--output",
            "r.json",
            "--plot",
            "conv.png",
            "--oracle-output",
            "oracle.json",
            "--progress-every",
            "20",
        ],
        n_ranks=n_ranks,
        module="tests.fixed_labels",
        cwd=workdir,
    )
    assert res.returncode == 0, res.stderr
    return {
        "stdout": res.stdout.encode(),
        "stderr": res.stderr.encode(),
        "json": (workdir / "r.json").read_bytes(),
        "plot": (workdir / "conv.png").read_bytes(),
        "oracle": (workdir / "oracle.json").read_bytes(),
    }


def _assert_same_release(a: dict[str, bytes], b: dict[str, bytes]) -> None:
    for key in ("stdout", "stderr", "json", "plot"):
        assert a[key] == b[key], f"{key} differs: the release depends on a raw label"
    assert a["oracle"] != b["oracle"], "the oracle file should see the changed raw label"
    report = json.loads(a["json"])
    assert report["stop_reason"] == "converged"
    assert "flipped" not in a["json"].decode() and "true_labels" not in a["json"].decode()


def _held_out_and_training_row() -> tuple[int, int]:
    """One row the job holds out and one it trains on (the split uses the seed's data stream,
    child 0, independent of the labels)."""
    rng = np.random.default_rng(np.random.SeedSequence(SEED).spawn(1)[0])
    train, test = train_test_split_indices(N, TEST_FRACTION, rng)
    return int(test[0]), int(train[0])


@pytest.mark.mpi_launch
@pytest.mark.parametrize("n_ranks", [None, J], ids=["inprocess", "mpiexec"])
@pytest.mark.parametrize("which", ["training row", "held-out row"])
def test_one_raw_label_changes_nothing_released_single_file(tmp_path, n_ranks, which):
    X, y, groups = _data()
    held_out, training = _held_out_and_training_row()
    row = held_out if which == "held-out row" else training
    y_changed = y.copy()
    y_changed[row] = -y_changed[row]
    for name, labels in (("a", y), ("b", y_changed)):
        (tmp_path / name).mkdir()
        np.savez(tmp_path / name / "d.npz", X=X, y=labels, groups=groups)
    args = [
        "--data",
        "d.npz",
        "--seed",
        str(SEED),
        "--epsilon",
        "1",
        "--test-fraction",
        str(TEST_FRACTION),
        "--machines",
        str(J),
    ]
    a, b = (_release(tmp_path / name, args, n_ranks) for name in ("a", "b"))
    _assert_same_release(a, b)
    accuracy = json.loads(a["json"])["test_accuracy"]
    assert accuracy["source"] == "randomized held-out labels" and accuracy["n"] == 15


@pytest.mark.mpi_launch
@pytest.mark.parametrize("n_ranks", [None, J], ids=["inprocess", "mpiexec"])
def test_single_class_machine_runs_and_one_label_changes_nothing(tmp_path, n_ranks):
    """Machine 2 holds only +1 labels; flipping one of them to -1 (now two classes) must
    neither stop the job nor change its release."""
    X, y, groups = _data(1)
    parts = np.array_split(np.arange(N), J)
    y = y.copy()
    y[parts[2]] = 1.0
    for name, labels in (("a", y), ("b", np.where(np.arange(N) == parts[2][3], -1.0, y))):
        (tmp_path / name).mkdir()
        for j, idx in enumerate(parts):
            np.savez(tmp_path / name / f"part-{j}.npz", X=X[idx], y=labels[idx], groups=groups)
    args = [
        "--data",
        "part-{rank}.npz",
        "--seed",
        str(SEED),
        "--epsilon",
        "1",
        "--machines",
        str(J),
    ]
    a, b = (_release(tmp_path / name, args, n_ranks) for name in ("a", "b"))
    _assert_same_release(a, b)
    assert json.loads(a["json"])["data_layout"] == "each machine loaded its own file"


def test_out_of_domain_label_message_names_row_not_value(tmp_path):
    X, y, groups = _data()
    y_bad = y.copy()
    y_bad[7] = 37.0
    np.savez(tmp_path / "bad.npz", X=X, y=y_bad, groups=groups)
    res = run_job(["--data", str(tmp_path / "bad.npz"), "--machines", str(J)], timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    line = res.stderr.strip()
    assert "outside the label domain" in line and "data row 8" in line
    assert "37" not in line.replace(str(tmp_path), "")
    ok = run_job(
        ["--data", str(tmp_path / "bad.npz"), "--machines", str(J), "--quiet", "--labels=-1,37"],
        timeout=60,
    )
    assert ok.returncode != 0  # now the -1/+1 rows are the problem: +1 is not in {-1, 37}
    assert "outside the label domain" in ok.stderr


def test_results_file_is_world_readable(tmp_path):
    res = run_job(
        ["--n-samples", "200", "--n-test", "50", "--quiet", "--output", str(tmp_path / "r.json")],
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644 & ~umask
