"""RDP accounting: exact high-precision references (mpmath), the published DP-SGD MNIST
number, agreement with dp-accounting, and regression tests of known accountant failures."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as dpa

from dpnet.errors import PrivacyError
from dpnet.privacy import rdp
from tests.privacy_work import FRACTIONAL_ORDERS, SERIES_CAP, PrivacyWork

MNIST_Q = 256 / 60000
MNIST_STEPS = math.ceil(60 * 60000 / 256)  # 14063, as compute_dp_sgd_privacy.py counts them
TF_PRIVACY_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def exact_int(q: float, s: float, a: int) -> mp.mpf:
    """Exact A_a = sum_i C(a,i) q^i (1-q)^(a-i) exp((i^2-i)/(2 s^2)) in 50-digit arithmetic."""
    q, s = mp.mpf(q), mp.mpf(s)
    return mp.log(
        mp.fsum(
            mp.binomial(a, i) * q**i * (1 - q) ** (a - i) * mp.exp(mp.mpf(i * i - i) / (2 * s * s))
            for i in range(a + 1)
        )
    ) / (a - 1)


def exact_quad(q: float, s: float, a: float) -> mp.mpf:
    """A_a = E_{N(0,s^2)}[(1 - q + q exp((2z-1)/(2s^2)))^a] by mpmath quadrature."""
    q, s, a = mp.mpf(q), mp.mpf(s), mp.mpf(a)
    z0 = s * s * mp.log(1 / q - 1) + mp.mpf(1) / 2

    def f(z):
        return mp.npdf(z, 0, s) * (1 - q + q * mp.exp((2 * z - 1) / (2 * s * s))) ** a

    return mp.log(mp.quad(f, [-mp.inf, -10 * s, 0, z0, z0 + 10 * s, mp.inf])) / (a - 1)


@pytest.mark.parametrize("q,s", [(MNIST_Q, 1.1), (0.01, 0.8), (0.1, 2.0), (0.5, 20.0)])
def test_integer_orders_match_exact_expansion(q: float, s: float) -> None:
    mp.mp.dps = 50
    orders = [2, 3, 8, 17, 32, 64, 256]
    got = rdp.rdp_poisson_gaussian(q, s, orders)
    want = np.array([float(exact_int(q, s, a)) for a in orders])
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize(
    "q,s,a",
    [
        (MNIST_Q, 1.1, 1.05),
        (MNIST_Q, 1.1, 8.1),
        (0.01, 0.8, 2.5),
        (0.1, 2.0, 13.5),
        (0.5, 20.0, 1.5),
        (0.5, 20.0, 50.5),
        (0.9, 2.0, 3.75),
    ],
)
def test_fractional_orders_are_tight_upper_bounds(q: float, s: float, a: float) -> None:
    mp.mp.dps = 30
    got = rdp.rdp_poisson_gaussian(q, s, [a])[0]
    want = float(exact_quad(q, s, a))
    assert want * (1 - 1e-13) <= got <= want * (1 + 1e-7)


def test_fractional_order_series_does_not_stop_at_first_term() -> None:
    # Known failure (truncating the series once a term is below a fixed threshold returns
    # log A = log(first term) <= 0): q = 0.5, sigma = 20, 10 steps, order 50.5.
    mp.mp.dps = 30
    got = 10 * rdp.rdp_poisson_gaussian(0.5, 20.0, [50.5])[0]
    assert got > 0
    assert got == pytest.approx(10 * float(exact_quad(0.5, 20.0, 50.5)), rel=1e-9)


@pytest.mark.parametrize("sampling", ["poisson", "fixed"])
def test_orders_above_1000_do_not_overflow(sampling: str) -> None:
    orders = [1001.5, 2048.0, 5000.5, 1e5]
    if sampling == "poisson":
        got = rdp.rdp_poisson_gaussian(0.5, 20.0, orders)
    else:
        got = rdp.rdp_fixed_size_gaussian(500, 1000, 20.0, orders)
    assert np.all(np.isfinite(got)) and np.all(got > 0)
    assert np.all(np.diff(got) >= 0)  # RDP is non-decreasing in the order
    eps, _ = rdp.rdp_to_epsilon(orders, 10 * got, 1e-5)
    assert math.isfinite(eps)


def test_poisson_agrees_with_dp_accounting_at_integer_orders() -> None:
    orders = np.arange(2.0, 65.0)
    got = rdp.rdp_poisson_gaussian(MNIST_Q, 1.1, orders)
    want = dpa._compute_rdp_poisson_subsampled_gaussian(MNIST_Q, 1.1, orders)
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_mnist_dpsgd_published_epsilon() -> None:
    # Published: eps = 3.01 at delta = 1e-5 for q = 256/60000, sigma = 1.1, 60 epochs
    # (tensorflow/privacy, tutorials/README.md, "Select Parameters" table and
    # compute_dp_sgd_privacy.py output), computed with the classic conversion
    # eps = rdp + ln(1/delta)/(a-1) on the orders [1.1, ..., 10.9] + [12, ..., 63].
    res = rdp.epsilon_for(
        "poisson",
        MNIST_Q,
        1.1,
        MNIST_STEPS,
        1e-5,
        conversion="classic",
        orders=TF_PRIVACY_ORDERS,
        with_pld=False,
    )
    assert round(res["epsilon"], 2) == 3.01
    # The improved conversion on dpnet's grid is smaller; PLD is tighter still.
    improved = rdp.epsilon_for("poisson", MNIST_Q, 1.1, MNIST_STEPS, 1e-5)
    assert improved["pld_epsilon"] < improved["epsilon"] < res["epsilon"]
    assert improved["epsilon"] == pytest.approx(2.597, abs=1e-3)
    # ... and equals dp-accounting's RdpAccountant (public API) at integer orders.
    orders = list(range(2, 65))
    acc = dpa.RdpAccountant(orders)
    acc.compose(dp_event.PoissonSampledDpEvent(MNIST_Q, dp_event.GaussianDpEvent(1.1)), MNIST_STEPS)
    mine = rdp.epsilon_for(
        "poisson", MNIST_Q, 1.1, MNIST_STEPS, 1e-5, orders=orders, with_pld=False
    )
    assert mine["epsilon"] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)


@pytest.mark.parametrize("conversion", ["improved", "classic"])
def test_conversion_formulas(conversion: str) -> None:
    orders = np.array([1.5, 2.0, 4.0, 10.0, 32.0])
    curve = 0.05 * orders
    eps, order = rdp.rdp_to_epsilon(orders, curve, 1e-6, conversion)
    if conversion == "improved":
        want = dpa.compute_epsilon(orders, curve, 1e-6)
        assert (eps, order) == (pytest.approx(want[0], rel=1e-12), want[1])
    else:
        by_order = curve + math.log(1e6) / (orders - 1)
        assert eps == pytest.approx(by_order.min()) and order == orders[by_order.argmin()]


def test_fixed_size_order_two_closed_form() -> None:
    # Wang, Balle & Kasiviswanathan 2019, Thm 27 at alpha = 2 with eps(2) = 1/s^2:
    # RDP(2) = ln(1 + q^2 min(4 (e^{eps(2)} - 1), 2 e^{eps(2)}))
    s, m, n = 1.3, 100, 5000
    q, e2 = m / n, 1 / s**2
    want = math.log1p(q * q * min(4 * math.expm1(e2), 2 * math.exp(e2)))
    assert rdp.rdp_fixed_size_gaussian(m, n, s, [2.0])[0] == pytest.approx(want, rel=1e-12)


def test_fixed_size_matches_dp_accounting_replace_one_accountant() -> None:
    acc = dpa.RdpAccountant(list(rdp.DEFAULT_ORDERS), dpa.NeighborRel.REPLACE_ONE)
    acc.compose(
        dp_event.SampledWithoutReplacementDpEvent(5000, 100, dp_event.GaussianDpEvent(1.3)), 300
    )
    mine = rdp.epsilon_for("fixed", 0.02, 1.3, 300, 1e-5, n=5000)
    assert mine["epsilon"] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    assert mine["relation"] == "replace_one" and mine["pld_epsilon"] is None


def test_poisson_accounting_refused_for_fixed_size_batches() -> None:
    with pytest.raises(PrivacyError, match="needs the dataset size"):
        rdp.epsilon_for("fixed", 0.02, 1.3, 300, 1e-5)
    with pytest.raises(PrivacyError, match="q\\*n to be a positive integer"):
        rdp.epsilon_for("fixed", 0.0215, 1.3, 300, 1e-5, n=1000)
    with pytest.raises(PrivacyError, match="sampling must be"):
        rdp.epsilon_for("uniform", 0.02, 1.3, 300, 1e-5)


def test_calibration_reaches_the_target_and_is_tight() -> None:
    orders = list(range(2, 65))
    sigma = rdp.calibrate_noise_multiplier(1.0, 1e-5, "poisson", 0.01, 1000, orders=orders)
    at = rdp.epsilon_for("poisson", 0.01, sigma, 1000, 1e-5, orders=orders, with_pld=False)
    below = rdp.epsilon_for(
        "poisson", 0.01, sigma * (1 - 1e-4), 1000, 1e-5, orders=orders, with_pld=False
    )
    assert at["epsilon"] <= 1.0 < below["epsilon"]


@pytest.mark.parametrize(
    "bad",
    [
        dict(q=1.5),
        dict(noise_multiplier=0.0),
        dict(noise_multiplier=float("nan")),
        dict(orders=[0.5, 2]),
    ],
)
def test_rdp_parameter_checks(bad: dict) -> None:
    kw = dict(q=0.1, noise_multiplier=1.0, orders=[2.0]) | bad
    with pytest.raises(PrivacyError):
        rdp.rdp_poisson_gaussian(**kw)


@pytest.mark.parametrize("q", [5e-324, 1e-310])
def test_subnormal_sampling_rate_keeps_the_fractional_series(q: float) -> None:
    """ln(1/q - 1) overflowed for subnormal q (1/q = inf, split point z0 = inf): alpha = 2.5
    came out 2.3e14 instead of ~1.4e4 (and 'series failed' at alpha = 1.05). Renyi divergence
    is non-decreasing in the order: a fractional order lies between its integer neighbours."""
    r = rdp.rdp_poisson_gaussian(q, 0.01, [2.0, 2.5, 3.0])
    assert np.all(np.isfinite(r)) and r[0] * (1 - 1e-9) <= r[1] <= r[2] * (1 + 1e-9)
    assert r[0] == pytest.approx(float(exact_int(q, 0.01, 2)), rel=1e-9)


def test_classic_conversion_at_the_smallest_delta() -> None:
    """ln(1/delta) overflowed to inf at delta = 5e-324 (1/delta = inf)."""
    eps, order = rdp.rdp_to_epsilon([2.0, 9.0], [0.1, 0.5], 5e-324, "classic")
    assert (eps, order) == pytest.approx((0.5 + 744.4400719213812 / 8, 9.0))


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(steps=float("nan")), "steps must be an integer"),
        (dict(steps=float("inf")), "steps must be an integer"),
        (dict(steps=10**400), "steps must be an integer"),
        (dict(steps=2.5), "steps must be an integer"),
        (dict(steps=True), "steps must be an integer"),
        (dict(noise_multiplier=1e-13), "noise_multiplier must lie in"),
        (dict(noise_multiplier=1e9), "noise_multiplier must lie in"),
        (dict(sampling="fixed", n=float("nan")), "dataset size n must be an integer"),
        (dict(sampling="fixed", n=10**400), "dataset size n must be an integer"),
    ],
)
def test_absurd_counts_and_multipliers_are_refused(kw: dict, msg: str) -> None:
    """Each gave ValueError/OverflowError from int() or overflowed inside the series."""
    args = dict(sampling="poisson", q=0.01, noise_multiplier=1.0, steps=10, delta=1e-5) | kw
    with pytest.raises(PrivacyError, match=msg):
        rdp.epsilon_for(**args, with_pld=False)


@pytest.mark.parametrize(
    "target,steps",
    [(0.5, 100), pytest.param(1e-9, 3, marks=pytest.mark.slow)],  # ~7 s CPU of series terms
)
def test_calibration_is_cheap_and_tight_where_the_series_is_slow(
    target: float, steps: int, privacy_work: PrivacyWork
) -> None:
    """q = 0.5 and sigma in the tens of thousands: every fractional order needs ~1e5 series
    terms (~1.5 s a grid). Bisection on the full grid took 31 s and 59 s (some 20-40 grids);
    per-order roots take one full-grid evaluation, and the series terms of all evaluations
    stay within 10 grids' worth at the series' cap. At 1e-9 the answer is the jump of the
    KL rule."""
    sigma = rdp.calibrate_noise_multiplier(target, 1e-5, "poisson", 0.5, steps)
    assert privacy_work.full_grids == 1, privacy_work.rdp_orders
    assert privacy_work.series_terms <= 10 * FRACTIONAL_ORDERS * SERIES_CAP
    at = rdp.epsilon_for("poisson", 0.5, sigma, steps, 1e-5, with_pld=False)["epsilon"]
    below = rdp.epsilon_for("poisson", 0.5, sigma * (1 - 2e-6), steps, 1e-5, with_pld=False)
    assert at <= target < below["epsilon"]
