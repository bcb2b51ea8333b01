"""``--baselines``: rank 0's single-node baselines land in the results file with their ledgers."""

from __future__ import annotations

import json

import pytest

from dpnet.run import main


def test_median_baselines_in_the_results_file(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "--baselines",
                "median",
                "--epsilon",
                "2",
                "--seed",
                "3",
                "--n-samples",
                "300",
                "--output",
                str(out),
                "--progress-every",
                "0",
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    median = report["baselines"]["median"]
    assert set(median["methods"]) >= {"exact", "objective", "irls", "coordinate"}
    # three DP fits at epsilon = 2 each, composed sequentially on the same data
    assert median["ledger"]["total"]["pure_epsilon"] == pytest.approx(6.0)
    assert median["ledger"]["relation"] == "replace_one"
    # the main job's ledger is separate: its data set is a different one
    assert report["privacy"]["ledger"]["total"]["pure_epsilon"] == pytest.approx(2.0)
    assert "baseline median" in capsys.readouterr().out


def test_rdp_admm_baselines_in_the_results_file(tmp_path):
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "--baselines",
                "rdp-admm",
                "--epsilon",
                "1",
                "--seed",
                "5",
                "--n-samples",
                "300",
                "--output",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    admm = report["baselines"]["rdp-admm"]
    assert set(admm["methods"]) == {"ssADMM", "mpADMM", "DP-SGD", "DP-ADMM", "ADMM-objP"}
    ledger = admm["ledger"]
    assert ledger["relation"] == "replace_one" and len(ledger["releases"]) == 5
    # ADMM-objP minimises inexactly: its release has no established guarantee, so it enters
    # the ledger as NonPrivateDpEvent and the run's total is not established (inf) instead of
    # silently adding its nominal epsilon
    objp = next(r for r in ledger["releases"] if "ADMM-objP" in r["label"])
    assert objp["event"]["type"] == "NonPrivateDpEvent"
    assert objp["guarantee"] == (
        "approximate: guarantee holds only for the exact minimiser; "
        "not established for this release"
    )
    assert ledger["total"]["epsilon"] == "inf" and ledger["total"]["pld_epsilon"] == "inf"
    assert ledger["total"]["delta"] == 1e-8
    assert admm["not_established"] == {"ADMM-objP": objp["guarantee"]}
    # the four accounted (1, 1e-8)-DP fits of the same rows compose to more than 1, less than 4
    accounted = admm["accounted_fits"]
    assert accounted["methods"] == ["ssADMM", "DP-SGD", "mpADMM", "DP-ADMM"]
    assert "excludes ADMM-objP" in accounted["label"]
    assert 1.0 < accounted["epsilon"] < 4.0 and accounted["delta"] == 1e-8
    for name, method in admm["methods"].items():
        if name == "ADMM-objP":
            assert method["privacy"]["epsilon"] == "inf"
            assert method["privacy"]["private"] is False
            assert method["privacy"]["epsilon_if_exact_minimiser"] <= 1.0 + 1e-9
        else:
            assert method["privacy"]["epsilon"] <= 1.0 + 1e-9


def test_baselines_without_seed_draw_os_entropy(tmp_path):
    """No --seed: the baselines' data and noise come from OS entropy (a fixed default seed
    would let anyone recompute the noise); the results record no seed."""
    coefs = []
    for k in range(2):
        out = tmp_path / f"r{k}.json"
        assert (
            main(
                [
                    "--baselines",
                    "median",
                    "--epsilon",
                    "2",
                    "--n-samples",
                    "200",
                    "--n-test",
                    "50",
                    "--output",
                    str(out),
                    "--quiet",
                ]
            )
            == 0
        )
        median = json.loads(out.read_text())["baselines"]["median"]
        assert median["seed"] is None
        coefs.append(median["methods"]["objective"]["coef"])
    assert coefs[0] != coefs[1]
