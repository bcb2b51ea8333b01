"""Every bad input gives one line naming the problem and exit code 2 (in-process backend)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from dpnet.run import main
from tests.launch import run_job


def _npz(path, X, y, groups=None):
    arrays = {"X": X, "y": y} | ({} if groups is None else {"groups": groups})
    np.savez(path, **arrays)
    return str(path)


@pytest.fixture
def good(tmp_path):
    rng = np.random.default_rng(0)
    return rng.standard_normal((50, 6)), np.where(rng.random(50) < 0.5, 1.0, -1.0)


def _error(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("dpnet: error: ")
    return err[0]


def test_unknown_topology(capsys):
    assert "hypercube-9" in _error(capsys, ["--topology", "hypercube-9"])


def test_disconnected_graph_file(capsys, tmp_path):
    f = tmp_path / "two.edgelist"
    f.write_text("0 1\n1 2\n3 4\n")
    assert "connected" in _error(capsys, ["--topology", str(f)])


def test_missing_data_file(capsys, tmp_path):
    assert "missing.npz" in _error(capsys, ["--data", str(tmp_path / "missing.npz")])


def test_malformed_data_file(capsys, tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("a,b,y\n1,2,1\n3,oops,0\n")
    assert "bad.csv" in _error(capsys, ["--data", str(f)])


def test_nan_in_data(capsys, tmp_path, good):
    X, y = good
    X[3, 2] = np.nan
    assert "NaN or inf" in _error(capsys, ["--data", _npz(tmp_path / "nan.npz", X, y)])
    X[3, 2] = np.inf
    assert "NaN or inf" in _error(capsys, ["--data", _npz(tmp_path / "inf.npz", X, y)])


def test_labels_outside_the_domain(capsys, tmp_path, good):
    X, _ = good
    y = np.arange(50) % 3
    msg = _error(capsys, ["--data", _npz(tmp_path / "three.npz", X, y)])
    assert "16 label(s) outside the label domain" in msg and "data row 3" in msg


def test_groups_not_covering_the_columns(capsys, tmp_path, good):
    X, y = good
    msg = _error(capsys, ["--data", _npz(tmp_path / "g.npz", X, y), "--groups", "0,0,1,1"])
    assert "group" in msg


RECORD = ["--privacy", "record", "--epsilon", "1"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--epsilon", "0"], "--epsilon"),
        (["--epsilon", "-2"], "--epsilon"),
        (["--keep-prob", "0.5"], "--keep-prob"),
        (["--keep-prob", "1.2"], "--keep-prob"),
        (["--lam", "-1"], "--lam"),
        (["--max-rounds", "0"], "--max-rounds"),
        (["--baselines", "svm"], "svm"),
        (["--epsilon", "1", "--keep-prob", "0.7"], "either"),
        (["--no-such-option"], "no-such-option"),
        (["--delta", "1e-6"], "--privacy record only"),
        (["--row-bound", "2"], "--privacy record only"),
        (["--privacy", "record", "--row-bound", "2", "--epsilon", "inf"], "finite --epsilon"),
        (["--privacy", "record", "--epsilon", "1"], "needs --row-bound"),
        ([*RECORD, "--row-bound", "-1"], "--row-bound must be"),
        ([*RECORD, "--row-bound", "2", "--delta", "1"], "--delta must lie"),
        ([*RECORD, "--row-bound", "2", "--cv", "3"], "--cv does not apply"),
        ([*RECORD, "--row-bound", "2", "--checkpoint", "ck", "--seed", "1"], "--checkpoint"),
        ([*RECORD, "--row-bound", "2", "--theta-solver", "majorized"], "--theta-solver"),
        # issue 45 item 8: exit 1 with an OverflowError, or overflow warnings, before
        (["--privacy", "record", "--epsilon", "1e300", "--row-bound", "1"], "at most 36900"),
        ([*RECORD, "--row-bound", "1e300"], "--row-bound must be at most 1e+100"),
    ],
)
def test_bad_options(capsys, argv, needle):
    assert needle in _error(capsys, argv)


def test_exit_code_and_no_traceback_from_the_command_line(tmp_path):
    res = run_job(["--epsilon", "0"], timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip() == "dpnet: error: --epsilon must be > 0 (inf for no privacy), got 0.0"
    assert not (tmp_path / "r.json").exists()


def test_results_file_is_complete(tmp_path):
    out = tmp_path / "sub" / "r.json"
    out.parent.mkdir()
    assert (
        main(
            [
                "--n-samples",
                "400",
                "--epsilon",
                "1",
                "--seed",
                "2",
                "--quiet",
                "--output",
                str(out),
                "--topology",
                "star",
                "--machines",
                "4",
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    for key in (
        "config",
        "seed",
        "topology",
        "privacy",
        "machines",
        "rounds",
        "stop_reason",
        "objective",
        "max_consensus_gap",
        "test_accuracy",
        "selected_groups",
        "coef",
        "intercept",
        "timing",
    ):
        assert key in report
    topo = report["topology"]
    assert topo["n_nodes"] == 4 and topo["diameter"] == 2
    assert topo["algebraic_connectivity"] == pytest.approx(1.0)
    assert len(report["machines"]) == 4
    assert all(m["bytes_sent"] > 0 and m["messages_sent"] > 0 for m in report["machines"])
    assert sum(m["rows"] for m in report["machines"]) == 400
    # a simulated machine's CPU clock is its thread's: never above its own wall time
    for m in report["machines"]:
        assert 0 < m["compute_cpu_seconds"] <= m["compute_seconds"] + 1e-3
        assert 0 < m["comm_cpu_seconds"] <= m["comm_seconds"] + 1e-3
    timing = report["timing"]
    assert timing["startup_seconds"] == max(m["startup_seconds"] for m in report["machines"])
    assert 0 < timing["startup_seconds"] < 60  # from main()'s call: no import in this test
    # the round's steps: their CPU is the machine's compute CPU but the set-up before round 1
    split = timing["cpu_seconds_per_round_by_step"]
    assert list(split) == ["z_step", "theta_step", "statistics", "communication"]
    steps = split["z_step"] + split["theta_step"] + split["statistics"]
    assert 0.5 * timing["compute_cpu_seconds_per_round"] < steps
    assert steps <= timing["compute_cpu_seconds_per_round"] + 1e-6
    assert all(split[step] > 0 for step in ("z_step", "theta_step", "statistics"))
    comm = np.mean([m["comm_cpu_seconds"] for m in report["machines"]]) / report["rounds"]
    assert split["communication"] == pytest.approx(comm)
    assert list(tmp_path.joinpath("sub").iterdir()) == [out]  # no temporary file left behind


def test_convergence_plot_is_written(tmp_path):
    png = tmp_path / "fig" / "conv.png"
    png.parent.mkdir()  # output directories are never created (a typo would be a new tree)
    assert (
        main(
            [
                "--n-samples",
                "300",
                "--seed",
                "1",
                "--quiet",
                "--progress-every",
                "5",
                "--plot",
                str(png),
            ]
        )
        == 0
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_per_machine_files_must_agree_on_columns(capsys, tmp_path, good):
    X, y = good
    for j in range(3):
        cols = 6 if j != 2 else 5
        np.savez(tmp_path / f"p-{j}.npz", X=X[:, :cols], y=y)
    msg = _error(
        capsys, ["--data", str(tmp_path / "p-{rank}.npz"), "--machines", "3", "--topology", "ring"]
    )
    assert "machine 2's data has 5 columns" in msg


def test_a_libsvm_test_file_is_read_at_the_declared_width(tmp_path):
    """A LIBSVM file is sparse: a test file whose last columns happen to be all zero (a9a's
    test file never uses index 123) is read at the declared width, not refused."""
    rng = np.random.default_rng(0)
    lines = {"train": [], "test": []}
    for part, width in (("train", 5), ("test", 4)):
        for _ in range(60):
            x = rng.standard_normal(width)
            label = 1 if x[0] > 0 else -1
            lines[part].append(f"{label} " + " ".join(f"{k + 1}:{v:.4f}" for k, v in enumerate(x)))
        (tmp_path / f"{part}.libsvm").write_text("\n".join(lines[part]) + "\n")
    out = tmp_path / "r.json"
    argv = ["--data", str(tmp_path / "train.libsvm"), "--test-data", str(tmp_path / "test.libsvm")]
    argv += ["--n-features", "5", "--machines", "2", "--quiet", "--output", str(out)]
    assert main(argv) == 0
    assert json.loads(out.read_text())["n_test"] == 60


@pytest.mark.parametrize(
    "option", [["--n-lambdas", "0"], ["--lambda-ratio", "0"], ["--cv-rule", "1se"]]
)
def test_cross_validation_options_without_cv_are_refused(capsys, option):
    assert f"{option[0]} needs --cv K" in _error(capsys, option)


def test_an_output_that_is_not_a_regular_file_is_refused(capsys, tmp_path):
    """A fifo (or a device node) as --output: the atomic rename would replace it."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert "is not a regular file" in _error(capsys, ["--output", str(fifo)])
    assert fifo.exists() and not fifo.is_file()


def test_a_negative_value_after_a_space_gets_the_hint(capsys):
    """``--labels -1,1``: argparse takes -1,1 for an option and said only 'expected one
    argument'."""
    for flag, value in (("--labels", "-1,1"), ("--lam-grid", "-0.1,0.2")):
        line = _error(capsys, [flag, value])
        hint = f"expected one argument (a value that starts with '-' goes after '=': {flag}=-VALUE)"
        assert line.endswith(hint), line
    assert main(["--labels=-1,1", "--machines", "3", "--max-rounds", "3", "--quiet"]) == 0


def test_help_names_both_privacy_modes():
    """--help called the job label-private only (issue 45)."""
    from dpnet.cli import build_parser

    text = " ".join(build_parser().format_help().split())
    assert "label-private" not in text
    assert "differentially private" in text and "--privacy record Gaussian noise" in text


def test_help_gives_each_default_once():
    """--help said '(default: from the graph's Laplacian...) (default: None)'."""
    from dpnet.cli import build_parser

    text = " ".join(build_parser().format_help().split())
    options = text.split(" --")[1:]
    assert len(options) > 40
    for option in options:
        assert option.count("(default") <= 1, option
    assert "(default: None)" not in text and "(default: False)" not in text
    assert "--lam LAM lambda in (lambda/2) sum_g w_g ||b_g|| (default: 0.1)" in text
