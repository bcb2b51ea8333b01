"""The results file maps what it reports onto the columns: ``column_groups[k]`` is the group
of ``coef[k]`` (with ``groups`` null the map was missing, so ``selected_groups`` could not be
read off ``coef``)."""

from __future__ import annotations

import json

import numpy as np
from scipy.linalg import svdvals

from dpnet.run import main


def test_selected_groups_map_onto_coef_through_column_groups(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 6))
    y = np.where(X[:, 2] + X[:, 3] - X[:, 4] > 0, 1.0, -1.0)  # group 7 (columns 2-4) only
    np.savez(tmp_path / "d.npz", X=X, y=y, groups=np.array([3, 3, 7, 7, 7, 1]))
    out = tmp_path / "r.json"
    argv = ["--data", str(tmp_path / "d.npz"), "--machines", "3", "--lam", "0.2", "--quiet"]
    argv += ["--epsilon", "inf"]  # the raw labels: at the default epsilon 1, their randomized
    # response selected group 1 too in about one unseeded run of six
    argv += ["--seed", "0"]  # the held-out rows too: an unseeded split once selected group 1
    assert main([*argv, "--output", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["column_groups"] == [1, 1, 2, 2, 2, 0]  # the ids 1 < 3 < 7, in order
    coef, column_groups = np.array(results["coef"]), np.array(results["column_groups"])
    assert results["selected_groups"] == [2]
    assert np.all(coef[column_groups != 2] == 0) and np.all(coef[column_groups == 2] != 0)


def test_the_penalty_block_is_the_start_by_hand_and_its_changes(tmp_path):
    """``penalty``: the start c_0 = 0.105 sqrt(s) (mu_2/mu_J)^0.2 / (J sqrt(mu_2 mu_J)) with
    s = sigma_max([X - mean, 1])^2 / n (scipy) and the 4-ring's mu_2 = 2, mu_J = 4; the final
    c the start times the changes' factors (each named by its rule); the same on the thread
    and simulated backends."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((1000, 5)) @ rng.standard_normal((5, 5)) + 3.0
    y = np.where(X[:, 0] - X[:, 1] + rng.standard_normal(1000) > 0.0, 1.0, -1.0)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    design = np.hstack([X - X.mean(axis=0), np.ones((1000, 1))])
    curvature = svdvals(design)[0] ** 2 / 1000
    start = 0.105 * np.sqrt(curvature) * 0.5**0.2 / (4 * np.sqrt(2.0 * 4.0))
    argv = ["--data", str(tmp_path / "d.npz"), "--machines", "4", "--topology", "ring"]
    argv += ["--test-fraction", "0", "--seed", "3", "--quiet"]
    blocks = []
    for backend in ("threads", "simulated"):
        out = tmp_path / f"{backend}.json"
        assert main([*argv, "--backend", backend, "--output", str(out)]) == 0
        blocks.append(json.loads(out.read_text())["penalty"])
    assert blocks[0] == blocks[1]
    penalty = blocks[0]
    assert penalty["start"] == float(f"{start:.3g}")
    factors = [factor for _, factor, _ in penalty["changes"]]
    assert penalty["final"] == penalty["start"] * np.prod(factors)
    assert factors and all(factor in (0.5, 2.0) for factor in factors)
    assert {rule for _, _, rule in penalty["changes"]} <= {"balancing", "descent"}


def test_quiet_with_output_still_names_the_file(tmp_path, capsys):
    """--quiet --output printed nothing at all (issue 45, item 8): the user did not learn where
    the results went. Now stdout is one line naming the file; without --output, the summary."""
    out = tmp_path / "x.json"
    argv = ["--n-samples", "200", "--machines", "2", "--max-rounds", "5", "--quiet"]
    assert main([*argv, "--output", str(out)]) == 0
    assert capsys.readouterr().out == f"dpnet: results written to {out}\n"
    assert json.loads(out.read_text())["rounds"] == 5
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("dpnet: 2 machines")
