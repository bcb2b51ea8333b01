"""Noise mechanisms: distributions (KS / binomial tests against scipy.stats), calibration
against dp-accounting and closed forms, strict parameter checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.gaussian_mechanism import get_sigma_gaussian
from scipy import stats

from dpnet.errors import PrivacyError
from dpnet.privacy import mechanisms as m
from dpnet.privacy.events import PureDpEvent

N = 4000


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_laplace_noise_scale_ks() -> None:
    value = np.full(N, 3.0)
    out, event = m.laplace_mechanism(value, l1_sensitivity=2.0, epsilon=0.5, rng=rng(1))
    noise = out - value
    assert stats.kstest(noise, stats.laplace(scale=4.0).cdf).pvalue > 0.01
    assert stats.kstest(noise, stats.laplace(scale=4.8).cdf).pvalue < 1e-3  # the test has power
    assert event == PureDpEvent(epsilon=0.5, mechanism="laplace_vector", dim=N)


def test_laplace_scalar_returns_float_and_laplace_event() -> None:
    out, event = m.laplace_mechanism(1.0, l1_sensitivity=1.0, epsilon=2.0, rng=rng())
    assert isinstance(out, float)
    assert event == dp_event.LaplaceDpEvent(noise_multiplier=0.5)


def test_gaussian_noise_sigma_ks() -> None:
    out, event = m.gaussian_mechanism(
        np.zeros(N), l2_sensitivity=0.5, noise_multiplier=3.0, rng=rng(2)
    )
    assert stats.kstest(out, stats.norm(scale=1.5).cdf).pvalue > 0.01
    assert stats.kstest(out, stats.norm(scale=1.7).cdf).pvalue < 1e-3
    assert event == dp_event.GaussianDpEvent(noise_multiplier=3.0)


@pytest.mark.parametrize("dim", [1, 3, 10])
def test_objective_perturbation_norm_is_gamma(dim: int) -> None:
    g = rng(3 + dim)
    draws = np.array(
        [
            m.objective_perturbation_noise(dim, epsilon=0.8, sensitivity=2.0, rng=g)[0]
            for _ in range(2000)
        ]
    )
    norms = np.linalg.norm(draws, axis=1)
    assert stats.kstest(norms, stats.gamma(a=dim, scale=2.5).cdf).pvalue > 0.01
    assert stats.kstest(norms, stats.gamma(a=dim, scale=2.9).cdf).pvalue < 1e-3
    if dim == 3:  # Archimedes: one coordinate of a uniform direction on S^2 is U(-1, 1)
        assert stats.kstest(draws[:, 0] / norms, stats.uniform(-1, 2).cdf).pvalue > 0.01


def test_objective_perturbation_event_adds_jacobian_term() -> None:
    _, event = m.objective_perturbation_noise(
        4, epsilon=0.7, sensitivity=1.0, rng=rng(), jacobian_log_bound=0.1
    )
    assert event.epsilon == pytest.approx(0.8) and event.dim == 4


def test_randomized_response_flip_rate_binomial() -> None:
    y = rng(5).choice([-1, 1], size=20000)
    noisy, event = m.randomized_response(y, keep_prob=0.8, rng=rng(6))
    flips = int(np.sum(noisy != y))
    assert stats.binomtest(flips, y.size, 0.2).pvalue > 0.01
    assert stats.binomtest(flips, y.size, 0.22).pvalue < 1e-3
    assert set(np.unique(noisy)) == {-1, 1} and noisy.dtype == y.dtype
    # dp-accounting's noise parameter: resample uniformly w.p. 2(1-p) -> epsilon ln(p/(1-p))
    assert event == dp_event.RandomizedResponseDpEvent(
        noise_parameter=pytest.approx(0.4), num_buckets=2
    )


def test_randomized_response_keep_prob_one_is_not_private() -> None:
    y = np.array([1, -1, 1])
    noisy, event = m.randomized_response(y, keep_prob=1.0, rng=rng())
    assert np.array_equal(noisy, y) and isinstance(event, dp_event.NonPrivateDpEvent)


def test_kary_randomized_response_rates() -> None:
    k, eps = 4, 1.0
    y = np.zeros(20000, dtype=int)
    noisy, event = m.kary_randomized_response(y, n_classes=k, epsilon=eps, rng=rng(7))
    p_keep = math.exp(eps) / (math.exp(eps) + k - 1)
    assert stats.binomtest(int(np.sum(noisy == 0)), y.size, p_keep).pvalue > 0.01
    others = np.bincount(noisy[noisy != 0], minlength=k)[1:]
    assert stats.chisquare(others).pvalue > 0.01
    # largest likelihood ratio of the event is e^eps
    p = event.noise_parameter
    assert math.log((1 - p + p / k) / (p / k)) == pytest.approx(eps)


def test_keep_prob_epsilon_inverse() -> None:
    assert m.epsilon_from_keep_prob(0.75) == pytest.approx(math.log(3))
    assert m.keep_prob_from_epsilon(math.log(3)) == pytest.approx(0.75)
    assert m.epsilon_from_keep_prob(1.0) == math.inf


@pytest.mark.parametrize("eps,delta", [(0.5, 1e-5), (1.0, 1e-6), (4.0, 1e-3)])
def test_analytic_gaussian_sigma_matches_dp_accounting(eps: float, delta: float) -> None:
    sigma = m.gaussian_sigma(eps, delta, 2.0)
    assert sigma == pytest.approx(2.0 * get_sigma_gaussian(eps, delta), rel=1e-8)
    # Balle & Wang's exact delta at the returned sigma (sensitivity 1 after rescaling)
    s = sigma / 2.0
    d = stats.norm.cdf(1 / (2 * s) - eps * s) - math.exp(eps) * stats.norm.cdf(
        -1 / (2 * s) - eps * s
    )
    assert d == pytest.approx(delta, rel=1e-6)


def test_classic_gaussian_sigma_formula_and_range() -> None:
    assert m.gaussian_sigma(0.5, 1e-5, 1.0, method="classic") == pytest.approx(
        math.sqrt(2 * math.log(1.25e5)) / 0.5
    )
    assert m.gaussian_sigma(0.5, 1e-5, 1.0) < m.gaussian_sigma(0.5, 1e-5, 1.0, method="classic")
    with pytest.raises(PrivacyError, match="epsilon < 1"):
        m.gaussian_sigma(1.5, 1e-5, 1.0, method="classic")


@pytest.mark.parametrize(
    "call",
    [
        lambda: m.laplace_mechanism(1.0, l1_sensitivity=1.0, epsilon=0.0, rng=rng()),
        lambda: m.laplace_mechanism(1.0, l1_sensitivity=-1.0, epsilon=1.0, rng=rng()),
        lambda: m.laplace_mechanism(1.0, l1_sensitivity=1.0, epsilon=math.inf, rng=rng()),
        lambda: m.laplace_mechanism(np.nan, l1_sensitivity=1.0, epsilon=1.0, rng=rng()),
        lambda: m.laplace_mechanism(1.0, l1_sensitivity=1.0, epsilon=1.0, rng=np.random),
        lambda: m.gaussian_mechanism(1.0, l2_sensitivity=1.0, noise_multiplier=0.0, rng=rng()),
        lambda: m.randomized_response(np.array([0, 1]), keep_prob=0.8, rng=rng()),
        lambda: m.randomized_response(np.array([1, -1]), keep_prob=0.5, rng=rng()),
        lambda: m.randomized_response(np.array([1, -1]), keep_prob=1.2, rng=rng()),
        lambda: m.kary_randomized_response(np.array([0, 3]), n_classes=3, epsilon=1.0, rng=rng()),
        lambda: m.kary_randomized_response(np.array([0, 1]), n_classes=1, epsilon=1.0, rng=rng()),
        lambda: m.objective_perturbation_noise(0, epsilon=1.0, sensitivity=1.0, rng=rng()),
        lambda: m.objective_perturbation_noise(
            2, epsilon=1.0, sensitivity=1.0, rng=rng(), jacobian_log_bound=-0.1
        ),
        lambda: m.gaussian_sigma(1.0, 0.0, 1.0),
        lambda: m.gaussian_sigma(1.0, 1e-5, 1.0, method="exact"),
    ],
)
def test_strict_parameter_checks(call) -> None:
    with pytest.raises(PrivacyError):
        call()


def test_laplace_outputs_live_on_a_data_independent_grid() -> None:
    """Mironov (2012): floating-point Laplace reveals the input through the reachable floats.
    Outputs here are exact multiples of a power-of-two grid for any input."""
    g = m.laplace_grid(1.0, 1)
    assert g == 2.0**-10
    for value in (0.0, 1.0, 0.1234567891234, -3.3):
        outs = np.array([m.laplace_mechanism(value, l1_sensitivity=1.0, epsilon=1.0,
                                             rng=rng(s))[0] for s in range(200)])
        assert np.all(outs / g == np.rint(outs / g))


def test_discrete_laplace_pmf() -> None:
    k = m.discrete_laplace(2.0, 200_000, rng(9))
    values, counts = np.unique(k, return_counts=True)
    pmf = np.exp(-np.abs(values) / 2.0) * math.tanh(1 / 4.0)  # (1-a)/(1+a), a = e^{-1/2}
    mask = np.abs(values) <= 10
    expected = pmf[mask] * k.size
    chi2 = stats.chisquare(counts[mask], expected * counts[mask].sum() / expected.sum())
    assert chi2.pvalue > 1e-3
    assert np.allclose(counts[mask] / k.size, pmf[mask], rtol=0.1)
    # exact ratio of neighbouring probabilities at the sensitivity: e^{1/scale}
    assert math.isclose(counts[values == 0][0] / counts[values == 1][0], math.exp(0.5),
                        rel_tol=0.03)
