"""The main job under mpiexec: same numbers as in-process, optimum reached, clean failures."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from devtools.reference import group_logistic_objective, group_logistic_optimum
from dpnet.data import load_dataset
from tests.launch import run_job

pytestmark = pytest.mark.mpi_launch


def _load(path):
    return json.loads(path.read_text())


def test_mpi_and_inprocess_give_identical_results(tmp_path):
    args = ["--seed", "7", "--epsilon", "1.0", "--n-samples", "600", "--quiet"]
    mpi = run_job([*args, "--output", str(tmp_path / "mpi.json")], n_ranks=5)
    assert mpi.returncode == 0, mpi.stderr
    local = run_job([*args, "--machines", "5", "--output", str(tmp_path / "local.json")])
    assert local.returncode == 0, local.stderr
    a, b = _load(tmp_path / "mpi.json"), _load(tmp_path / "local.json")
    assert a["backend"] == "mpi" and b["backend"] == "threads"
    assert a["coef"] == b["coef"] and a["intercept"] == b["intercept"]
    assert a["rounds"] == b["rounds"]
    assert a["test_accuracy"] == b["test_accuracy"]
    assert a["privacy"]["ledger"] == b["privacy"]["ledger"]


def test_mpi_ring8_reaches_the_centralized_optimum(tmp_path):
    rng = np.random.default_rng(11)
    n, p = 640, 12
    X = rng.standard_normal((n, p))
    logits = X[:, :3] @ np.array([1.5, -1.0, 0.5]) + 0.3
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-logits)), 1.0, -1.0)
    groups = np.repeat(np.arange(4), 3)
    np.savez(tmp_path / "d.npz", X=X, y=y, groups=groups)
    lam = 0.1
    res = run_job(
        [
            "--data",
            str(tmp_path / "d.npz"),
            "--test-fraction",
            "0",
            "--topology",
            "ring",
            "--lam",
            str(lam),
            "--seed",
            "1",
            "--epsilon",
            "inf",  # the labels as given: the centralized optimum is the reference
            "--quiet",
            "--output",
            str(tmp_path / "r.json"),
        ],
        n_ranks=8,
    )
    assert res.returncode == 0, res.stderr
    report = _load(tmp_path / "r.json")
    data = load_dataset(tmp_path / "d.npz")
    theta_star = group_logistic_optimum(data.X, data.y, data.groups, lam)
    f_star = group_logistic_objective(data.X, data.y, data.groups, lam, theta_star)
    theta = np.append(report["coef"], report["intercept"])
    assert report["stop_reason"] == "converged"
    assert report["n_machines"] == 8 and report["topology"]["n_nodes"] == 8
    assert (
        abs(group_logistic_objective(data.X, data.y, data.groups, lam, theta) - f_star)
        < 1e-5 * f_star
    )
    assert np.abs(theta - theta_star).max() < 1e-4
    assert report["max_consensus_gap"] < 1e-4
    # every message went to a graph neighbour: two per round per neighbour (ring degree 2)
    for m in report["machines"]:
        assert m["messages_sent"] == 2 * 2 * report["rounds"]


def test_default_job_runs_and_reports(tmp_path):
    res = run_job(["--output", str(tmp_path / "r.json")], n_ranks=5, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "round" in res.stderr and "dpnet: 5 machines" in res.stdout
    report = _load(tmp_path / "r.json")
    assert report["seed"] is None
    # private by default: epsilon 1 per machine (from the keep probability, to rounding)
    assert report["privacy"]["epsilon_per_machine"] == pytest.approx(1.0, rel=1e-12)
    accuracy = report["test_accuracy"]
    assert accuracy["source"] == "randomized held-out labels" and accuracy["n"] == 1000
    assert accuracy["estimate"] > 0.6


def test_mpiexec_n1_runs_one_mpi_rank():
    res = run_job(["--quiet", "--n-samples", "300", "--n-test", "50"], n_ranks=1, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "dpnet: 1 machine on 'ring' (mpi)" in res.stdout


def test_only_rank0_imports_the_privacy_accounting_and_its_root_finders(tmp_path):
    res = run_job(
        ["--seed", "3", "--n-samples", "400", "--quiet", "--output", str(tmp_path / "r.json")],
        n_ranks=3,
        module="tests.accounting_imports",
    )
    assert res.returncode == 0, res.stderr
    # mpiexec may join the ranks' lines: read the statements, not the lines
    for module in ("dp_accounting", "scipy.optimize"):
        said = sorted(re.findall(rf"rank (\d) imported {module}: (True|False)", res.stdout))
        assert said == [("0", "True"), ("1", "False"), ("2", "False")], module


@pytest.mark.parametrize(
    ("n_ranks", "args", "message"),
    [
        (4, ["--topology", "paper5"], "paper5"),
        (5, ["--topology", "moebius"], "moebius"),
        (5, ["--data", "/nonexistent/file.npz"], "/nonexistent/file.npz"),
        (5, ["--epsilon", "-1"], "--epsilon"),
    ],
)
def test_bad_input_under_mpi_fails_fast_on_every_rank(n_ranks, args, message):
    res = run_job(args, n_ranks=n_ranks, timeout=60)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("dpnet: error")]
    assert len(lines) == 1 and message in lines[0]
    assert "Traceback" not in res.stderr


def test_a_rank_that_raises_aborts_the_whole_job():
    res = run_job(["--n-samples", "500"], n_ranks=5, timeout=60, env={"DPNET_FAIL_AT": "3:5"})
    assert res.returncode != 0
    assert "rank 3 failed: RuntimeError: injected fault on machine 3 in round 5" in res.stderr
    assert "Traceback" not in res.stderr


def test_each_rank_loads_its_own_shard(tmp_path):
    """--data 'part-{rank}.npz': rank 0 never sees the other rows; same result as a split."""
    from dpnet.data import make_group_logistic

    data = make_group_logistic(500, rng=np.random.default_rng(2))
    for j, idx in enumerate(np.array_split(np.arange(500), 5)):
        np.savez(tmp_path / f"part-{j}.npz", X=data.X[idx], y=data.y[idx], groups=data.groups)
    np.savez(tmp_path / "all.npz", X=data.X, y=data.y, groups=data.groups)
    common = ["--seed", "4", "--epsilon", "1", "--quiet", "--test-fraction", "0"]
    own = run_job(
        [
            "--data",
            str(tmp_path / "part-{rank}.npz"),
            *common,
            "--output",
            str(tmp_path / "own.json"),
        ],
        n_ranks=5,
    )
    assert own.returncode == 0, own.stderr
    split = run_job(
        [
            "--data",
            str(tmp_path / "all.npz"),
            *common,
            "--machines",
            "5",
            "--output",
            str(tmp_path / "split.json"),
        ]
    )
    assert split.returncode == 0, split.stderr
    a, b = _load(tmp_path / "own.json"), _load(tmp_path / "split.json")
    assert a["data_layout"] == "each machine loaded its own file"
    assert list(a["objective"]) == ["on_randomized_labels"]  # nothing on true labels
    assert a["coef"] == b["coef"] and a["n_train"] == 500
    bad = run_job(["--data", str(tmp_path / "missing-{rank}.npz")], n_ranks=5, timeout=60)
    assert bad.returncode == 2
    assert "machine 0: " in bad.stderr and "missing-0.npz" in bad.stderr
