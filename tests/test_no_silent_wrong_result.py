"""Never a silent wrong result: non-finite iterates stop the run, loaders keep every row,
invalid numbers and paths are refused before any round, Ctrl-C and mismatched ranks end
cleanly."""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import subprocess
import sys
import time

import networkx as nx
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from dpnet.data import load_dataset
from dpnet.decentralized import ADMMConfig, GroupStructure, LocalData, NewtonThetaStep, run_machine
from dpnet.decentralized.steps import scaled_residual
from dpnet.estimators import DecentralizedGroupLassoLogistic
from dpnet.network import run_in_process
from dpnet.penalties import groups_from_labels
from dpnet.run import main
from tests.launch import mpiexec_command, run_job


def _error_line(capsys, argv) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured
    assert len(lines) == 1 and lines[0].startswith("dpnet: error: "), lines
    assert "round " not in captured.out and len(captured.err.splitlines()) == 1  # no round ran
    return lines[0]


# ------------------------------------------------------------------ non-finite iterates


def test_non_finite_iterate_stops_every_machine_in_the_same_round():
    """Margins of 1e200 overflow: every machine must stop with 'non-finite' at once (not run
    to max_rounds and report NaN as a result)."""
    graph = nx.cycle_graph(4)
    rng = np.random.default_rng(0)
    grp_ptr, grp_indices = groups_from_labels(np.arange(3))

    def machine(comm):
        X = np.hstack(
            [rng.standard_normal((10, 3)) * (1e200 if comm.rank == 2 else 1.0), np.ones((10, 1))]
        )
        data = LocalData(X, np.where(np.arange(10) % 2 == 0, 1.0, -1.0), 40)
        groups = GroupStructure(grp_ptr, grp_indices, np.full(3, 0.01))
        return run_machine(comm, data, groups, ADMMConfig(lam=0.1, max_rounds=500), graph)

    results = run_in_process(graph, machine)
    assert {r.stop_reason for r in results} == {"non-finite"}
    assert len({r.rounds for r in results}) == 1 and results[0].rounds < 20


def test_non_finite_run_exits_3_with_valid_json(tmp_path, capsys, monkeypatch):
    newton = NewtonThetaStep.__call__  # the default theta step reports the loss it computed

    def nan_loss(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        solved = newton(*args, **kwargs)
        return dataclasses.replace(solved, loss=np.full_like(solved.loss, math.nan))

    monkeypatch.setattr(NewtonThetaStep, "__call__", nan_loss)
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "--n-samples",
                "200",
                "--n-test",
                "50",
                "--quiet",
                "--output",
                str(out),
                "--max-rounds",
                "1000",
            ]
        )
        == 3
    )
    text = out.read_text()
    report = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert report["stop_reason"] == "non-finite" and report["rounds"] < 10
    assert report["objective"]["on_randomized_labels"] is None  # NaN written as null
    assert "dpnet: warning: stop non-finite" in capsys.readouterr().err


def test_absurd_feature_magnitudes_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    X[9, 1] = 1e300
    np.savez(tmp_path / "d.npz", X=X, y=np.where(rng.random(50) < 0.5, 1.0, -1.0))
    line = _error_line(capsys, ["--data", str(tmp_path / "d.npz")])
    assert "magnitude >= 1e+100" in line and "data row 10" in line


@pytest.mark.parametrize("solver", ["newton", "majorized"])
def test_features_spanning_1e99_and_1_end_as_non_finite_not_as_a_crash(tmp_path, capsys, solver):
    """In the domain (|x| < 1e100) but at the edge of what the theta step's Cholesky factors
    resolve: the shards of 5 machines have fewer rows than columns (Woodbury) and the majorized
    step factors (L/n) X~^T X~ + rho I; both raised LinAlgError (exit 1, 'rank 1 failed').
    The majorized step's factor fails: a non-finite step, exit 3, one warning line. The
    compiled Newton step's Woodbury systems factor (the 1e99 row's pivot is ~1e99, the rest
    of its shard's ~1): its rounds stay finite and end at the round cap, one warning line.
    Before the rounds, the badly scaled column's own line (the features are public under
    label privacy)."""
    X = np.zeros((17, 4))
    X[0, 0] = 1e99
    path = tmp_path / "d.csv"
    path.write_text("".join(",".join(map(str, row)) + ",1\n" for row in X))
    argv = ["--data", str(path), "--n-features", "4", "--max-rounds", "20", "--machines", "5"]
    argv += ["--seed", "1"]  # a split whose shard with the 1e99 row fails to factor
    code = main([*argv, "--theta-solver", solver, "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    stop = "non-finite" if solver == "majorized" else "max_rounds"
    assert code == (3 if solver == "majorized" else 0)
    assert len(err) == 2 and err[1].startswith(f"dpnet: warning: stop {stop}"), err
    assert err[0].startswith("dpnet: warning: badly scaled columns: column 0 "), err


# ------------------------------------------------------------------ loaders keep every row


def _csv_rows(n: int, labels: list[str]) -> list[str]:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((n, 2)).round(3)
    return [f"{a},{b},{labels[i % 2]}" for i, (a, b) in enumerate(X)]


@pytest.mark.parametrize(
    ("header", "bom", "labels", "domain"),
    [
        (False, False, ["no", "yes"], "no,yes"),  # text labels, no header: row 1 is data
        (True, False, ["no", "yes"], "no,yes"),
        (False, True, ["0", "1"], None),  # byte-order mark before row 1
        (True, True, ["0", "1"], None),
        (False, False, ["0", "1"], None),
    ],
)
def test_csv_loader_never_drops_a_row(tmp_path, header, bom, labels, domain):
    lines = (["a,b,y"] if header else []) + _csv_rows(200, labels)
    path = tmp_path / "d.csv"
    path.write_bytes(("\ufeff" if bom else "").encode() + "\n".join(lines).encode() + b"\n")
    from dpnet.data import LabelDomain

    data = load_dataset(path, labels=LabelDomain.parse(domain))
    assert data.n_samples == 200
    assert data.y[0] == (1.0 if labels[0] in ("yes", "1") else -1.0)
    first = lines[1 if header else 0].split(",")
    np.testing.assert_array_equal(data.X[0], [float(first[0]), float(first[1])])


# ------------------------------------------------------------------ invalid numbers, paths


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--epsilon", "800"], "rounds to 1"),
        (["--epsilon", "1e9"], "rounds to 1"),
        (["--epsilon", "40"], "rounds to 1"),
        (["--epsilon", "nan"], "--epsilon"),
        (["--seed", "-1"], "--seed"),
        (["--topology-seed", "-3"], "--topology-seed"),
        (["--tol", "inf"], "--tol"),
        (["--tol", "nan"], "--tol"),
        (["--lam", "inf"], "--lam"),
        (["--lam", "nan"], "--lam"),
        (["--c", "inf"], "--c"),
        (["--max-coef-norm", "nan"], "--max-coef-norm"),
        (["--beta-step-size", "inf"], "--beta-step-size"),
    ],
)
def test_invalid_numbers_exit_2_before_any_work(capsys, argv, needle):
    assert needle in _error_line(capsys, argv)


def test_large_but_representable_epsilon_runs(capsys):
    """eps = 30: the nearest double to e^30/(1+e^30) would give eps = 30.001; the keep
    probability is rounded down instead and the report states the budget actually used."""
    assert main(["--epsilon", "30", "--n-samples", "100", "--n-test", "20", "--quiet"]) == 0
    assert "epsilon = 29.9998 label-DP" in capsys.readouterr().out


@pytest.mark.parametrize("epsilon", [1e-6, 0.1, 1.0, 3.0, 10.0, 20.0, 30.0, 35.0, 36.6])
def test_keep_probability_never_spends_more_than_asked(epsilon):
    from mpmath import log, mp, mpf

    from dpnet.privacy import keep_prob_from_epsilon

    mp.dps = 50
    p = keep_prob_from_epsilon(epsilon)
    assert log(mpf(p) / (1 - mpf(p))) <= epsilon  # exact budget of the double p


def test_estimator_refuses_epsilon_beyond_float_range():
    X = np.random.default_rng(0).standard_normal((40, 3))
    with pytest.raises(ValueError, match="rounds to 1"):
        DecentralizedGroupLassoLogistic(epsilon=1e9).fit(X, np.where(X[:, 0] > 0, 1, -1))


def test_output_paths_are_checked_before_the_first_round(capsys, tmp_path):
    (tmp_path / "afile").write_text("x")
    assert "is a directory" in _error_line(capsys, ["--output", str(tmp_path)])
    assert "is not a directory" in _error_line(
        capsys, ["--output", str(tmp_path / "afile" / "r.json")]
    )
    assert "--plot" in _error_line(capsys, ["--plot", str(tmp_path / "afile" / "c.png")])
    assert "other output" in _error_line(
        capsys, ["--output", str(tmp_path / "r.json"), "--oracle-output", str(tmp_path / "r.json")]
    )
    assert "--plot" in _error_line(capsys, ["--plot", str(tmp_path / "c.unknownformat")])


def test_failed_plot_after_a_good_run_keeps_the_results(tmp_path, capsys, monkeypatch):
    import dpnet.cli.plots

    def broken(report, path):
        raise OSError("disk full")

    monkeypatch.setattr(dpnet.cli.plots, "plot_convergence", broken)
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "--n-samples",
                "200",
                "--n-test",
                "50",
                "--output",
                str(out),
                "--plot",
                str(tmp_path / "c.png"),
                "--progress-every",
                "0",
                "--seed",
                "1",  # unseeded data reach the 3,000-round cap now and then (1 in ~40)
            ]
        )
        == 4
    )
    captured = capsys.readouterr()
    assert json.loads(out.read_text())["stop_reason"] == "converged"
    assert "dpnet: 5 machines" in captured.out  # the summary is still shown
    assert "could not be written (OSError: disk full)" in captured.err


def test_shard_size_messages(capsys, tmp_path):
    assert (
        "need 5 sizes summing to the 2500 training rows;"
        in _error_line(capsys, ["--n-samples", "2500", "--shard-sizes", "1,2"]) + ";"
    )
    X = np.random.default_rng(0).standard_normal((100, 3))
    np.savez(tmp_path / "d.npz", X=X, y=np.where(X[:, 0] > 0, 1.0, -1.0))
    assert (
        "need 5 sizes summing to the 75 training rows (after holding out 25 test rows)"
        in _error_line(capsys, ["--data", str(tmp_path / "d.npz"), "--shard-sizes", "70,1,1,1,1"])
    )
    assert "does not apply" in _error_line(
        capsys, ["--data", "part-{rank}.npz", "--shard-sizes", "1,1,1,1,1"]
    )


def test_messages_say_what_is_wrong(capsys, tmp_path):
    ring8 = tmp_path / "ring8.edgelist"
    nx.write_edgelist(nx.cycle_graph(8), ring8, data=False)
    line = _error_line(capsys, ["--topology", str(ring8), "--machines", "5"])
    assert "8 nodes but 5 machines were requested" in line and "MPI" not in line
    (tmp_path / "dir.npz").mkdir()
    assert "is a directory" in _error_line(capsys, ["--data", str(tmp_path / "dir.npz")])


# ------------------------------------------------------------------ Ctrl-C, mismatched ranks


def test_ctrl_c_ends_an_inprocess_run_at_once(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dpnet.run",
            "--machines",
            "5",
            "--n-samples",
            "3000",
            "--tol",
            "1e-300",
            "--max-rounds",
            "1000000",
            "--no-adapt-c",
            "--c",
            "1e-6",
            "--progress-every",
            "1",
            "--output",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr.readline().startswith("round")  # the rounds are running
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the in-process run did not stop on Ctrl-C")
    assert proc.returncode == 130 and time.monotonic() - start < 10
    assert "interrupted" in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))


@pytest.mark.mpi_launch
def test_ranks_with_different_settings_are_refused():
    cmd = [
        *mpiexec_command(2),
        sys.executable,
        "-m",
        "dpnet.run",
        "--lam",
        "0.1",
        ":",
        "-n",
        "3",
        sys.executable,
        "-m",
        "dpnet.run",
        "--lam",
        "0.2",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("dpnet: error")]
    assert len(lines) == 1
    assert "rank 2 was started with other settings than rank 0 (--lam: 0.2 vs 0.1)" in lines[0]


@pytest.mark.mpi_launch
def test_mpi_run_with_no_estimate_exits_3(tmp_path):
    """The unbiased loss at epsilon = 0.1 has no minimiser on this data (see
    test_labels_rr): every rank ends with 'diverged', mpiexec exits 3."""
    res = run_job(
        ["--epsilon", "0.1", "--loss", "unbiased", "--seed", "3", "--quiet", "--c", "0.01"],
        n_ranks=5,
        timeout=120,
    )
    assert res.returncode == 3, res.stderr + res.stdout
    assert "stop: diverged" in res.stdout


# ------------------------------------------------------------------ a penalty that freezes


def test_scaled_residual_counts_the_dual_variables_motion():
    """rho = max(r max(1, c), s) / max(1, ||theta||): a frozen iterate (r ~ 1e-11, s = 0)
    under c = 1e10 is far from tol; for c <= 1 the rule is max(r, s) / max(1, ||theta||)."""
    assert scaled_residual(1e-11, 0.0, 1e10, 0.0) == pytest.approx(0.1)
    assert scaled_residual(1e-11, 0.0, 0.5, 0.0) == 1e-11
    assert scaled_residual(1e-3, 4.0, 0.5, 2.0) == 2.0
    assert scaled_residual(1e-11, 0.0, 2.0, 0.0) == 2e-11
    assert scaled_residual(3.0, 1.0, 2.0, 3.0) == 2.0
    assert np.isnan(scaled_residual(np.nan, 0.0, 2.0, 1.0))  # a NaN r wins (Python's max
    assert scaled_residual(1.0, np.nan, 2.0, 1.0) == 2.0  # of (c r, s) keeps its first)


@pytest.mark.parametrize("c", ["1e-300", "1e6", "1e12"])
def test_no_penalty_in_range_is_mistaken_for_convergence(tmp_path, capsys, c):
    """The whole accepted range of --c: never 'converged' when the default needs 239 rounds."""
    out = tmp_path / "r.json"
    assert (
        main(["--c", c, "--seed", "1", "--max-rounds", "100", "--quiet", "--output", str(out)]) == 0
    )
    assert json.loads(out.read_text())["stop_reason"] == "max_rounds"
    capsys.readouterr()


def test_a_penalty_beyond_the_range_is_refused(capsys):
    """--c 1e300 made theta - Z ~ 1e-300, whose square is 0: even c r read 0 ('converged')."""
    assert "--c must lie in (0, 1e+12]" in _error_line(capsys, ["--c", "1e300"])
    with pytest.raises(ValueError, match=r"'c' parameter .* range \(0.0, 1000000000000.0\]"):
        DecentralizedGroupLassoLogistic(c=1e13).fit(np.eye(4), [0, 1, 0, 1])


def test_a_penalty_that_freezes_the_iterates_is_not_reported_converged(tmp_path, capsys):
    """--c 1e10 moved nothing: it exited 0 'converged' after 5 rounds with beta = 0 and the
    objective log 2. Now the run is not 'converged', and the warning says why."""
    out = tmp_path / "r.json"
    code = main(["--c", "1e10", "--max-rounds", "200", "--quiet", "--output", str(out)])
    captured = capsys.readouterr()
    report = json.loads(out.read_text())
    assert code == 0 and report["stop_reason"] == "max_rounds", report["stop_reason"]
    assert "freezes the iterates" in captured.err
    default = tmp_path / "d.json"
    assert main(["--quiet", "--output", str(default), "--seed", "1"]) == 0  # seeded: see above
    assert json.loads(default.read_text())["stop_reason"] == "converged"


def test_estimator_warns_when_it_did_not_converge():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = (X[:, 0] > 0).astype(int)
    with pytest.warns(ConvergenceWarning, match="max_rounds after 30 rounds"):
        DecentralizedGroupLassoLogistic(c=1e10, max_rounds=30).fit(X, y)


@pytest.mark.parametrize("backend", ["simulated", "threads"])
def test_the_summary_says_whose_milliseconds_a_round_takes(backend, capsys):
    """A round's milliseconds in the summary are a machine's (the mean over the machines; the
    simulator's are 1/J of its whole block's), and the line says so."""
    argv = ["--backend", backend, "--machines", "4", "--n-samples", "400", "--n-test", "0"]
    assert main([*argv, "--progress-every", "0", "--seed", "1"]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if "ms/round" in s)
    assert " ms/round per machine (" in line
    assert ("(1/J of the simulation; " in line) == (backend == "simulated")
