"""Noise mechanisms: distributions (KS / binomial tests against scipy.stats), calibration
against dp-accounting and closed forms, strict parameter checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.gaussian_mechanism import get_sigma_gaussian
from scipy import special, stats

from dpnet.errors import PrivacyError
from dpnet.privacy import PureDpEvent, binary_rr, compose, discrete, gaussian, pld
from dpnet.privacy import mechanisms as m

N = 4000


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_laplace_noise_scale_ks() -> None:
    value = np.full(N, 3.0)
    out, event = m.laplace_mechanism(value, l1_sensitivity=2.0, epsilon=0.5, rng=rng(1))
    noise = out - value
    assert stats.kstest(noise, stats.laplace(scale=4.0).cdf).pvalue > 0.01
    assert stats.kstest(noise, stats.laplace(scale=4.8).cdf).pvalue < 1e-3  # the test has power
    assert event == PureDpEvent(epsilon=0.5, mechanism="discrete_laplace", dim=N)


def test_laplace_scalar_returns_float_and_pure_event() -> None:
    """A scalar release is a discrete Laplace too: recorded as PureDpEvent, not as
    dp-accounting's (continuous) LaplaceDpEvent."""
    out, event = m.laplace_mechanism(1.0, l1_sensitivity=1.0, epsilon=2.0, rng=rng())
    assert isinstance(out, float)
    assert event == PureDpEvent(epsilon=2.0, mechanism="discrete_laplace", dim=1)


def _discrete_laplace_logpmf(scale: float, y: np.ndarray) -> np.ndarray:
    a = math.exp(-1.0 / scale)
    return math.log1p(-a) - math.log1p(a) - np.abs(y) / scale


def test_discrete_laplace_delta_exceeds_the_continuous_laplace_delta(monkeypatch) -> None:
    """The scalar release's privacy curve is not the continuous Laplace's.

    Delta = 1025 g, g = 2^-10, epsilon = 1: the mechanism's scale is t = (Delta + g)/(eps g) =
    1026 grid steps, and the inputs 2^-11 and 2^-11 + Delta round (half to even) to k = 0 and
    k' = 1026 = eps t. The exact hockey-stick divergence of the discrete Laplace, summed over
    the integer support in both directions, exceeds the continuous Laplace's
    1 - exp((eps' - eps)/2) and dp-accounting's PLD of LaplaceDpEvent(1/eps) at eps' < eps
    (and its RDP exceeds Mironov's); the recorded event's accounting bounds it."""
    delta_l1, eps = 1025 * 2.0**-10, 1.0
    g = m.laplace_grid(delta_l1, 1)
    assert g == 2.0**-10
    scales: list[float] = []
    original = m.discrete_laplace

    def spy(scale, size, rng_):
        scales.append(scale)
        return original(scale, size, rng_)

    monkeypatch.setattr(m, "discrete_laplace", spy)
    x0 = 2.0**-11
    _, event = m.laplace_mechanism(x0, l1_sensitivity=delta_l1, epsilon=eps, rng=rng())
    t = scales[0]
    assert t == 1026.0
    shift = int(np.rint((x0 + delta_l1) / g) - np.rint(x0 / g))
    assert shift == 1026 == eps * t  # attained: the largest loss is exactly eps

    y = np.arange(-80 * 1026, shift + 80 * 1026 + 1, dtype=float)  # tails < e^-80
    lp, lq = _discrete_laplace_logpmf(t, y), _discrete_laplace_logpmf(t, y - shift)

    def delta_discrete(e: float) -> float:
        return max(
            float(np.sum(np.clip(np.exp(a) - math.exp(e) * np.exp(b), 0, None)))
            for a, b in ((lp, lq), (lq, lp))
        )

    laplace_pld = pld.event_pld(dp_event.LaplaceDpEvent(noise_multiplier=1.0 / eps))
    recorded_pld = pld.event_pld(event)
    exceeded = []
    for e in (0.0, 0.5, 0.9, 0.99, 0.999):
        d = delta_discrete(e)
        continuous = 1.0 - math.exp((e - eps) / 2.0)
        if d > continuous * (1 + 1e-8) and d > laplace_pld.get_delta_for_epsilon(e):
            exceeded.append(e)
        assert d <= recorded_pld.get_delta_for_epsilon(e)
    assert exceeded == [0.5, 0.9, 0.99, 0.999]
    assert delta_discrete(0.999) == pytest.approx(4.99994e-4, rel=1e-5)  # continuous 4.99875e-4
    for alpha in (2.0, 8.0):
        d_alpha = special.logsumexp(alpha * lp + (1 - alpha) * lq) / (alpha - 1)
        assert d_alpha > compose.laplace_rdp(1.0 / eps, np.array([alpha]))[0] + 1e-8
        assert d_alpha <= compose.event_rdp(event, np.array([alpha]))[0]


def test_laplace_noise_survives_huge_values() -> None:
    """Without the clip, value / g >= 2^53 swallows the integer noise and the release is the
    exact input (no privacy); clipped to +-2^52, k + Y stays an exact integer."""
    g = m.laplace_grid(1.0, 1)
    for value in (1e30, -1e300, 2.0**52):
        outs = np.array(
            [
                m.laplace_mechanism(value, l1_sensitivity=1.0, epsilon=1.0, rng=rng(s))[0]
                for s in range(50)
            ]
        )
        assert np.unique(outs).size > 40
        assert np.all(outs / g == np.rint(outs / g)) and np.all(np.abs(outs / g) < 2.0**53)


def test_laplace_scale_and_numpys_geometric_branch(monkeypatch) -> None:
    """The scale is t = (Delta/g + d)/eps in [1025 d/eps, 2049 d/eps): numpy's geometric
    inverts (success probability q < 1/3) unless eps > 415 d; t <= 2^40 keeps |noise| < 2^46
    (numpy's G <= 44.44 t + 1), larger scales are refused."""
    scales: list[float] = []
    original = m.discrete_laplace
    monkeypatch.setattr(
        m, "discrete_laplace", lambda s, size, r: scales.append(s) or original(s, size, r)
    )
    cases = ((1.0, 1.0, 1), (3.0, 0.01, 5), (2.0**-30, 50.0, 100), (1.0, 1e3, 1))
    for sens, eps, d in cases:
        m.laplace_mechanism(np.zeros(d), l1_sensitivity=sens, epsilon=eps, rng=rng())
    for (_, eps, d), t in zip(cases, scales, strict=True):
        assert 1025 * d / eps <= t < 2049 * d / eps
        assert (-math.expm1(-1 / t) < 1 / 3) is (eps <= 415 * d)
    with pytest.raises(PrivacyError, match="beyond exact integers"):
        m.laplace_mechanism(0.0, l1_sensitivity=1.0, epsilon=1e-12, rng=rng())


def test_randomized_response_keep_probability_is_exact() -> None:
    """A label is kept iff U < p with U = rng.random() on the grid 2^-53 Z, so P(keep) =
    ceil(p 2^53) / 2^53; every double p in [1/2, 1] is on that grid, so P(keep) = p."""
    u = rng(11).random(100_000)
    assert np.all(u * 2.0**53 == np.floor(u * 2.0**53))
    for p in (
        0.75,
        binary_rr.keep_prob_from_epsilon(1.0),
        binary_rr.keep_prob_from_epsilon(0.01),
        0.5 + 2.0**-53,
        math.nextafter(1.0, 0.0),
    ):
        assert (p * 2.0**53).is_integer()
    assert not (0.1 * 2.0**53).is_integer()  # below 1/2 the grid is finer than 2^-53


def test_gaussian_noise_sigma_ks() -> None:
    out, event = m.gaussian_mechanism(
        np.zeros(N), l2_sensitivity=0.5, noise_multiplier=3.0, rng=rng(2)
    )
    g = 2.0**-17  # largest power of two <= 0.5 * 2^-10 / sqrt(4000) = 7.7e-6
    assert discrete.gaussian_grid(0.5, N) == g
    # noise std 3 (0.5 + sqrt(N) g) = 1.5014 (the smoothing term changes it by 1e-10)
    sd = 3.0 * (0.5 + math.sqrt(N) * g)
    assert stats.kstest(out, stats.norm(scale=sd).cdf).pvalue > 0.01
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
    assert binary_rr.epsilon_from_keep_prob(0.75) == pytest.approx(math.log(3))
    assert binary_rr.keep_prob_from_epsilon(math.log(3)) == pytest.approx(0.75)
    assert binary_rr.epsilon_from_keep_prob(1.0) == math.inf


@pytest.mark.parametrize("eps,delta", [(0.5, 1e-5), (1.0, 1e-6), (4.0, 1e-3)])
def test_analytic_gaussian_sigma_matches_dp_accounting(eps: float, delta: float) -> None:
    sigma = gaussian.gaussian_sigma(eps, delta, 2.0)
    assert sigma == pytest.approx(2.0 * get_sigma_gaussian(eps, delta), rel=1e-8)
    # Balle & Wang's exact delta at the returned sigma (sensitivity 1 after rescaling)
    s = sigma / 2.0
    d = stats.norm.cdf(1 / (2 * s) - eps * s) - math.exp(eps) * stats.norm.cdf(
        -1 / (2 * s) - eps * s
    )
    assert d == pytest.approx(delta, rel=1e-6)


def test_classic_gaussian_sigma_formula_and_range() -> None:
    assert gaussian.gaussian_sigma(0.5, 1e-5, 1.0, method="classic") == pytest.approx(
        math.sqrt(2 * math.log(1.25e5)) / 0.5
    )
    assert gaussian.gaussian_sigma(0.5, 1e-5, 1.0) < gaussian.gaussian_sigma(
        0.5, 1e-5, 1.0, method="classic"
    )
    with pytest.raises(PrivacyError, match="epsilon < 1"):
        gaussian.gaussian_sigma(1.5, 1e-5, 1.0, method="classic")


@pytest.mark.parametrize(
    "call",
    [
        lambda: m.laplace_mechanism(1.0, l1_sensitivity=1.0, epsilon=0.0, rng=rng()),
        lambda: m.laplace_mechanism(1.0, l1_sensitivity=-1.0, epsilon=1.0, rng=rng()),
        lambda: m.laplace_mechanism(1.0, l1_sensitivity=1.0, epsilon=math.inf, rng=rng()),
        lambda: m.laplace_mechanism(np.nan, l1_sensitivity=1.0, epsilon=1.0, rng=rng()),
        lambda: m.laplace_mechanism(1.0, l1_sensitivity=1.0, epsilon=1.0, rng=np.random),
        lambda: m.gaussian_mechanism(1.0, l2_sensitivity=1.0, noise_multiplier=0.0, rng=rng()),
        lambda: m.gaussian_mechanism(1.0, l2_sensitivity=1.0, noise_multiplier=1e12, rng=rng()),
        lambda: m.gaussian_mechanism(np.inf, l2_sensitivity=1.0, noise_multiplier=1.0, rng=rng()),
        lambda: m.randomized_response(np.array([0, 1]), keep_prob=0.8, rng=rng()),
        lambda: m.randomized_response(np.array([1, -1]), keep_prob=0.5, rng=rng()),
        lambda: m.randomized_response(np.array([1, -1]), keep_prob=1.2, rng=rng()),
        lambda: m.kary_randomized_response(np.array([0, 3]), n_classes=3, epsilon=1.0, rng=rng()),
        lambda: m.kary_randomized_response(np.array([0, 1]), n_classes=1, epsilon=1.0, rng=rng()),
        lambda: m.objective_perturbation_noise(0, epsilon=1.0, sensitivity=1.0, rng=rng()),
        lambda: m.objective_perturbation_noise(
            2, epsilon=1.0, sensitivity=1.0, rng=rng(), jacobian_log_bound=-0.1
        ),
        lambda: gaussian.gaussian_sigma(1.0, 0.0, 1.0),
        lambda: gaussian.gaussian_sigma(1.0, 1e-5, 1.0, method="exact"),
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
        outs = np.array(
            [
                m.laplace_mechanism(value, l1_sensitivity=1.0, epsilon=1.0, rng=rng(s))[0]
                for s in range(200)
            ]
        )
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
    assert math.isclose(
        counts[values == 0][0] / counts[values == 1][0], math.exp(0.5), rel_tol=0.03
    )


def test_gaussian_outputs_live_on_a_data_independent_grid() -> None:
    """Outputs are exact multiples of a power-of-two grid for any input (Mironov 2012; Jin et
    al. 2022 for the Gaussian), also for huge values (clipped to +-2^52 g)."""
    g = discrete.gaussian_grid(1.0, 3)
    assert g == 2.0**-11  # largest power of two <= 2^-10 / sqrt(3)
    for value in ([0.0, 1.0, -2.5], [0.1234567891234, -3.3, 1e6 + 0.1], [1e300, -1e-300, 7.0]):
        outs = np.array(
            [
                m.gaussian_mechanism(
                    np.array(value), l2_sensitivity=1.0, noise_multiplier=1.0, rng=rng(s)
                )[0]
                for s in range(100)
            ]
        )
        assert np.all(outs / g == np.rint(outs / g))
        assert np.all(np.abs(outs / g) < 2.0**53)
    out, _ = m.gaussian_mechanism(0.3, l2_sensitivity=1.0, noise_multiplier=2.0, rng=rng())
    assert isinstance(out, float) and out / 2.0**-10 == round(out / 2.0**-10)


def _discrete_gaussian_logpmf(scale: float, support: np.ndarray) -> np.ndarray:
    """-y^2 / 2 s^2 - log(normaliser over |y| <= 40 s + 10; the rest is < 1e-300)."""
    full = np.arange(-int(40 * scale) - 10, int(40 * scale) + 11)
    return -(support**2) / (2 * scale**2) - special.logsumexp(-(full**2) / (2 * scale**2))


def _discrete_gaussian_pmf(scale: float, support: np.ndarray) -> np.ndarray:
    return np.exp(_discrete_gaussian_logpmf(scale, support))


def test_discrete_gaussian_pmf_chi_square() -> None:
    k = discrete.discrete_gaussian(1.5, 200_000, rng(21))
    assert np.all(k == np.rint(k))
    values, counts = np.unique(k, return_counts=True)
    mask = np.abs(values) <= 6
    for scale, ok in ((1.5, True), (1.55, False)):  # the test rejects a 3 % wrong scale
        expected = _discrete_gaussian_pmf(scale, values[mask])
        expected *= counts[mask].sum() / expected.sum()
        p = stats.chisquare(counts[mask], expected).pvalue
        assert (p > 1e-3) if ok else (p < 1e-6)
    centre = np.abs(values) <= 4
    assert np.allclose(
        counts[centre] / k.size, _discrete_gaussian_pmf(1.5, values[centre]), rtol=0.05
    )


def test_discrete_gaussian_variance_large_scale() -> None:
    n, scale = 100_000, 300.0
    k = discrete.discrete_gaussian(scale, (n // 2, 2), rng(22))
    assert k.shape == (n // 2, 2)
    exact = float(
        np.sum(
            np.arange(-12000, 12001) ** 2 * _discrete_gaussian_pmf(scale, np.arange(-12000, 12001))
        )
    )
    assert exact == pytest.approx(scale**2, rel=1e-12)  # N_Z variance = s^2 - O(e^{-2pi^2 s^2})
    ratio = k.var() / exact
    assert abs(ratio - 1) < 4 * math.sqrt(2 / n)  # 4 standard errors of a sample variance
    assert abs(ratio * (300.0 / 306.0) ** 2 - 1) > 4 * math.sqrt(2 / n)  # 2 % off is caught
    assert abs(k.mean()) < 4 * scale / math.sqrt(n)


@pytest.mark.parametrize("scale", [0.4, 1.0, 3.0])
def test_discrete_gaussian_renyi_bound(scale: float) -> None:
    """D_alpha(N_Z(v, s^2) || N_Z(0, s^2)) <= alpha v^2 / (2 s^2) for integer v (CKS 2020),
    with equality when alpha v is an integer: the RDP of the continuous Gaussian."""
    y = np.arange(-400, 401)
    for v in (1, 2, 3):
        for alpha in (1.5, 2.0, 3.7, 8.0):
            logp = _discrete_gaussian_logpmf(scale, y - v)
            logq = _discrete_gaussian_logpmf(scale, y)
            d_alpha = special.logsumexp(alpha * logp + (1 - alpha) * logq) / (alpha - 1)
            bound = alpha * v**2 / (2 * scale**2)
            assert d_alpha <= bound * (1 + 1e-12)
            if float(alpha * v).is_integer():
                assert d_alpha == pytest.approx(bound, rel=1e-10)


def test_plain_discrete_gaussian_delta_can_exceed_the_continuous_one() -> None:
    """Why the smoothing term: N_Z(0, 0.25) on a sensitivity-1 integer query has, at epsilon=1,
    delta = sum_y (P(y) - e P(y - 1))_+ = 0.603 > 0.510 for the continuous Gaussian."""
    y = np.arange(-50, 51)
    p, q = _discrete_gaussian_pmf(0.5, y), _discrete_gaussian_pmf(0.5, y - 1)
    delta_discrete = float(np.sum(np.clip(p - math.e * q, 0, None)))
    assert delta_discrete == pytest.approx(0.6032, abs=1e-4)
    assert gaussian._analytic_gaussian_delta(0.5, 1.0) == pytest.approx(0.5099, abs=1e-4)


def _smoothed_pmf(tau: float, r: float, y: np.ndarray) -> np.ndarray:
    """P(Y = y) for Z ~ N(0, tau^2), Y ~ N_Z(Z, r^2), by 120-node Gauss-Hermite quadrature."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(120)
    z = tau * nodes
    lattice = np.arange(-200, 201)
    norm = np.exp(-((lattice[None, :] - z[:, None]) ** 2) / (2 * r**2)).sum(axis=1)
    cond = np.exp(-((y[None, :] - z[:, None]) ** 2) / (2 * r**2)) / norm[:, None]
    return weights @ cond / weights.sum()


def test_smoothing_makes_the_release_a_post_processed_continuous_gaussian() -> None:
    """Z ~ N(0, tau^2) then N_Z(Z, r^2) has the pmf of N_Z(0, tau^2 + r^2) up to a factor
    1 +- eta, eta = 2 sum_j exp(-2 pi^2 r^2 j^2) (< 1e-136 at r = 4); not so for small r."""
    y = np.arange(-25, 26)
    tau = 1.3
    for r, close in ((discrete.SMOOTHING, True), (0.25, False)):
        ratio = _smoothed_pmf(tau, r, y) / _discrete_gaussian_pmf(math.hypot(tau, r), y)
        assert bool(np.max(np.abs(ratio - 1)) < 1e-12) is close


def test_the_largest_finite_label_budget_still_flips() -> None:
    """MAX_FINITE_EPSILON (the CLI's refusal threshold) keeps p below 1; a little past it,
    where e^eps / (1 + e^eps) rounds to 1, the budget is refused."""
    from dpnet.errors import PrivacyError
    from dpnet.privacy import keep_prob_from_epsilon
    from dpnet.privacy.binary_rr import MAX_FINITE_EPSILON

    assert keep_prob_from_epsilon(MAX_FINITE_EPSILON) < 1.0
    with pytest.raises(PrivacyError, match="rounds to 1"):
        keep_prob_from_epsilon(36.74)


def test_the_record_count_budget_keeps_the_laplace_noise_alive() -> None:
    """Below MIN_LAPLACE_SCALE numpy's geometric sampler always returns 1 (the noise is zero);
    at it, q stays below the largest uniform double, so a non-zero draw remains possible. The
    main job's held-out count (sensitivity 1) at MAX_COUNT_EPSILON is on the noisy side, a
    little past 1025 * 52 ln 2 it is not (issue 45, item 8: --epsilon 1e300 released the count
    without noise)."""
    assert -math.expm1(-1.0 / discrete.MIN_LAPLACE_SCALE) < 1.0 - 2.0**-53  # G = 2 possible

    def count_scale(eps: float) -> float:  # laplace_mechanism's t at sensitivity 1, d = 1
        g = discrete.laplace_grid(1.0, 1)
        return (1.0 + g) / (eps * g)

    assert count_scale(discrete.MAX_COUNT_EPSILON) >= discrete.MIN_LAPLACE_SCALE
    assert count_scale(1025 * 52 * math.log(2) * 1.001) < discrete.MIN_LAPLACE_SCALE
    big = rng(3).geometric(-math.expm1(-1.0 / count_scale(1e300)), size=10_000)
    assert (big == 1).all()  # what the count got at 1e300: no noise at all


def test_an_epsilon_whose_laplace_noise_would_be_zero_is_refused() -> None:
    """Past 36 (Delta + d g)/g the discrete Laplace scale is below MIN_LAPLACE_SCALE and the
    sampler only draws 0: the mechanism refuses instead of releasing the value as it is."""
    bound = 1025 / discrete.MIN_LAPLACE_SCALE  # a count: sensitivity 1, one coordinate
    with pytest.raises(PrivacyError, match="draws no noise"):
        m.laplace_mechanism(5.0, l1_sensitivity=1.0, epsilon=bound * 1.001, rng=rng(0))
    with pytest.raises(PrivacyError, match="draws no noise"):
        m.laplace_mechanism(np.ones(3), l1_sensitivity=2.0, epsilon=1e9, rng=rng(0))
    with pytest.raises(PrivacyError, match="at most 36900"):
        m.noisy_count(5, epsilon=36_901.0, rng=rng(0))
    m.noisy_count(5, epsilon=discrete.MAX_COUNT_EPSILON, rng=rng(0))  # the bound is taken
