"""Label privacy: the machines fit the columns centred at their mean over all training rows,
and start from a penalty scaled by their curvature lambda_max(X~^T X~) / n.

Columns far from zero share a direction with the intercept column; uncentred, a job on columns
of mean 100 ran 3,000 rounds and stopped short of the optimum. The intercept is not penalized,
so the shift changes only its parametrization: the job on X + 100 is the job on X with
b = b_0 - 100 sum(beta). The shift is the same float whichever layout holds the rows, and under
record privacy (features protected) there is none.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import svdvals

from dpnet.cli import parse_config, prepare_problem
from dpnet.decentralized import PublicColumns, RawShard, cross_boundary, public_columns
from dpnet.decentralized.columns import POOLED_SCATTER_ENTRIES, ColumnMoments
from dpnet.decentralized.machine import in_given_columns
from dpnet.errors import PrivacyError
from dpnet.privacy import LabelPrivacy
from dpnet.run import main

ROWS = (50, 80, 65)


def _files(tmp_path: Path, offset: float) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    parts = []
    for j, rows in enumerate(ROWS):
        X = rng.standard_normal((rows, 6))
        y = np.where(X[:, 0] - X[:, 3] + rng.standard_normal(rows) > 0, 1.0, -1.0)
        np.savez(tmp_path / f"m{offset:g}-{j}.npz", X=X + offset, y=y)
        parts.append(np.column_stack([X + offset, y]))
    whole = np.vstack(parts)
    np.savez(tmp_path / f"all{offset:g}.npz", X=whole[:, :-1], y=whole[:, -1])
    return parts


def _job(tmp_path: Path, data: str, *extra: str) -> dict:
    out = tmp_path / "out.json"
    argv = ["--data", str(tmp_path / data), "--machines", "3", "--topology", "path"]
    argv += ["--seed", "6", "--epsilon", "2", "--quiet", "--backend", "simulated"]
    assert main([*argv, *extra, "--output", str(out)]) == 0
    return json.loads(out.read_text())


def test_a_job_on_shifted_columns_is_the_job_on_the_columns(tmp_path):
    _files(tmp_path, 0.0)
    _files(tmp_path, 100.0)
    plain = _job(tmp_path, "m0-{rank}.npz")
    shifted = _job(tmp_path, "m100-{rank}.npz")
    assert plain["stop_reason"] == shifted["stop_reason"] == "converged"
    assert abs(shifted["rounds"] - plain["rounds"]) <= 2
    coef = np.array(plain["coef"])
    np.testing.assert_allclose(shifted["coef"], coef, atol=1e-9)
    assert shifted["intercept"] == pytest.approx(plain["intercept"] - 100.0 * coef.sum(), abs=1e-7)


def test_the_shift_is_the_same_whichever_layout_holds_the_rows(tmp_path):
    """Rank 0 splitting one file and every machine loading its own give the same fit, bit for
    bit: the shift is added from the machines' column sums in rank order either way."""
    _files(tmp_path, 100.0)
    own = _job(tmp_path, "m100-{rank}.npz")
    split = _job(tmp_path, "all100.npz", "--test-fraction", "0", "--shard-sizes", "50,80,65")
    assert split["coef"] == own["coef"] and split["intercept"] == own["intercept"]
    assert split["rounds"] == own["rounds"]


def test_the_shift_is_the_mean_and_the_model_is_the_same():
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((n, 4)) + 50.0 for n in ROWS]
    X = np.vstack(parts)
    shift = PublicColumns.pooled([ColumnMoments.of(part, 3) for part in parts], len(X)).shift
    np.testing.assert_allclose(shift, X.mean(axis=0), rtol=1e-14)
    fortran = [ColumnMoments.of(np.asfortranarray(p), 3) for p in parts]
    assert np.array_equal(shift, PublicColumns.pooled(fortran, len(X)).shift)
    theta_c = rng.standard_normal(5)
    theta = in_given_columns(theta_c, shift)
    np.testing.assert_allclose(X @ theta[:-1] + theta[-1], (X - shift) @ theta_c[:-1] + theta_c[-1])
    stack = np.stack([theta_c, 2 * theta_c])
    np.testing.assert_array_equal(in_given_columns(stack, shift)[0], theta)
    assert in_given_columns(theta_c, None) is theta_c


def test_the_curvature_is_the_designs_largest_eigenvalue_over_n():
    """lambda_max(X~^T X~) / n of X~ = [X - 1 m^T, 1], pooled from the machines' scatters,
    against the largest singular value of X~ built whole (scipy); columns of mean 1e8, where
    the uncentred Gram (sum x x^T / n - m m^T) would cancel every digit."""
    rng = np.random.default_rng(3)
    mixing = rng.standard_normal((5, 5))
    parts = [rng.standard_normal((n, 5)) @ mixing + 1e8 for n in ROWS]
    X = np.vstack(parts)
    pooled = PublicColumns.pooled([ColumnMoments.of(part, 3) for part in parts], len(X))
    design = np.hstack([X - X.mean(axis=0), np.ones((len(X), 1))])
    reference = svdvals(design)[0] ** 2 / len(X)
    assert reference > 2.0  # the centred columns', not the ones column's eigenvalue 1
    assert pooled.curvature == pytest.approx(reference, rel=1e-9)
    # centred 0/1 columns have variance <= 1/4: the ones column's eigenvalue, 1, is the largest
    binary = [(rng.random((n, 8)) < 0.3).astype(float) for n in ROWS]
    parts_01 = [ColumnMoments.of(part, 3) for part in binary]
    assert PublicColumns.pooled(parts_01, sum(ROWS)).curvature == 1.0


def test_more_scatter_than_the_machines_may_pool_has_no_curvature():
    """J p^2 above POOLED_SCATTER_ENTRIES (every machine would receive all J scatters): no
    scatter is formed, the curvature is unknown, whichever layout holds the rows."""
    machines = 2**13
    columns = 1 + int(np.sqrt(POOLED_SCATTER_ENTRIES / machines))  # just above the cap
    rows = [np.full((1, columns), float(j)) for j in range(machines)]
    assert ColumnMoments.of(rows[0], machines).scatter is None
    assert ColumnMoments.of(rows[0][:, :-1], machines).scatter is not None  # at the cap
    pooled = PublicColumns.pooled([ColumnMoments.of(x, machines) for x in rows], machines)
    assert pooled.curvature is None
    np.testing.assert_allclose(pooled.shift, (machines - 1) / 2)
    in_process = public_columns(LabelPrivacy(), rows, machines)  # the simulator's and estimator's
    assert in_process is not None and in_process.curvature is None


def test_features_whose_scatter_overflows_have_no_curvature():
    """Columns of 1e160 (the estimator takes any finite value): the scatter is inf, so the
    curvature is unknown and the start the spectral one, not an eigensolver's error."""
    huge = np.random.default_rng(0).standard_normal((20, 3)) * 1e160
    with np.errstate(over="ignore", invalid="ignore"):
        pooled = PublicColumns.pooled([ColumnMoments.of(huge, 1)], 20)
    assert pooled.curvature is None and np.isfinite(pooled.shift).all()


def test_record_privacy_uses_the_columns_as_given():
    """Under record privacy the features are protected: no shift is computed from them, and a
    shard carrying one is refused at the boundary."""
    config = parse_config(
        ["--privacy", "record", "--row-bound", "3", "--epsilon", "1", "--seed", "1"]
    )
    assert all(s.columns is None for s in prepare_problem(config, 3).shards or [])
    label = prepare_problem(parse_config(["--seed", "1"]), 3).shards or []
    assert all(s.columns is not None for s in label)
    facts = PublicColumns(np.zeros(3), 1.0)
    raw = RawShard(np.ones((2, 3)), np.ones(2), 2, np.arange(3), np.ones(3), facts)
    with pytest.raises(PrivacyError, match="no column facts"):
        cross_boundary(raw, 1.0, np.random.default_rng(0), "machine 0", row_bound=1.0)
