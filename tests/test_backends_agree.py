"""The three backends run one job: with the same options and seed, the simulated backend's
results file (and oracle file) equals the threads backend's and the MPI backend's, to 1e-12 in
every number that is not a clock reading: coefficients, rounds, stop reason, history, the
CV curve, the ledger, every machine's message and byte counts; under --privacy record too
(every machine draws the same noise from its own streams on every backend)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpnet.run import main
from tests.launch import run_job

TOL = 1e-12
CLOCKS = {
    "backend",  # the backend's name, in the report and its config
    "per_machine",  # how the times were taken
    "wall_seconds",
    "seconds_per_round",
    "comm_seconds_per_round",
    "compute_seconds_per_round",
    "compute_cpu_seconds_per_round",
    "cpu_seconds_per_round_by_step",
    "startup_seconds",
    "total_seconds",
    "compute_seconds",
    "compute_cpu_seconds",
    "comm_seconds",
    "comm_cpu_seconds",
    "provenance",  # how and when it was launched: the command line, the time, the MPI library
    "output",  # the files' own paths
    "oracle_output",
}
QUICK = ["--n-samples", "480", "--n-test", "200", "--quiet", "--max-rounds", "600"]


def assert_same(a: Any, b: Any, where: str = "") -> None:
    """``a`` equals ``b`` recursively; floats to TOL relative to max(1, |a|)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            if key not in CLOCKS:
                assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=0, abs_tol=TOL * max(1.0, abs(a))), (where, a, b)
    else:
        assert a == b, (where, a, b)


def _run(tmp_path: Path, name: str, args: list[str], n_ranks: int | None = None) -> dict:
    out, oracle = tmp_path / f"{name}.json", tmp_path / f"{name}-oracle.json"
    argv = [*args, "--output", str(out), "--oracle-output", str(oracle)]
    if n_ranks is None:
        assert main(argv) == 0
    else:
        done = run_job(argv, n_ranks=n_ranks, timeout=300)
        assert done.returncode == 0, done.stderr
    return {"report": json.loads(out.read_text()), "oracle": json.loads(oracle.read_text())}


CASES = {
    "ring4-noprivacy": ["--topology", "ring", "--machines", "4", "--seed", "1"],
    "star6-eps1": ["--topology", "star", "--machines", "6", "--seed", "2", "--epsilon", "1"],
    "grid8-eps1-unbiased-unequal": [
        "--topology", "grid", "--machines", "8", "--seed", "3", "--epsilon", "1",
        "--loss", "unbiased", "--shard-sizes", "30,90,45,60,75,50,70,60",
    ],
    "paper5-eps1-cv": [
        "--topology", "paper5", "--seed", "4", "--epsilon", "1",
        "--cv", "3", "--n-lambdas", "4", "--max-rounds", "300",
    ],
    "ring4-record": [
        "--topology", "ring", "--machines", "4", "--seed", "5", "--privacy", "record",
        "--epsilon", "2", "--row-bound", "6", "--max-rounds", "40",
    ],
    "star6-record-rr-unequal": [
        "--topology", "star", "--machines", "6", "--seed", "6", "--privacy", "record",
        "--epsilon", "4", "--row-bound", "5", "--keep-prob", "0.8", "--loss", "unbiased",
        "--shard-sizes", "30,90,45,60,75,180", "--max-rounds", "30",
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [  # the cross-validated case (~7 s CPU: every fold and the final fit, twice) in the full suite
        pytest.param(case, marks=pytest.mark.slow) if case.endswith("-cv") else case
        for case in CASES
    ],
)
def test_simulated_equals_threads(tmp_path, case):
    args = [*QUICK, *CASES[case]]
    threads = _run(tmp_path, "threads", [*args, "--backend", "threads"])
    simulated = _run(tmp_path, "simulated", [*args, "--backend", "simulated"])
    assert threads["report"]["backend"] == "threads"
    assert simulated["report"]["backend"] == "simulated"
    assert simulated["report"]["timing"]["per_machine"].startswith("simulated")
    assert_same(threads, simulated)


def test_simulated_equals_threads_on_per_machine_files(tmp_path):
    """Every machine loads its own file ({rank} in --data): the simulator loads them all."""
    rng = np.random.default_rng(5)
    for j, rows in enumerate([50, 80, 65]):
        X = rng.standard_normal((rows, 6))
        y = np.where(X[:, 0] - X[:, 3] + rng.standard_normal(rows) > 0, 1.0, -1.0)
        np.savez(tmp_path / f"m{j}.npz", X=X, y=y, groups=np.repeat(np.arange(3), 2))
    args = ["--data", str(tmp_path / "m{rank}.npz"), "--machines", "3", "--topology", "path"]
    args += ["--seed", "6", "--epsilon", "2", "--quiet"]
    threads = _run(tmp_path, "threads", [*args, "--backend", "threads"])
    simulated = _run(tmp_path, "simulated", [*args, "--backend", "simulated"])
    assert_same(threads, simulated)


@pytest.mark.mpi_launch
@pytest.mark.parametrize("case", ["star6-eps1", "paper5-eps1-cv", "star6-record-rr-unequal"])
def test_simulated_equals_mpi(tmp_path, case):
    args = [*QUICK, *CASES[case]]
    n_ranks = 5 if case.startswith("paper5") else 6
    mpi = _run(tmp_path, "mpi", args, n_ranks=n_ranks)
    simulated = _run(tmp_path, "simulated", [*args, "--backend", "simulated"])
    assert mpi["report"]["backend"] == "mpi"
    assert_same(mpi, simulated)


def test_a_difference_is_caught():
    """The comparison is not vacuous: one ulp-scale change passes, 1e-10 fails."""
    report = {"coef": [0.5, -1.25], "history": [{"objective": 0.7}], "rounds": 10}
    nudged = json.loads(json.dumps(report))
    nudged["coef"][1] += 1e-15
    assert_same(report, nudged)
    nudged["coef"][1] += 1e-10
    with pytest.raises(AssertionError):
        assert_same(report, nudged)
    with pytest.raises(AssertionError):
        assert_same(report, {**report, "rounds": 11})


def test_the_estimator_gives_the_same_fit_on_both_backends():
    from dpnet.data import make_group_logistic
    from dpnet.estimators import DecentralizedGroupLassoLogistic

    data = make_group_logistic(600, n_groups=8, rng=np.random.default_rng(8))
    fits = {
        backend: DecentralizedGroupLassoLogistic(
            0.05,
            epsilon=1.0,
            n_machines=6,
            topology="star",
            random_state=9,
            backend=backend,
            groups=data.groups,
        ).fit(data.X, data.y)
        for backend in ("threads", "simulated")
    }
    threads, simulated = fits["threads"], fits["simulated"]
    assert threads.n_iter_ == simulated.n_iter_ and threads.stop_reason_ == "converged"
    assert np.abs(threads.coef_ - simulated.coef_).max() <= TOL
    assert abs(threads.intercept_ - simulated.intercept_) <= TOL
    assert np.abs(threads.machine_coefs_ - simulated.machine_coefs_).max() <= TOL
    assert threads.traffic_ == simulated.traffic_
    # the same guarantee; only the default accountant's running total moves on
    assert threads.privacy_.pop("accountant")["charged"] == "default"
    assert simulated.privacy_.pop("accountant")["charged"] == "default"
    assert threads.privacy_ == simulated.privacy_


def test_the_estimator_refuses_a_backend_it_does_not_have():
    from dpnet.estimators import DecentralizedGroupLassoLogistic

    X = np.random.default_rng(0).standard_normal((40, 3))
    with pytest.raises(ValueError, match="'backend' parameter .* must be a str among"):
        DecentralizedGroupLassoLogistic(backend="mpi").fit(X, np.sign(X[:, 0]))


@pytest.mark.parametrize("solver", ["majorized", "gradient"])
def test_every_theta_solver_gives_the_same_fit_on_both_backends(solver: str) -> None:
    """The simulator runs the one round loop, every theta step included: the estimator's
    default backend ("auto": simulated) and threads agree."""
    from dpnet.estimators import DecentralizedGroupLassoLogistic

    X = np.random.default_rng(0).standard_normal((60, 3))
    y = np.sign(X[:, 0] + 0.1)
    fits = {
        backend: DecentralizedGroupLassoLogistic(
            theta_solver=solver, max_rounds=50, classes=(-1.0, 1.0), random_state=0,
            backend=backend,
        ).fit(X, y)
        for backend in ("auto", "threads")
    }  # fmt: skip
    assert fits["auto"].backend_ == "simulated"
    assert fits["auto"].n_iter_ == fits["threads"].n_iter_
    np.testing.assert_allclose(fits["auto"].coef_, fits["threads"].coef_, rtol=0, atol=1e-12)
