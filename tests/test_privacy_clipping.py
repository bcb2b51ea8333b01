"""Clipping to data-independent bounds."""

from __future__ import annotations

import numpy as np
import pytest

from dpnet.errors import DataError, PrivacyError
from dpnet.privacy import check_row_norms, clip_per_example, clip_rows_l2, clip_values


def test_clip_rows_scales_only_long_rows() -> None:
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    out = clip_rows_l2(X, 1.0)
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]], rtol=1e-15)
    check_row_norms(out, 1.0)
    with pytest.raises(DataError, match="row norms must be <= 1.0"):
        check_row_norms(X, 1.0)


def test_clip_per_example_norm_bound() -> None:
    g = np.random.default_rng(0).normal(scale=3.0, size=(200, 5))
    out = clip_per_example(g, 2.0)
    norms = np.linalg.norm(out, axis=1)
    assert norms.max() <= 2.0 * (1 + 1e-12)
    short = np.linalg.norm(g, axis=1) <= 2.0
    np.testing.assert_array_equal(out[short], g[short])
    # long rows keep their direction
    np.testing.assert_allclose(
        out[~short] / norms[~short, None],
        g[~short] / np.linalg.norm(g[~short], axis=1, keepdims=True),
    )


def test_clip_values() -> None:
    np.testing.assert_array_equal(clip_values(np.array([-5.0, 0.5, 7.0]), 2.0), [-2.0, 0.5, 2.0])


@pytest.mark.parametrize("bound", [0.0, -1.0, np.inf, np.nan])
def test_bounds_must_be_given_and_positive(bound: float) -> None:
    with pytest.raises(PrivacyError, match="clipping bound"):
        clip_values(np.ones(3), bound)


def test_bad_arrays() -> None:
    with pytest.raises(DataError, match="2-d"):
        clip_rows_l2(np.ones(3), 1.0)
    with pytest.raises(DataError, match="NaN"):
        clip_values(np.array([np.nan]), 1.0)
