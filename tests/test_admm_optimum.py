"""With privacy off, every machine reaches the centralized optimum (skglm as the reference)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from devtools.reference import group_logistic_objective, group_logistic_optimum
from dpnet.data import make_group_logistic
from dpnet.estimators import DecentralizedGroupLassoLogistic

LAM = 0.15


@pytest.fixture(scope="module")
def problem():
    data = make_group_logistic(800, rng=np.random.default_rng(3)).validate()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta_star = group_logistic_optimum(data.X, data.y, data.groups, LAM)
    f_star = group_logistic_objective(data.X, data.y, data.groups, LAM, theta_star)
    return data, theta_star, f_star


def test_reference_selects_the_true_groups(problem):
    """The design (groups 3 and 6, 1-based) is recovered by the reference at this lambda."""
    data, theta_star, _ = problem
    norms = [np.linalg.norm(theta_star[:-1][data.groups == g]) for g in range(16)]
    assert {2, 5} <= set(np.flatnonzero(np.array(norms) > 0))
    assert np.count_nonzero(norms) < 16


@pytest.mark.parametrize(
    ("topology", "n_machines"),
    [
        ("paper5", 5),
        ("ring", 5),
        ("star", 5),
        ("grid", 8),
        ("ring", 8),
        ("star", 8),
        ("grid", 6),
    ],
)
def test_every_machine_reaches_the_centralized_optimum(problem, topology, n_machines):
    data, theta_star, f_star = problem
    model = DecentralizedGroupLassoLogistic(
        LAM,
        epsilon=np.inf,  # the non-private optimum (the default is label privacy at 1)
        topology=topology,
        n_machines=n_machines,
        random_state=0,
        groups=data.groups,
    ).fit(data.X, data.y)
    assert model.stop_reason_ == "converged"
    for z in model.machine_coefs_:
        gap = (group_logistic_objective(data.X, data.y, data.groups, LAM, z) - f_star) / f_star
        assert abs(gap) < 1e-5
        assert np.abs(z - theta_star).max() < 1e-4
    # the reference's zero groups are (numerically) zero in the consensus and not reported
    zero_groups = {g for g in range(16) if np.linalg.norm(theta_star[:-1][data.groups == g]) == 0}
    assert max(np.abs(model.coef_[data.groups == g]).max() for g in zero_groups) < 1e-8
    assert set(model.selected_groups_) == set(range(16)) - zero_groups


def test_sqrt_size_weights_match_the_weighted_reference(problem):
    data, _, _ = problem
    weights = np.sqrt(np.bincount(data.groups).astype(float))
    theta_star = group_logistic_optimum(data.X, data.y, data.groups, LAM, weights)
    model = DecentralizedGroupLassoLogistic(
        LAM,
        epsilon=np.inf,
        topology="ring",
        n_machines=5,
        group_weights="sqrt-size",
        groups=data.groups,
    ).fit(data.X, data.y)
    assert np.abs(np.append(model.coef_, model.intercept_) - theta_star).max() < 1e-4


def test_columns_far_from_zero_reach_the_same_optimum(problem):
    """scikit-learn's checks fit columns of mean 100: uncentred, the ADMM stopped at 3,000
    rounds short of the optimum. The estimator centres the (label-DP: public) columns; the
    unpenalized intercept absorbs the shift, b = b_0 - 100 sum(beta), so the fit on X + 100 is
    the fit on X with that intercept, and skglm's optimum of X + 100 agrees."""
    data, theta_star, f_star = problem
    shifted = data.X + 100.0
    fits = [
        DecentralizedGroupLassoLogistic(
            LAM, epsilon=np.inf, groups=data.groups, random_state=0
        ).fit(X, data.y)
        for X in (data.X, shifted)
    ]
    assert [fit.stop_reason_ for fit in fits] == ["converged", "converged"]
    assert fits[1].n_iter_ <= 2 * fits[0].n_iter_
    np.testing.assert_allclose(fits[1].coef_, fits[0].coef_, atol=1e-6)
    assert abs(fits[1].intercept_ - (fits[0].intercept_ - 100.0 * fits[0].coef_.sum())) < 1e-5
    theta = np.append(fits[1].coef_, fits[1].intercept_)
    f_shifted = group_logistic_objective(shifted, data.y, data.groups, LAM, theta)
    assert abs(f_shifted - f_star) / f_star < 1e-6  # the same optimal value
    for z in fits[1].machine_coefs_:  # every machine's Z, in the columns as given
        assert abs(group_logistic_objective(shifted, data.y, data.groups, LAM, z) - f_star) < 1e-5
