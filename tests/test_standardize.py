"""Decentralized standardization (``--standardize``, ``standardize=True``).

Under label privacy the features are public: the machines agree on every column's mean and
standard deviation over all training rows from each machine's row count, column sums and sums
of squares (``columns.ColumnMoments``, pooled in rank order: the same floats on every
machine and backend), fit the columns (x - mean) / deviation and release the model on the
columns as given. Under record privacy the features are private: standardization is a noisy
release of its own (tests/test_standardize_record.py). Without standardization a column of
standard deviation above ``columns.BADLY_SCALED`` is named by one warning line with the remedy
(under label privacy only).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import svdvals
from sklearn.exceptions import ConvergenceWarning

from dpnet.decentralized.columns import (
    BADLY_SCALED,
    BadlyScaledWarning,
    ColumnMoments,
    PublicColumns,
)
from dpnet.decentralized.machine import in_given_columns
from dpnet.estimators import DecentralizedGroupLassoLogistic
from dpnet.run import main
from tests.launch import run_job
from tests.test_backends_agree import assert_same

ROWS = (50, 80, 65)
INCOME = 3e4, 1e4  # the column: mean and standard deviation


def _rows(seed: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns on very different scales (an income near 1e4, a rate near 1e-3, a constant)
    and labels that depend on the income and a unit column."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, 5))
    X[:, 0] = rng.normal(*INCOME, size=rows)
    X[:, 2] *= 1e-3
    X[:, 4] = 7.25  # constant: its scale is 1
    z = (X[:, 0] - INCOME[0]) / INCOME[1] + X[:, 1] + 400 * X[:, 2]
    y = np.where(z + rng.logistic(size=rows) > 0, 1.0, -1.0)
    return X, y


def _machine_files(tmp_path: Path) -> np.ndarray:
    """One npz file per machine; the training rows of all machines, stacked."""
    parts = []
    for j, rows in enumerate(ROWS):
        X, y = _rows(10 + j, rows)
        np.savez(tmp_path / f"m{j}.npz", X=X, y=y)
        parts.append(X)
    return np.vstack(parts)


def _job(tmp_path: Path, name: str, args: list[str], n_ranks: int | None = None) -> dict:
    out = tmp_path / f"{name}.json"
    argv = [*args, "--quiet", "--output", str(out)]
    if n_ranks is None:
        assert main(argv) == 0
    else:
        done = run_job(argv, n_ranks=n_ranks, timeout=300)
        assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


PER_MACHINE = ["--machines", "3", "--topology", "path", "--seed", "6", "--epsilon", "2"]


def _own_files_args(tmp_path: Path) -> list[str]:
    return ["--data", str(tmp_path / "m{rank}.npz"), *PER_MACHINE, "--standardize"]


def test_pooled_moments_are_numpys_mean_and_deviation():
    """Pooled from three machines' moments: numpy's mean and (population) standard deviation
    over all rows, columns far from zero included; a constant column is divided by 1; the
    curvature is the standardized design's lambda_max / n (scipy)."""
    parts = [_rows(j, n)[0] for j, n in enumerate(ROWS)]
    X = np.vstack(parts)
    moments = [ColumnMoments.of(part, 3) for part in parts]
    facts = PublicColumns.pooled(moments, len(X), standardize=True)
    assert facts.scale is not None and facts.deviation is not None
    np.testing.assert_allclose(facts.shift, X.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(facts.deviation[:4], X[:, :4].std(axis=0), rtol=1e-12)
    np.testing.assert_allclose(facts.scale[:4], X[:, :4].std(axis=0), rtol=1e-12)
    assert facts.scale[4] == 1.0  # constant: np.std gives 0 (or rounding), the scale 1
    standardized = (X - facts.shift) / facts.scale
    design = np.hstack([standardized, np.ones((len(X), 1))])
    assert facts.curvature == pytest.approx(svdvals(design)[0] ** 2 / len(X), rel=1e-9)
    centred = PublicColumns.pooled(moments, len(X))  # without: centred only, as before
    assert centred.scale is None and np.array_equal(centred.shift, facts.shift)
    assert centred.curvature is not None and centred.curvature > 1e7  # the income's variance


def test_the_model_maps_back_to_the_columns_as_given():
    """coef / scale and the intercept moved by the shift predict exactly as the standardized
    model does on the standardized rows."""
    rng = np.random.default_rng(1)
    X = _rows(1, 40)[0]
    shift, scale = X.mean(axis=0), np.array([1e4, 1.0, 1e-3, 2.0, 1.0])
    theta_std = rng.standard_normal((3, 6))  # a stack, as the machines' Z
    given = in_given_columns(theta_std, shift, scale)
    for std, back in zip(theta_std, given, strict=True):
        expected = (X - shift) / scale @ std[:-1] + std[-1]
        np.testing.assert_allclose(X @ back[:-1] + back[-1], expected, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(given[:, :-1] * scale, theta_std[:, :-1], rtol=1e-15)


def test_the_network_agrees_on_numpys_columns_on_threads_and_simulated(tmp_path):
    """Every machine loads its own file; the released centre and scale are numpy's over all
    rows, and the two backends' results agree to 1e-12 (centre and scale bit for bit)."""
    X = _machine_files(tmp_path)
    args = _own_files_args(tmp_path)
    threads = _job(tmp_path, "threads", [*args, "--backend", "threads"])
    simulated = _job(tmp_path, "simulated", [*args, "--backend", "simulated"])
    scaling = threads["standardization"]
    np.testing.assert_allclose(scaling["center"], X.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(scaling["scale"][:4], X[:, :4].std(axis=0), rtol=1e-12)
    assert scaling["scale"][4] == 1.0
    assert simulated["standardization"] == scaling
    assert threads["stop_reason"] == "converged" and threads["config"]["standardize"]
    assert_same(threads, simulated)


@pytest.mark.mpi_launch
def test_the_network_agrees_on_numpys_columns_under_mpiexec(tmp_path):
    X = _machine_files(tmp_path)
    args = _own_files_args(tmp_path)
    mpi = _job(tmp_path, "mpi", args, n_ranks=3)
    simulated = _job(tmp_path, "simulated", [*args, "--backend", "simulated"])
    assert mpi["backend"] == "mpi"
    np.testing.assert_allclose(mpi["standardization"]["center"], X.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(
        mpi["standardization"]["scale"][:4], X[:, :4].std(axis=0), rtol=1e-12
    )
    assert_same(mpi, simulated)


def test_one_file_split_by_rank_0_gives_the_same_fit(tmp_path):
    """The layout does not matter: rank 0 splitting one file into the same shards pools the
    same moments in the same order."""
    _machine_files(tmp_path)
    whole = [np.load(tmp_path / f"m{j}.npz") for j in range(3)]
    np.savez(
        tmp_path / "all.npz",
        X=np.vstack([w["X"] for w in whole]),
        y=np.concatenate([w["y"] for w in whole]),
    )
    base = [*PER_MACHINE, "--standardize", "--backend", "simulated"]
    own = _job(tmp_path, "own", ["--data", str(tmp_path / "m{rank}.npz"), *base])
    split_args = ["--data", str(tmp_path / "all.npz"), "--test-fraction", "0"]
    split = _job(tmp_path, "split", [*split_args, "--shard-sizes", "50,80,65", *base])
    assert split["standardization"] == own["standardization"]
    assert split["coef"] == own["coef"] and split["intercept"] == own["intercept"]


def test_the_estimator_fits_the_standardized_model_on_the_given_columns():
    """standardize=True on X predicts as standardize=False on numpy's standardized X (the
    same problem): coef_ is the standardized model's divided by the scale."""
    X, y = _rows(3, 600)
    mean, std = X.mean(axis=0), np.where(X.std(axis=0) > 1e-9, X.std(axis=0), 1.0)
    kw = dict(lam=0.02, epsilon=1.0, n_machines=4, random_state=2, classes=(-1.0, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", BadlyScaledWarning)  # neither fit warns
        given = DecentralizedGroupLassoLogistic(**kw, standardize=True).fit(X, y)
        scaled = DecentralizedGroupLassoLogistic(**kw).fit((X - mean) / std, y)
    assert given.stop_reason_ == scaled.stop_reason_ == "converged"
    np.testing.assert_allclose(given.coef_ * std, scaled.coef_, atol=1e-7)
    np.testing.assert_allclose(
        given.decision_function(X), scaled.decision_function((X - mean) / std), atol=1e-6
    )
    assert np.array_equal(given.predict(X), scaled.predict((X - mean) / std))
    assert given.objective_ == pytest.approx(scaled.objective_, rel=1e-8)


def test_the_estimator_and_the_command_line_give_the_same_model(tmp_path):
    X, y = _rows(4, 500)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    report = _job(
        tmp_path,
        "cli",
        ["--data", str(tmp_path / "d.npz"), "--test-fraction", "0", "--machines", "5"]
        + ["--seed", "7", "--epsilon", "1.5", "--standardize", "--backend", "simulated"],
    )
    model = DecentralizedGroupLassoLogistic(
        epsilon=1.5, n_machines=5, random_state=7, classes=(-1.0, 1.0), standardize=True
    ).fit(X, y)
    assert report["rounds"] == model.n_iter_ and report["stop_reason"] == model.stop_reason_
    np.testing.assert_allclose(report["coef"], model.coef_, rtol=0, atol=1e-12)
    assert report["intercept"] == pytest.approx(model.intercept_, abs=1e-9)
    assert report["objective"]["on_randomized_labels"] == pytest.approx(model.objective_, rel=1e-12)


def test_an_unscaled_income_converges_with_standardization_and_warns_without():
    """The issue's case: a column near 1e4 crawls and is named by one warning with the remedy;
    standardized, the same fit converges."""
    X, y = _rows(5, 1000)
    kw = dict(lam=0.01, epsilon=np.inf, n_machines=5, random_state=0, max_rounds=400)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plain = DecentralizedGroupLassoLogistic(**kw).fit(X, y)
    assert {w.category for w in caught} == {BadlyScaledWarning, ConvergenceWarning}
    scaling = [w for w in caught if w.category is BadlyScaledWarning]
    assert len(scaling) == 1 and "\n" not in str(scaling[0].message)
    assert "column 0 has standard deviation" in str(scaling[0].message)
    assert str(scaling[0].message).endswith("use standardize=True")
    assert plain.stop_reason_ == "max_rounds"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither the scale nor the convergence
        fitted = DecentralizedGroupLassoLogistic(**kw, standardize=True).fit(X, y)
    assert fitted.stop_reason_ == "converged" and fitted.n_iter_ < 100


def test_well_scaled_columns_draw_no_warning():
    X = np.random.default_rng(0).standard_normal((200, 3)) * [1.0, 50.0, 1e-3]
    y = (X[:, 0] > 0).astype(int)
    assert 50.0 < BADLY_SCALED
    short = DecentralizedGroupLassoLogistic(epsilon=np.inf, max_rounds=5, classes=(0, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 5 rounds: not the point here
        warnings.simplefilter("error", BadlyScaledWarning)
        short.fit(X, y)
        with pytest.warns(BadlyScaledWarning, match="column 1 "):
            short.fit(X * [1, 3, 1], y)


def test_the_command_line_names_the_column_in_one_line(tmp_path, capsys):
    X, y = _rows(6, 400)
    header = "income,a,rate,b,const,label"
    np.savetxt(tmp_path / "d.csv", np.column_stack([X, (y > 0)]), delimiter=",",
               header=header, comments="")  # fmt: skip
    args = ["--data", str(tmp_path / "d.csv"), "--machines", "3", "--seed", "1"]
    args += ["--backend", "simulated", "--max-rounds", "300", "--quiet"]
    assert main(args) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    scaling = [line for line in lines if "badly scaled" in line]
    assert len(scaling) == 1, lines
    assert re.fullmatch(
        r"dpnet: warning: badly scaled columns: column 0 \('income'\) has standard deviation "
        r"[0-9.]+e\+0[34] \(the intercept's scale is 1\), so the solver may crawl and the "
        r"penalty weighs the columns unevenly; use --standardize",
        scaling[0],
    ), scaling[0]
    assert main([*args, "--standardize"]) == 0
    assert "badly scaled" not in capsys.readouterr().err


def test_record_privacy_names_no_badly_scaled_column():
    """The features are private there: nothing pooled exactly, nothing to warn from, with or
    without standardization (whose released sums the warning does not read either)."""
    X, y = _rows(7, 60)  # a badly scaled column under record privacy: nothing public to judge
    for standardize in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error", BadlyScaledWarning)
            DecentralizedGroupLassoLogistic(
                privacy="record", row_bound=3.0, max_rounds=3, random_state=0,
                classes=(-1, 1), standardize=standardize,
            ).fit(X, y)  # fmt: skip
