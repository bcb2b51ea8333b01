"""The results file maps what it reports onto the columns: ``column_groups[k]`` is the group
of ``coef[k]`` (with ``groups`` null the map was missing, so ``selected_groups`` could not be
read off ``coef``)."""

from __future__ import annotations

import json

import numpy as np

from dpnet.run import main


def test_selected_groups_map_onto_coef_through_column_groups(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 6))
    y = np.where(X[:, 2] + X[:, 3] - X[:, 4] > 0, 1.0, -1.0)  # group 7 (columns 2-4) only
    np.savez(tmp_path / "d.npz", X=X, y=y, groups=np.array([3, 3, 7, 7, 7, 1]))
    out = tmp_path / "r.json"
    argv = ["--data", str(tmp_path / "d.npz"), "--machines", "3", "--lam", "0.2", "--quiet"]
    assert main([*argv, "--output", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["column_groups"] == [1, 1, 2, 2, 2, 0]  # the ids 1 < 3 < 7, in order
    coef, column_groups = np.array(results["coef"]), np.array(results["column_groups"])
    assert results["selected_groups"] == [2]
    assert np.all(coef[column_groups != 2] == 0) and np.all(coef[column_groups == 2] != 0)
