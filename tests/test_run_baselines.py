"""``--baselines``: rank 0's single-node baselines at the job's privacy spec (issue 43).

median (paper 1) runs on its own public synthetic regression data with its own ledger;
rdp-admm (paper 2) runs its four established methods on machine 0's raw shard, and the run's
ledger, guarantee text and results file say machine 0's composed total (docs/privacy.md,
"The baselines of the main job")."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import dpnet.decentralized.boundary as boundary
from dpnet import streams
from dpnet.baselines.rdp_admm import ESTABLISHED_METHODS, fit_rdp_admm_on_rows
from dpnet.data import split_rows
from dpnet.privacy import DEFAULT_DELTA, PrivacyLedger, randomized_response_event
from dpnet.run import main


def _run(tmp_path, *argv: str, name: str = "r.json") -> dict:
    out = tmp_path / name
    assert main([*argv, "--output", str(out), "--quiet"]) == 0
    return json.loads(out.read_text())


def test_median_baselines_on_their_own_data_at_the_jobs_epsilon(tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = ["--baselines", "median", "--epsilon", "2", "--seed", "3", "--n-samples", "300"]
    assert main([*argv, "--output", str(out), "--progress-every", "0"]) == 0
    report = json.loads(out.read_text())
    median = report["baselines"]["median"]
    assert set(median["methods"]) >= {"exact", "objective", "irls", "coordinate"}
    # the job's epsilon as spent (that of the keep probability, a double), no fallback
    assert median["epsilon"] == pytest.approx(2.0, rel=1e-12) and median["epsilon"] <= 2.0
    # three DP fits at epsilon = 2 each, composed sequentially on the same synthetic data
    assert median["ledger"]["total"]["pure_epsilon"] == pytest.approx(6.0)
    assert median["ledger"]["relation"] == "replace_one"
    # it reads no record of the job: the job's ledger charges nothing for it
    assert report["privacy"]["ledger"]["total"]["pure_epsilon"] == pytest.approx(2.0)
    assert "own public synthetic regression data" in median["compares"]
    line = next(x for x in capsys.readouterr().out.splitlines() if "baseline median" in x)
    assert "job's epsilon 2" in line and "own public synthetic regression data" in line
    assert "no record of the job read" in line


def test_rdp_admm_on_machine_0_charged_to_the_run(tmp_path, capsys):
    """Label privacy: the four fits on machine 0's rows at (epsilon, DEFAULT_DELTA) each; the
    run's ledger total is machine 0's: its randomized response and the four fits composed,
    the same number an independent ledger of the same events gives."""
    eps = 1.0
    report = _run(tmp_path, "--baselines", "rdp-admm", "--epsilon", str(eps), "--seed", "5",
                  "--n-samples", "300", "--machines", "3")  # fmt: skip
    admm = report["baselines"]["rdp-admm"]
    assert list(admm["methods"]) == list(ESTABLISHED_METHODS)
    assert "ADMM-objP" in admm["not_run"]
    rows = len(split_rows(300, 3)[0])
    assert admm["rows"] == rows
    for method in admm["methods"].values():
        assert method["privacy"]["epsilon"] <= eps + 1e-9
        assert method["privacy"]["delta"] == DEFAULT_DELTA
    ledger = report["privacy"]["ledger"]
    charged = [r for r in ledger["releases"] if "--baselines" in r["label"]]
    assert len(charged) == 4 and all(r["machine"] == 0 for r in charged)
    assert ledger["total"]["delta"] == DEFAULT_DELTA
    # the same events in a ledger of the test's own: the fits' events depend on (n, eps,
    # delta) only, so any rows of machine 0's size give them
    rng = np.random.default_rng(0)
    mine = PrivacyLedger(DEFAULT_DELTA)
    keep = math.exp(eps) / (1 + math.exp(eps))
    rr = randomized_response_event(keep)
    mine.record(rr, label="rr", relation="replace_one", protects="labels", machine=0)
    labels = np.where(rng.random(rows) < 0.5, 1.0, -1.0)
    features = rng.standard_normal((rows, 4))
    fit_rdp_admm_on_rows(
        features, labels, epsilon=eps, delta=DEFAULT_DELTA, row_bound=1.0, seed=1,
        ledger=mine, machine=0,
    )  # fmt: skip
    total = mine.epsilon()
    assert eps < total < 5 * eps  # more than the job's, less than the sum of five epsilons
    assert ledger["total"]["epsilon"] == pytest.approx(total, rel=1e-9)
    assert admm["machine_0_records"]["epsilon"] == pytest.approx(total, rel=1e-9)
    guarantee = report["privacy"]["guarantee"]
    assert f"({total:.6g}, {DEFAULT_DELTA:.3g})-DP in total" in guarantee
    assert "machine 0" in report["privacy"]["release_boundary"]
    assert "machine 0's own shard" in admm["compares"]
    assert "job's (epsilon, delta) = (1, 1e-05)" in admm["compares"]
    # without --baselines the same run spends the job's epsilon only
    plain = _run(tmp_path, "--epsilon", str(eps), "--seed", "5", "--n-samples", "300",
                 "--machines", "3", name="plain.json")  # fmt: skip
    assert plain["privacy"]["ledger"]["total"]["pure_epsilon"] == pytest.approx(eps)
    assert "EXCEPT" not in plain["privacy"]["guarantee"]


def test_rdp_admm_under_record_privacy_takes_the_jobs_delta(tmp_path, capsys):
    report = _run(tmp_path, "--baselines", "rdp-admm", "--privacy", "record", "--epsilon", "2",
                  "--delta", "1e-6", "--row-bound", "3", "--max-rounds", "20", "--seed", "2",
                  "--n-samples", "300", "--machines", "3")  # fmt: skip
    admm = report["baselines"]["rdp-admm"]
    assert admm["row_bound"] == 3.0  # the public --row-bound, not the rows' norms
    for method in admm["methods"].values():
        assert method["privacy"]["delta"] == 1e-6 and method["privacy"]["epsilon"] <= 2 + 1e-9
        # private held-out rows: scoring a baseline would spend their budget again
        assert method["test_accuracy"] is None
    total = report["privacy"]["ledger"]["total"]
    assert total["delta"] == 1e-6 and total["epsilon"] > 2.0
    assert total["epsilon"] == pytest.approx(admm["machine_0_records"]["epsilon"], rel=1e-12)
    assert "records (features and label) the run is" in report["privacy"]["guarantee"]


def test_non_private_job_refuses_baselines(capsys):
    for baseline in ("median", "rdp-admm"):
        assert main(["--baselines", baseline, "--seed", "1", "--epsilon", "inf"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            "dpnet: error: --baselines run at the job's epsilon, and this job is not private "
            "(epsilon inf): give a finite --epsilon or --keep-prob"
        ]


def _fixed_labels(monkeypatch):
    """Randomized labels keyed by the part's name, whatever the raw labels (tests/fixed_labels)."""
    real = boundary.randomize_labels

    def fixed(y_raw, keep_prob, rng, part):
        real(y_raw, keep_prob, rng, part)
        key = sum(part.encode())
        return np.where(np.random.default_rng(key).random(y_raw.shape[0]) < 0.5, 1.0, -1.0)

    monkeypatch.setattr(boundary, "randomize_labels", fixed)


def test_which_raw_rows_reach_the_baselines(tmp_path, monkeypatch):
    """The randomized labels held fixed: one raw label changed on machine 1 changes nothing
    released (the network's model, both baselines); one changed on machine 0 leaves the
    network's model and paper 1's fits as they were but changes paper 2's: those fits read
    machine 0's raw rows, which is why the run charges them to machine 0."""
    _fixed_labels(monkeypatch)
    J, n = 3, 90
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 4))
    y = np.where(X[:, 0] - X[:, 1] > 0, 1.0, -1.0)
    parts = split_rows(n, J)
    common = ["--baselines", "median,rdp-admm", "--epsilon", "1", "--seed", "7",
              "--machines", str(J), "--test-fraction", "0", "--groups", "0,0,1,1"]  # fmt: skip

    def run(labels, name):
        np.savez(tmp_path / f"{name}.npz", X=X, y=labels)
        return _run(tmp_path, *common, "--data", str(tmp_path / f"{name}.npz"), name=name)

    def released(report):  # all but the timings
        admm = report["baselines"]["rdp-admm"]["methods"]
        median = report["baselines"]["median"]["methods"]
        return (
            report["coef"],
            {k: {f: v for f, v in m.items() if f != "time_s"} for k, m in median.items()},
            {k: (m["coef"], m["intercept"]) for k, m in admm.items()},
        )

    base = released(run(y, "base"))
    on_1, on_0 = y.copy(), y.copy()
    on_1[parts[1][0]] *= -1
    on_0[parts[0][0]] *= -1
    assert released(run(on_1, "on1")) == base
    coef, median, admm = released(run(on_0, "on0"))
    assert (coef, median) == base[:2]
    assert admm != base[2]


def test_baseline_seeds_are_their_own_children():
    """Seeded: each baseline's seed is child (J + 2, k), none of the job's streams (children
    (0,) .. (J + 1,) and below) nor another baseline's; unseeded: OS entropy (None)."""
    J, seed = 4, 11
    seeds = [streams.baseline_seed(seed, J, k) for k in (0, 1)]
    assert seeds[0] != seeds[1]
    assert not set(seeds) & set(streams.child_seeds(seed, J + 2))
    assert streams.baseline_seed(None, J, 0) is None
