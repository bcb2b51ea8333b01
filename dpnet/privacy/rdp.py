"""Renyi-DP accounting of the (subsampled) Gaussian mechanism and conversion to (eps, delta).

Conventions. ``noise_multiplier`` = noise std / L2 sensitivity, the sensitivity taken under
the relation that goes with the sampler: Poisson sampling <-> add/remove-one (a clipped sum
has sensitivity C), fixed-size sampling without replacement <-> replace-one (sensitivity 2C).

Poisson-subsampled Gaussian (add/remove): RDP(alpha) = log(A_alpha) / (alpha - 1) with
A_alpha = E_{z ~ N(0, s^2)} [(1 - q + q exp((2z - 1)/(2 s^2)))^alpha] (Mironov, Talwar &
Zhang 2019, "Renyi DP of the sampled Gaussian mechanism", Thm 4/5).
- integer alpha: exact binomial expansion, written as A - 1 = sum_{i>=2} C(alpha,i) q^i
  (1-q)^(alpha-i) (exp((i^2-i)/(2 s^2)) - 1), a sum of positive terms (no cancellation);
- fractional alpha: the two series of their Sec. 3.3 (split at z0 = s^2 ln(1/q - 1) + 1/2),
  summed with signs and truncated at I >= floor(alpha) terms plus a proved tail bound:
  the integrals c_i multiplying C(alpha, i) decrease in i, and for I >= floor(alpha)
  sum_{i>I} |C(alpha, i)| = |C(alpha - 1, I)| (the signs of (-1)^i C(alpha, i) are constant
  and sum_{i<=I} (-1)^i C(alpha,i) = (-1)^I C(alpha-1, I)), so the tail is at most
  |C(alpha-1, I)| (c0_{I+1} + c1_{I+1}). With a floating-point allowance the result is an
  upper bound, equal to the exact value up to ~1e-10 relative when the series converges.
Fixed-size sampling without replacement (replace-one): Wang, Balle & Kasiviswanathan 2019,
Thm 27, with Cor. 10 interpolation at fractional orders, as implemented in dp-accounting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant as _dpa_rdp
from scipy import special

from dpnet.errors import PrivacyError

DEFAULT_ORDERS: np.ndarray = np.unique(
    np.round(
        np.concatenate(
            [
                np.arange(1.05, 2.0, 0.05),
                np.arange(2.0, 12.0, 0.25),
                np.arange(12.0, 64.0, 1.0),
                np.arange(64.0, 256.0, 8.0),
                [256.0, 320.0, 384.0, 512.0, 768.0, 1024.0, 1536.0, 2048.0, 4096.0],
            ]
        ),
        10,
    )
)
"""Orders > 1: a dense fractional grid on (1, 12), integers to 64, then a sparse tail."""

SAMPLING_SCHEMES = ("poisson", "fixed")
CONVERSIONS = ("improved", "classic")
PLD_DISCRETIZATION = 1e-4
_MAX_TERMS = 1 << 17


def _check_orders(orders: Sequence[float]) -> np.ndarray:
    a = np.atleast_1d(np.asarray(orders, dtype=float))
    if a.ndim != 1 or a.size == 0 or not np.all(a > 1) or np.any(np.isnan(a)):
        raise PrivacyError("RDP orders must be a non-empty 1-d list of numbers > 1")
    return a


def _check_q_sigma(q: float, noise_multiplier: float) -> tuple[float, float]:
    q, s = float(q), float(noise_multiplier)
    if not 0.0 <= q <= 1.0:
        raise PrivacyError(f"sampling rate q must lie in [0, 1], got {q}")
    if not (s > 0 and math.isfinite(s)):
        raise PrivacyError(f"noise_multiplier must be a finite positive number, got {s}")
    return q, s


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x - 1) for x > 0 without overflow."""
    big = x > 30.0
    safe = np.where(big, 1.0, x)
    return np.where(big, x + np.log1p(-np.exp(-np.where(big, x, 30.0))), np.log(np.expm1(safe)))


def _log_a_int(q: float, s: float, alpha: int) -> float:
    """log A_alpha for integer alpha >= 2 and 0 < q < 1 (exact expansion, positive terms)."""
    i = np.arange(2, alpha + 1, dtype=float)
    log_terms = (
        special.gammaln(alpha + 1.0)
        - special.gammaln(i + 1.0)
        - special.gammaln(alpha - i + 1.0)
        + i * math.log(q)
        + (alpha - i) * math.log1p(-q)
        + _log_expm1((i * i - i) / (2.0 * s * s))
    )
    return float(np.logaddexp(0.0, special.logsumexp(log_terms)))


def _frac_log_terms(q: float, s: float, alpha: float, i: np.ndarray) -> tuple[np.ndarray, ...]:
    """log|C(alpha,i)|, sign C(alpha,i), log c0_i, log c1_i (c: the integrals in each series)."""
    log_binom = (
        special.gammaln(alpha + 1.0) - special.gammaln(i + 1.0) - special.gammaln(alpha - i + 1.0)
    )
    sign = special.gammasgn(alpha - i + 1.0)
    z0 = s * s * math.log(1.0 / q - 1.0) + 0.5
    j = alpha - i
    log_c0 = (
        i * math.log(q)
        + j * math.log1p(-q)
        + (i * i - i) / (2 * s * s)
        + special.log_ndtr((z0 - i) / s)
    )
    log_c1 = (
        j * math.log(q)
        + i * math.log1p(-q)
        + (j * j - j) / (2 * s * s)
        + special.log_ndtr((j - z0) / s)
    )
    return log_binom, sign, log_c0, log_c1


def _log_a_frac(q: float, s: float, alpha: float) -> float:
    """Upper bound on log A_alpha for fractional alpha (exact to ~1e-10 when converged)."""
    n_terms = max(int(math.floor(alpha)) + 2, 256)
    while True:
        i = np.arange(n_terms, dtype=float)
        log_binom, sign, log_c0, log_c1 = _frac_log_terms(q, s, alpha, i)
        log_abs = np.concatenate([log_binom + log_c0, log_binom + log_c1])
        log_sum, sum_sign = special.logsumexp(
            log_abs, b=np.concatenate([sign, sign]), return_sign=True
        )
        if sum_sign <= 0:  # cannot happen for a converged series of a positive quantity
            raise PrivacyError(f"fractional-order RDP series failed at alpha = {alpha}")
        last = float(n_terms - 1)
        nxt = np.array([n_terms], dtype=float)
        _, _, c0_next, c1_next = _frac_log_terms(q, s, alpha, nxt)
        log_tail = float(
            special.gammaln(alpha)
            - special.gammaln(last + 1.0)
            - special.gammaln(alpha - last)
            + np.logaddexp(c0_next[0], c1_next[0])
        )
        log_roundoff = math.log((math.log2(2 * n_terms) + 4) * np.finfo(float).eps) + float(
            special.logsumexp(log_abs)
        )
        log_total = float(special.logsumexp([log_sum, log_tail, log_roundoff]))
        small = log_tail < log_sum + math.log(1e-11 * max(abs(log_sum), 1e-300))
        if small or n_terms >= _MAX_TERMS:
            return log_total
        n_terms *= 4


def rdp_poisson_gaussian(
    q: float, noise_multiplier: float, orders: Sequence[float] = DEFAULT_ORDERS
) -> np.ndarray:
    """RDP of one Poisson-subsampled Gaussian step (add/remove-one), at each order.

    Integer orders exact; fractional orders a proved upper bound (module docstring).
    """
    q, s = _check_q_sigma(q, noise_multiplier)
    a = _check_orders(orders)
    if q == 0.0:
        return np.zeros_like(a)
    if q == 1.0:
        return a / (2.0 * s * s)
    out = np.empty_like(a)
    for k, alpha in enumerate(a):
        if float(alpha).is_integer():
            log_a = _log_a_int(q, s, int(alpha))
        else:
            log_a = _log_a_frac(q, s, float(alpha))
        out[k] = log_a / (alpha - 1.0)
    return out


def rdp_fixed_size_gaussian(
    batch_size: int, n: int, noise_multiplier: float, orders: Sequence[float] = DEFAULT_ORDERS
) -> np.ndarray:
    """RDP upper bound of one Gaussian step on a uniformly drawn batch of fixed size (replace-one).

    noise_multiplier is relative to the replace-one sensitivity (2C for a sum clipped to C).
    Wang, Balle & Kasiviswanathan 2019 Thm 27 (Cor. 10 at fractional orders), dp-accounting 0.6.
    """
    if int(n) != n or int(batch_size) != batch_size or not 1 <= batch_size <= n:
        raise PrivacyError(f"need integers 1 <= batch_size <= n, got {batch_size} and {n}")
    _, s = _check_q_sigma(batch_size / n, noise_multiplier)
    a = _check_orders(orders)
    return np.asarray(_dpa_rdp._compute_rdp_sample_wor_gaussian(batch_size / n, s, a), float)


def rdp_to_epsilon(
    orders: Sequence[float], rdp: Sequence[float], delta: float, conversion: str = "improved"
) -> tuple[float, float]:
    """Smallest epsilon over the orders and the order attaining it.

    classic (Mironov 2017, Prop. 3): eps = rdp + ln(1/delta)/(alpha - 1).
    improved (Canonne, Kamath & Steinke 2020, Prop. 12; Asoodeh et al. 2021):
    eps = rdp + ln(1 - 1/alpha) - ln(delta alpha)/(alpha - 1); with it, eps = 0 whenever
    delta >= sqrt(1 - exp(-rdp)) (KL bound, as dp-accounting does).
    """
    a = _check_orders(orders)
    r = np.asarray(rdp, dtype=float)
    if r.shape != a.shape or np.any(np.isnan(r)):
        raise PrivacyError("rdp must be a list of numbers, one per order")
    if not 0.0 < float(delta) < 1.0:
        raise PrivacyError(f"delta must lie in (0, 1), got {delta}")
    if conversion not in CONVERSIONS:
        raise PrivacyError(f"conversion must be 'improved' or 'classic', got {conversion!r}")
    with np.errstate(invalid="ignore"):
        if conversion == "classic":
            eps = r + math.log(1.0 / delta) / (a - 1.0)
        else:
            eps = r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
            eps = np.where(delta**2 + np.expm1(-r) > 0, 0.0, eps)
    eps = np.where(np.isinf(r), np.inf, np.maximum(eps, 0.0))
    best = int(np.argmin(eps))
    return float(eps[best]), float(a[best])


def sampled_gaussian_event(
    sampling: str, *, q: float, noise_multiplier: float, steps: int, n: int | None = None
) -> dp_event.DpEvent:
    """The dp-accounting event of ``steps`` subsampled Gaussian steps under a declared sampler."""
    q, s = _check_q_sigma(q, noise_multiplier)
    if int(steps) != steps or steps < 1:
        raise PrivacyError(f"steps must be a positive integer, got {steps}")
    if sampling == "poisson":
        inner: dp_event.DpEvent = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s))
    elif sampling == "fixed":
        m = fixed_batch_size(q, n)
        inner = dp_event.SampledWithoutReplacementDpEvent(int(n), m, dp_event.GaussianDpEvent(s))
    else:
        raise PrivacyError(f"sampling must be 'poisson' or 'fixed', got {sampling!r}")
    return dp_event.SelfComposedDpEvent(inner, int(steps))


def fixed_batch_size(q: float, n: int | None) -> int:
    """Batch size m = q n of fixed-size sampling; q n must be an integer."""
    if n is None or int(n) != n or n < 1:
        raise PrivacyError("fixed-size sampling needs the dataset size n (a positive integer)")
    m = round(q * n)
    if m < 1 or abs(q * n - m) > 1e-6 * max(1.0, q * n):
        raise PrivacyError(f"fixed-size sampling needs q*n to be a positive integer, got {q * n}")
    return int(m)


def _rdp_steps(
    sampling: str, q: float, s: float, steps: int, n: int | None, orders: np.ndarray
) -> np.ndarray:
    if sampling == "poisson":
        return steps * rdp_poisson_gaussian(q, s, orders)
    if sampling == "fixed":
        return steps * rdp_fixed_size_gaussian(fixed_batch_size(q, n), int(n), s, orders)
    raise PrivacyError(f"sampling must be 'poisson' or 'fixed', got {sampling!r}")


def pld_epsilon(event: dp_event.DpEvent, delta: float) -> float | None:
    """epsilon from dp-accounting's PLD accountant (add/remove), None if it has no PLD for it."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    if not acc.supports(event):
        return None
    acc.compose(event)
    return float(acc.get_epsilon(delta))


def epsilon_for(
    sampling: str,
    q: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    n: int | None = None,
    conversion: str = "improved",
    orders: Sequence[float] = DEFAULT_ORDERS,
    with_pld: bool = True,
) -> dict:
    """(epsilon, delta) of ``steps`` subsampled Gaussian steps: RDP epsilon, best order, PLD eps.

    The sampler must be declared: "poisson" (add/remove) or "fixed" (batches of q*n drawn
    without replacement, replace-one; n required). Poisson accounting is never applied to
    fixed-size batches. PLD epsilon is None where dp-accounting has no PLD (fixed-size).
    """
    event = sampled_gaussian_event(
        sampling, q=q, noise_multiplier=noise_multiplier, steps=steps, n=n
    )
    a = _check_orders(orders)
    rdp = _rdp_steps(sampling, q, float(noise_multiplier), int(steps), n, a)
    eps, order = rdp_to_epsilon(a, rdp, delta, conversion)
    pld = pld_epsilon(event, delta) if with_pld and sampling == "poisson" else None
    return {
        "sampling": sampling,
        "relation": "add_remove" if sampling == "poisson" else "replace_one",
        "q": float(q),
        "noise_multiplier": float(noise_multiplier),
        "steps": int(steps),
        "delta": float(delta),
        "epsilon": eps,
        "best_order": order,
        "conversion": conversion,
        "pld_epsilon": pld,
    }


def calibrate_noise_multiplier(
    target_epsilon: float,
    delta: float,
    sampling: str,
    q: float,
    steps: int,
    n: int | None = None,
    conversion: str = "improved",
    orders: Sequence[float] = DEFAULT_ORDERS,
    rtol: float = 1e-6,
) -> float:
    """Smallest noise multiplier (to rtol, rounded up) whose RDP epsilon is <= target_epsilon."""
    target = float(target_epsilon)
    if not (target > 0 and math.isfinite(target)):
        raise PrivacyError(f"target epsilon must be a finite positive number, got {target}")
    a = _check_orders(orders)

    def eps_at(s: float) -> float:
        return rdp_to_epsilon(a, _rdp_steps(sampling, q, s, int(steps), n, a), delta, conversion)[0]

    sampled_gaussian_event(sampling, q=q, noise_multiplier=1.0, steps=steps, n=n)  # validate
    lo, hi = 0.5, 1.0
    if eps_at(hi) > target:
        while eps_at(hi) > target:
            lo, hi = hi, 2.0 * hi
            if hi > 1e6:
                raise PrivacyError(f"no noise multiplier up to 1e6 reaches epsilon {target}")
    else:
        while eps_at(lo) <= target:
            if lo < 1e-3:
                return lo
            hi, lo = lo, lo / 2.0
    while hi - lo > rtol * hi:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if eps_at(mid) <= target else (mid, hi)
    return hi
