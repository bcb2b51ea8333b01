"""DPMedianRegressor on finite but absurd magnitudes: right answer or a clear error.

Rows of size 1e300 made np.linalg.norm overflow to inf, so clipping returned all-zero rows and
every method fitted X = 0 with only a RuntimeWarning; rows of size 1e-200 against a 1e-250
bound had norm 0 (underflow) and escaped clipping.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpnet.baselines.median import METHODS, DPMedianRegressor, simulate_median_data
from dpnet.errors import ConfigError, DataError


def _rows(n: int = 400, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X, y = simulate_median_data(n, rng=rng)
    return X * rng.uniform(0.2, 3.0, size=(n, 1)), y  # norms on both sides of 1


def _clipped(X: np.ndarray, bound: float) -> np.ndarray:
    """Reference in moderate arithmetic: x * min(1, bound / ||x||) on the unscaled rows."""
    norms = np.linalg.norm(X, axis=1)
    return X * np.minimum(1.0, bound / norms)[:, None]


@pytest.mark.parametrize("scale,bound", [(1e300, 1.0), (1e305, 2.5), (1e-200, 1e-250)])
def test_clipped_rows_equal_exact_arithmetic(scale: float, bound: float) -> None:
    from dpnet.baselines.median.numerics import clip_rows_safe

    X, _ = _rows()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = clip_rows_safe(X * scale, bound)
    want = X / np.linalg.norm(X, axis=1)[:, None] * bound  # every scaled row is clipped
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


def test_rows_within_the_bound_are_unchanged() -> None:
    from dpnet.baselines.median.numerics import clip_rows_safe

    X, _ = _rows()
    got = clip_rows_safe(X, 1.0)
    inside = np.linalg.norm(X, axis=1) <= 1.0
    assert 0 < inside.sum() < len(X)
    np.testing.assert_array_equal(got[inside], X[inside])
    np.testing.assert_allclose(got, _clipped(X, 1.0), rtol=1e-15, atol=0)
    np.testing.assert_array_equal(clip_rows_safe(np.zeros((2, 3)), 1.0), np.zeros((2, 3)))


@pytest.mark.parametrize("method", METHODS)
def test_fit_on_1e300_rows_equals_fit_on_the_clipped_rows(method: str) -> None:
    """x_bound = 1 is data-independent: X * 1e300 clips to the unit rows of X."""
    X, y = _rows()
    kw = dict(method=method, y_bound=10.0, random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        huge = DPMedianRegressor(**kw).fit(X * 1e300, y)
    ref = DPMedianRegressor(**kw).fit(X / np.linalg.norm(X, axis=1)[:, None], y)
    assert np.any(huge.coef_ != 0)
    np.testing.assert_allclose(huge.coef_, ref.coef_, rtol=1e-9, atol=1e-9)
    assert huge.intercept_ == pytest.approx(ref.intercept_, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("where", ["X", "y"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_are_refused_with_one_data_error(method: str, where: str, bad: float) -> None:
    X, y = _rows(50)
    X, y = X.copy(), y.copy()
    (X if where == "X" else y)[7, ...] = bad
    with pytest.raises(DataError, match=f"Input {where} contains (NaN|infinity)"):
        DPMedianRegressor(method=method, y_bound=10.0).fit(X, y)


def test_predict_refuses_nan_and_overflow() -> None:
    X, y = _rows(100)
    est = DPMedianRegressor(method="exact").fit(X, y)
    with pytest.raises(DataError, match="Input X contains NaN"):
        est.predict(np.array([[np.nan, 0.0, 0.0]]))
    assert np.abs(est.coef_).sum() > 1.5
    with pytest.raises(DataError, match="overflow"):
        est.predict(np.sign(est.coef_)[None, :] * 1.5e308)


@pytest.mark.parametrize("name", ["x_bound", "y_bound"])
def test_absurd_bounds_are_refused(name: str) -> None:
    """x_bound = 1e200 ended in ValueError/OverflowError inside the solvers."""
    X, y = _rows(100)
    kw = {"y_bound": 10.0, name: 1e200}
    with pytest.raises(ConfigError, match=rf"'{name}' parameter .* range \(0.0, 1e\+100\]"):
        DPMedianRegressor(method="objective", **kw).fit(X * 1e200, y)
