"""DPMedianRegressor: conventions, privacy accounting, accuracy trends, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpnet.baselines.median import (
    PAPER_PARAMS,
    DPMedianRegressor,
    run_median_baselines,
    simulate_median_data,
)
from dpnet.baselines.median.algorithms import private_start_share
from dpnet.baselines.median.numerics import exact_lad, ridge_lad_exact
from dpnet.errors import ConfigError, DataError
from dpnet.privacy import PrivacyLedger


@pytest.fixture(scope="module")
def data():
    return simulate_median_data(3000, rng=np.random.default_rng(11))


def test_init_stores_params_and_fit_returns_self(data):
    est = DPMedianRegressor(method="irls", epsilon=2.0, lam=0.01, random_state=0)
    assert (est.method, est.epsilon, est.lam, est.random_state) == ("irls", 2.0, 0.01, 0)
    assert not hasattr(est, "coef_")
    X, y = data
    assert est.fit(X, y) is est
    assert est.coef_.shape == (3,)
    np.testing.assert_allclose(est.predict(X[:5]), est.intercept_ + X[:5] @ est.coef_)


def test_exact_method_matches_lp_and_is_recorded_non_private(data):
    X, y = data
    est = DPMedianRegressor(method="exact", lam=0.0).fit(X, y)
    np.testing.assert_allclose(np.r_[est.intercept_, est.coef_], exact_lad(X, y, 0.0))
    assert est.privacy_["total"]["pure_epsilon"] == "inf"


@pytest.mark.parametrize(
    "method, extra",
    [
        ("objective", {}),
        ("irls", {}),
        ("coordinate", {"y_bound": 10.0}),
        ("coordinate", {"y_bound": 10.0, "init": "private"}),
    ],
)
def test_privacy_spent_is_epsilon(data, method, extra):
    X, y = data
    ledger = PrivacyLedger()
    est = DPMedianRegressor(method=method, epsilon=0.7, random_state=1, **extra)
    est.fit(X, y, ledger=ledger)
    assert ledger.pure_epsilon() == pytest.approx(0.7)
    assert est.privacy_["total"]["pure_epsilon"] == pytest.approx(0.7)
    assert est.privacy_["relation"] == "replace_one"


def _mean_error(method, n, eps, seeds=range(4), **kw):
    X, y = simulate_median_data(n, rng=np.random.default_rng(n))
    ref = exact_lad(X, np.clip(y, -10, 10), PAPER_PARAMS["lam"])
    errs = []
    for s in seeds:
        est = DPMedianRegressor(
            method=method, epsilon=eps, random_state=s, **{**PAPER_PARAMS, **kw}
        ).fit(X, y)
        errs.append(np.linalg.norm(np.r_[est.intercept_, est.coef_] - ref))
    return float(np.mean(errs))


@pytest.mark.parametrize(
    "method, kw", [("objective", {}), ("irls", {}), ("coordinate", {"step": 10.0})]
)
def test_error_falls_with_n_and_epsilon(method, kw):
    small_n, big_n = 2000, 40_000
    e_small = _mean_error(method, small_n, 0.5, **kw)
    e_big = _mean_error(method, big_n, 0.5, **kw)
    e_big_eps = _mean_error(method, big_n, 2.0, **kw)
    assert e_big < 0.5 * e_small
    assert e_big_eps < e_big


def test_run_median_baselines_is_json_and_records_releases():
    ledger = PrivacyLedger()
    out = run_median_baselines(epsilon=1.0, seed=3, n_samples=2000, ledger=ledger)
    json.dumps(out)
    assert set(out["methods"]) == {"exact", "objective", "irls", "coordinate"}
    # coordinate: the private start (Alg. 2) and the descent are two releases
    assert len(ledger.releases) == 4 and all(r.machine is None for r in ledger.releases)
    assert ledger.pure_epsilon() == pytest.approx(3.0) == out["pure_epsilon_spent"]
    assert out["methods"]["objective"]["l2_error_vs_exact"] < 2.0


@pytest.mark.parametrize(
    "kwargs, X, y, error",
    [
        ({}, [[np.nan, 0.0], [0.1, 0.2]], [1.0, 2.0], DataError),
        ({}, [[0.0, 0.1], [0.1, 0.2]], [[1.0, 1.0], [2.0, 2.0]], DataError),
        ({}, [[0.0, 0.1]], [1.0], DataError),
        ({}, [[0.0, 0.1], [0.1, 0.2]], [1.0, 2.0, 3.0], DataError),
        ({}, [0.0, 0.1], [1.0, 2.0], DataError),
        ({"epsilon": 0.0}, None, None, ConfigError),
        ({"epsilon": -1.0}, None, None, ConfigError),
        ({"gamma": 0.0}, None, None, ConfigError),
        ({"gamma": -0.1}, None, None, ConfigError),
        ({"x_bound": 0.0}, None, None, ConfigError),
        ({"y_bound": -2.0}, None, None, ConfigError),
        ({"method": "median"}, None, None, ConfigError),
        ({"method": "irls", "e": 0.0}, None, None, ConfigError),
        ({"method": "irls", "lam": 0.0}, None, None, ConfigError),
        ({"method": "coordinate"}, None, None, ConfigError),  # no y_bound
        ({"method": "coordinate", "y_bound": 5.0, "n_splits": 0}, None, None, ConfigError),
        ({"method": "coordinate", "y_bound": 5.0, "init": np.zeros(2)}, None, None, ConfigError),
    ],
)
def test_bad_input_raises_clear_errors(data, kwargs, X, y, error):
    X = data[0][:50] if X is None else X
    y = data[1][:50] if y is None else y
    with pytest.raises(error):
        DPMedianRegressor(**kwargs).fit(X, y)


def test_predict_before_fit_and_wrong_width():
    from sklearn.exceptions import NotFittedError

    for error in (ConfigError, NotFittedError):
        with pytest.raises(error):
            DPMedianRegressor().predict(np.zeros((2, 3)))
    est = DPMedianRegressor(method="exact", lam=0.0).fit(
        *simulate_median_data(100, rng=np.random.default_rng(0))
    )
    with pytest.raises(DataError):
        est.predict(np.zeros((2, 4)))


@pytest.fixture(scope="module")
def big():
    """n = 1e5 rows of the paper's simulation and the exact ridge-LAD fit on the clipped data."""
    X, y = simulate_median_data(100_000, rng=np.random.default_rng(7))
    return X, y, exact_lad(X, np.clip(y, -10, 10), PAPER_PARAMS["lam"])


@pytest.mark.parametrize("method", ["objective", "irls", "coordinate"])
def test_defaults_land_near_the_exact_fit(big, method):
    """Default parameters (y_bound = 10 for Alg. 3) at n = 1e5, epsilon = 1.

    Alg. 3 from its former default init="zero" stayed 4.79 away (steps 0.1/(t+1) move beta by
    at most 0.43 in total); the private start ends within 0.3 (1e6 rows: 0.04)."""
    X, y, ref = big
    for seed in range(3):
        est = DPMedianRegressor(method=method, y_bound=10.0, random_state=seed).fit(X, y)
        assert np.linalg.norm(np.r_[est.intercept_, est.coef_] - ref) < 0.5
        assert est.privacy_["total"]["pure_epsilon"] == pytest.approx(1.0)


def test_coordinate_zero_start_stays_stuck_near_zero(big):
    X, y, ref = big
    est = DPMedianRegressor(method="coordinate", y_bound=10.0, init="zero", random_state=0)
    est.fit(X, y)
    assert np.linalg.norm(np.r_[est.intercept_, est.coef_] - ref) > 4.0


def test_coordinate_private_start_without_ridge(big):
    """lam = 0 with init="private" divided by min(a_mu, lam) = 0; the start now uses the ridge
    a_mu = 1/sqrt(n) on beta (data-independent) and the descent the unpenalised loss."""
    X, y, _ = big
    # the exact LAD fit, KKT-certified (the HiGHS LP agrees, test_median_numerics; it takes
    # minutes at n = 1e5)
    ref = ridge_lad_exact(X, np.clip(y, -10, 10), 0.0)
    ledger = PrivacyLedger()
    est = DPMedianRegressor(method="coordinate", lam=0.0, y_bound=10.0, random_state=0)
    est.fit(X, y, ledger=ledger)
    assert np.linalg.norm(np.r_[est.intercept_, est.coef_] - ref) < 0.5
    share = _default_share(X.shape[0], lam=1 / np.sqrt(X.shape[0]))
    assert [r.pure_epsilon for r in ledger.releases] == pytest.approx([share, 1.0 - share])
    assert ledger.pure_epsilon() == pytest.approx(1.0)


def _default_share(n: int, *, lam: float = PAPER_PARAMS["lam"], d: int = 3) -> float:
    return private_start_share(
        n,
        d,
        lam=lam,
        intercept_ridge=1 / np.sqrt(n),
        x_bound=1.0,
        y_bound=10.0,
        beta_bound=10.0,
        n_splits=40,
        step=0.1,
    )


@pytest.mark.parametrize("n", [5000, 100_000, 1_000_000])
def test_default_start_share_minimises_the_released_noise_variance(n):
    """The default init_share is the argmin of V(s) = c0/s^2 + c1/(1-s)^2, the Laplace variance
    of the released theta, with c0 and c1 recomputed here from the mechanisms' scales."""
    from dpnet.baselines.median.algorithms import CERT_SLACK
    from dpnet.baselines.median.privacy import (
        coordinate_beta_l1_sensitivity,
        coordinate_mu_sensitivity,
        irls_l2_sensitivity,
        split_epsilon,
    )

    d, a_mu, lam = 3, 1 / np.sqrt(n), PAPER_PARAMS["lam"]
    l1 = (
        2.0
        * (1 + 2 * CERT_SLACK)
        * irls_l2_sensitivity(n, lam=lam, intercept_ridge=a_mu, x_bound=1.0)
    )
    c0 = 2 * (d + 1) * l1**2
    sizes = [b.size for b in np.array_split(np.arange(n), 40)]
    c1 = 0.0
    for t, m in enumerate(sizes):
        sb = coordinate_beta_l1_sensitivity(0.1 / (t + 1), m, d=d, x_bound=1.0)
        sm = coordinate_mu_sensitivity(m, x_bound=1.0, y_bound=10.0, beta_bound=10.0)
        eb, em = split_epsilon(1.0, sb, sm, d)
        c1 += 2 * d * (sb / eb) ** 2 + 2 * (m / n) ** 2 * (sm / em) ** 2
    grid = np.linspace(0.001, 0.999, 9999)
    best = grid[np.argmin(c0 / grid**2 + c1 / (1 - grid) ** 2)]
    share = _default_share(n)
    assert share == pytest.approx(best, abs=2e-4)
    assert 0.7 < share < 0.9  # the paper's parameters: the start is the costlier release


def test_default_start_share_is_recorded_and_sums_to_epsilon(data):
    X, y = data
    ledger = PrivacyLedger()
    est = DPMedianRegressor(method="coordinate", epsilon=2.0, y_bound=10.0, random_state=0)
    est.fit(X, y, ledger=ledger)
    share = _default_share(X.shape[0])
    assert [r.pure_epsilon for r in ledger.releases] == pytest.approx([2 * share, 2 - 2 * share])
    fixed = DPMedianRegressor(method="coordinate", y_bound=10.0, init_share=0.5, random_state=0)
    ledger = PrivacyLedger()
    fixed.fit(X, y, ledger=ledger)
    assert [r.pure_epsilon for r in ledger.releases] == pytest.approx([0.5, 0.5])


def test_coordinate_intercept_averages_the_released_mu_over_all_rows(data):
    """With beta nearly still (steps 1e-6 / (t + 1), little noise) the released intercept is the
    mean residual over all rows, not over the last batch (its n/N = 75 rows: sd ~0.3)."""
    X, y = data
    beta0 = np.array([3.0, 0.0, -4.0])
    est = DPMedianRegressor(
        method="coordinate",
        epsilon=3e4,  # below 3.9e4, where the Laplace noise would vanish (refused)
        y_bound=10.0,
        init=np.r_[0.0, beta0],
        step=1e-6,
        random_state=0,
    ).fit(X, y)
    np.testing.assert_allclose(est.coef_, beta0, atol=1e-4)
    resid = np.clip(y, -10, 10) - X @ beta0
    assert est.intercept_ == pytest.approx(resid.mean(), abs=1e-4)


def test_column_y_is_ravelled_with_a_warning(data):
    from sklearn.exceptions import DataConversionWarning

    X, y = data[0][:200], data[1][:200]
    flat = DPMedianRegressor(method="irls", random_state=0).fit(X, y)
    with pytest.warns(DataConversionWarning):
        col = DPMedianRegressor(method="irls", random_state=0).fit(X, y[:, None])
    np.testing.assert_array_equal(col.coef_, flat.coef_)


def test_sparse_input_is_refused(data):
    from scipy import sparse

    X, y = data[0][:50], data[1][:50]
    with pytest.raises(TypeError, match="dense data is required"):
        DPMedianRegressor().fit(sparse.csr_matrix(X), y)


@pytest.mark.parametrize("share", [0.1, 0.3, 1 / 3, 0.45, 0.7])
@pytest.mark.parametrize("epsilon", [0.1, 0.3, 0.7, 1.0, 2.9])
def test_the_two_releases_never_compose_to_more_than_epsilon(data, share, epsilon):
    """The start and the descent sum to at most epsilon in floating point (a plain
    epsilon - share * epsilon can round one unit in the last place above)."""
    X, y = data
    ledger = PrivacyLedger()
    DPMedianRegressor(
        method="coordinate", epsilon=epsilon, y_bound=10.0, init_share=share, random_state=0
    ).fit(X, y, ledger=ledger)
    start, descent = (r.pure_epsilon for r in ledger.releases)
    assert start + descent <= epsilon
    assert start + descent == pytest.approx(epsilon, rel=1e-15)
