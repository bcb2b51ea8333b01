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
