"""Audit harness: the lower bound stays under the claimed epsilon for correct mechanisms and
exceeds it for a mechanism with half the noise it claims; the sensitivity search finds the
stated sensitivity of clipped sums (2C replace-one, C add/remove) and catches a missing clip."""

from __future__ import annotations

import math

import numpy as np
import pytest

from devtools.audit import (
    add_remove_pairs,
    audit_epsilon,
    extreme_rows,
    max_sensitivity,
    replace_one_pairs,
)
from dpnet.errors import PrivacyError
from dpnet.privacy import (
    clip_rows_l2,
    clip_values,
    gaussian_mechanism,
    gaussian_sigma,
    laplace_mechanism,
    randomized_response,
)

pytestmark = pytest.mark.slow  # statistical: many runs of a mechanism or of the job

EPS = 1.0


def laplace(noise_fraction: float):
    def mech(d, rng):  # sensitivity of the identity on {0, 1} is 1
        return laplace_mechanism(d, l1_sensitivity=noise_fraction, epsilon=EPS, rng=rng)

    return mech


@pytest.mark.parametrize("fraction,caught", [(1.0, False), (0.5, True)])
def test_laplace_audit(fraction: float, caught: bool) -> None:
    res = audit_epsilon(laplace(fraction), 0.0, 1.0, n_trials=20000, rng=np.random.default_rng(11))
    if caught:
        assert res.epsilon_lower > EPS
    else:
        assert 0.8 < res.epsilon_lower <= EPS  # valid and nearly tight


@pytest.mark.parametrize("fraction,caught", [(1.0, False), (0.5, True)])
def test_gaussian_audit(fraction: float, caught: bool) -> None:
    delta = 1e-5
    mult = gaussian_sigma(EPS, delta, 1.0)

    def mech(d, rng):
        return gaussian_mechanism(d, l2_sensitivity=fraction, noise_multiplier=mult, rng=rng)

    res = audit_epsilon(mech, 0.0, 1.0, n_trials=100000, rng=np.random.default_rng(12), delta=delta)
    assert (res.epsilon_lower > EPS) is caught


@pytest.mark.parametrize("keep,caught", [(0.75, False), (0.875, True)])
def test_randomized_response_audit(keep: float, caught: bool) -> None:
    claimed = math.log(3)  # keep prob 0.75; 0.875 flips half as often as claimed

    def mech(d, rng):
        return randomized_response(d, keep_prob=keep, rng=rng)

    res = audit_epsilon(
        mech, np.array([1]), np.array([-1]), n_trials=20000, rng=np.random.default_rng(13)
    )
    assert (res.epsilon_lower > claimed) is caught
    assert res.epsilon_lower > 0.9 * claimed


def test_audit_parameter_checks() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(PrivacyError, match="n_trials"):
        audit_epsilon(laplace(1.0), 0.0, 1.0, n_trials=10, rng=rng)
    with pytest.raises(PrivacyError, match="scalar statistic"):
        audit_epsilon(laplace(1.0), np.zeros(2), np.ones(2), n_trials=40, rng=rng)
    res = audit_epsilon(
        laplace(1.0), np.zeros(2), np.ones(2), n_trials=40, rng=rng, statistic=lambda v: v.sum()
    )
    assert res.epsilon_lower >= 0.0


def test_sensitivity_search_clipped_sum() -> None:
    rng = np.random.default_rng(3)
    c, dim = 1.5, 3
    X = rng.normal(size=(5, dim))
    y = rng.normal(size=5)
    cands = extreme_rows(dim, 4.0, 2.0, rng, n_random=4)  # rows outside the clip radius too

    def clipped_sum(d):
        return clip_rows_l2(d[0], c).sum(axis=0)

    replace = max_sensitivity(clipped_sum, replace_one_pairs(X, y, cands, indices=[0]), norm=2)
    assert replace == pytest.approx(2 * c, rel=1e-12)  # replace-one: 2C, attained
    add_remove = max_sensitivity(clipped_sum, add_remove_pairs(X, y, cands), norm=2)
    assert add_remove == pytest.approx(c, rel=1e-12)  # add/remove: C, attained
    unclipped = max_sensitivity(lambda d: d[0].sum(axis=0), add_remove_pairs(X, y, cands))
    assert unclipped > c  # a missing clip is caught


def test_sensitivity_search_clipped_mean_of_labels() -> None:
    rng = np.random.default_rng(4)
    n, b = 50, 2.0
    X, y = rng.normal(size=(n, 2)), rng.normal(size=n)
    cands = extreme_rows(2, 1.0, 10.0, rng, n_random=0)
    got = max_sensitivity(
        lambda d: clip_values(d[1], b).mean(),
        replace_one_pairs(X, y, cands, indices=[0, 1]),
        norm="l1",
    )
    assert got == pytest.approx(2 * b / n, rel=1e-12)
    with pytest.raises(PrivacyError, match="norm"):
        max_sensitivity(lambda d: 0.0, [((X, y), (X, y))], norm=3)


def test_lower_bound_is_valid_across_seeds() -> None:
    # With the threshold chosen on held-out runs, P[epsilon_lower > eps] <= 1 - confidence:
    # over 40 independent audits of an exactly eps-DP mechanism expect about 2 exceedances at
    # most (binomial(40, 0.05) exceeds 6 with probability < 1.5%).
    over = sum(
        audit_epsilon(
            laplace(1.0), 0.0, 1.0, n_trials=1000, rng=np.random.default_rng(100 + s)
        ).epsilon_lower
        > EPS
        for s in range(40)
    )
    assert over <= 6
