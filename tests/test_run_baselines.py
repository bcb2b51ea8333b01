"""``--baselines``: rank 0's single-node baselines land in the results file with their ledgers."""

from __future__ import annotations

import json

import pytest

from dpnet.run import main


def test_median_baselines_in_the_results_file(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["--baselines", "median", "--epsilon", "2", "--seed", "3", "--n-samples", "300",
                 "--output", str(out), "--progress-every", "0"]) == 0
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
    assert main(["--baselines", "rdp-admm", "--epsilon", "1", "--seed", "5", "--n-samples",
                 "300", "--output", str(out), "--quiet"]) == 0
    report = json.loads(out.read_text())
    admm = report["baselines"]["rdp-admm"]
    assert set(admm["methods"]) == {"ssADMM", "mpADMM", "DP-SGD", "DP-ADMM", "ADMM-objP"}
    ledger = admm["ledger"]
    assert ledger["relation"] == "replace_one" and len(ledger["releases"]) == 5
    # five (1, 1e-8)-DP fits of the same rows compose to more than 1 and less than 5
    assert 1.0 < ledger["total"]["epsilon"] < 5.0
    assert ledger["total"]["delta"] == 1e-8
    for method in admm["methods"].values():
        assert method["privacy"]["epsilon"] <= 1.0 + 1e-9
