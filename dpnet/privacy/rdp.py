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
Thm 27, with Cor. 10 interpolation at fractional orders: dp-accounting's public RDP accountant
(:mod:`dpnet.privacy.fixed_size`). PLD epsilons come from :mod:`dpnet.privacy.pld`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from scipy import optimize, special

from dpnet.checks import positive
from dpnet.errors import PrivacyError
from dpnet.privacy import fixed_size
from dpnet.privacy.pld import PLD_MAX_POINTS, pld_accounting

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
SIGMA_RANGE = (1e-12, 1e8)
"""Noise multipliers accepted: outside, the series (and dp-accounting) overflow."""
MAX_COUNT = 10**15
"""Largest number of steps and dataset size accepted."""
_MAX_TERMS = 1 << 17


def _check_orders(orders: Sequence[float] | np.ndarray) -> np.ndarray:
    a = np.atleast_1d(np.asarray(orders, dtype=float))
    if a.ndim != 1 or a.size == 0 or not np.all(a > 1) or np.any(np.isnan(a)):
        raise PrivacyError("RDP orders must be a non-empty 1-d list of numbers > 1")
    return a


def _check_q_sigma(q: float, noise_multiplier: float) -> tuple[float, float]:
    q = float(q)
    if not 0.0 <= q <= 1.0:
        raise PrivacyError(f"sampling rate q must lie in [0, 1], got {q}")
    s = positive("noise_multiplier", noise_multiplier)
    if not SIGMA_RANGE[0] <= s <= SIGMA_RANGE[1]:
        raise PrivacyError(
            f"noise_multiplier must lie in [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}], got {s:g}"
        )
    return q, s


def _check_count(value: float | None, what: str) -> int:
    """A positive integer <= MAX_COUNT (steps, dataset size)."""
    if (
        isinstance(value, int | np.integer | float)
        and not isinstance(value, bool)
        and not (isinstance(value, float) and not value.is_integer())
        and 1 <= value <= MAX_COUNT
    ):
        return int(value)
    raise PrivacyError(f"{what} must be an integer in [1, {MAX_COUNT:.0e}], got {value}")


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
    z0 = s * s * (math.log1p(-q) - math.log(q)) + 0.5  # ln(1/q - 1), finite for tiny q
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
    q: float, noise_multiplier: float, orders: Sequence[float] | np.ndarray = DEFAULT_ORDERS
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
    batch_size: int,
    n: int,
    noise_multiplier: float,
    orders: Sequence[float] | np.ndarray = DEFAULT_ORDERS,
) -> np.ndarray:
    """RDP upper bound of one Gaussian step on a uniformly drawn batch of fixed size (replace-one).

    noise_multiplier is relative to the replace-one sensitivity (2C for a sum clipped to C).
    Wang, Balle & Kasiviswanathan 2019 Thm 27 (Cor. 10 at fractional orders), computed by
    dp-accounting's public ``RdpAccountant`` (:mod:`dpnet.privacy.fixed_size`).
    """
    n, batch_size = _check_count(n, "n"), _check_count(batch_size, "batch_size")
    if not batch_size <= n:
        raise PrivacyError(f"need integers 1 <= batch_size <= n, got {batch_size} and {n}")
    _, s = _check_q_sigma(batch_size / n, noise_multiplier)
    a = _check_orders(orders)
    return fixed_size.rdp_fixed_size_gaussian(batch_size, n, s, a)


def rdp_to_epsilon(
    orders: Sequence[float] | np.ndarray,
    rdp: Sequence[float] | np.ndarray,
    delta: float,
    conversion: str = "improved",
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
    eps = _eps_per_order(a, r, float(delta), conversion)
    best = int(np.argmin(eps))
    return float(eps[best]), float(a[best])


def _eps_per_order(a: np.ndarray, r: np.ndarray, delta: float, conversion: str) -> np.ndarray:
    """epsilon at each order (checked inputs; see :func:`rdp_to_epsilon`)."""
    eps = _raw_eps(a, r, delta, conversion)
    if conversion == "improved":
        with np.errstate(invalid="ignore"):
            eps = np.where(delta**2 + np.expm1(-r) > 0, 0.0, eps)
    return np.where(np.isinf(r), np.inf, np.maximum(eps, 0.0))


def _raw_eps(a: np.ndarray, r: np.ndarray, delta: float, conversion: str) -> np.ndarray:
    """The conversion formula alone (no KL rule, no clipping at 0): continuous in r."""
    with np.errstate(invalid="ignore"):
        if conversion == "classic":
            return r - math.log(delta) / (a - 1.0)
        return r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)


def sampled_gaussian_event(
    sampling: str, *, q: float, noise_multiplier: float, steps: int, n: int | None = None
) -> dp_event.DpEvent:
    """The dp-accounting event of ``steps`` subsampled Gaussian steps under a declared sampler."""
    q, s = _check_q_sigma(q, noise_multiplier)
    steps = _check_count(steps, "steps")
    if sampling == "poisson":
        inner: dp_event.DpEvent = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s))
    elif sampling == "fixed":
        m = fixed_batch_size(q, n)
        assert n is not None  # fixed_batch_size refused None
        inner = dp_event.SampledWithoutReplacementDpEvent(int(n), m, dp_event.GaussianDpEvent(s))
    else:
        raise PrivacyError(f"sampling must be 'poisson' or 'fixed', got {sampling!r}")
    return dp_event.SelfComposedDpEvent(inner, int(steps))


def fixed_batch_size(q: float, n: int | None) -> int:
    """Batch size m = q n of fixed-size sampling; q n must be an integer."""
    if n is None:
        raise PrivacyError("fixed-size sampling needs the dataset size n (a positive integer)")
    n = _check_count(n, "the dataset size n")
    m = round(q * n)
    if m < 1 or abs(q * n - m) > 1e-6 * max(1.0, q * n):
        raise PrivacyError(f"fixed-size sampling needs q*n to be a positive integer, got {q * n}")
    return int(m)


def _rdp_steps(
    sampling: str,
    q: float,
    s: float,
    steps: int,
    n: int | None,
    orders: np.ndarray,
    fast: bool = False,
) -> np.ndarray:
    """RDP of ``steps`` steps; ``fast``: fixed-size batches by the shared-difference copy of
    the accountant's bound (steers calibration only, :mod:`dpnet.privacy.fixed_size`)."""
    if sampling == "poisson":
        return steps * rdp_poisson_gaussian(q, s, orders)
    if sampling == "fixed" and fast and q < 1.0:
        return steps * fixed_size.fast_rdp_fixed_size_gaussian(q, s, orders)
    if sampling == "fixed":
        m = fixed_batch_size(q, n)
        assert n is not None  # fixed_batch_size refused None
        return steps * rdp_fixed_size_gaussian(m, int(n), s, orders)
    raise PrivacyError(f"sampling must be 'poisson' or 'fixed', got {sampling!r}")


def pld_epsilon(event: dp_event.DpEvent, delta: float) -> float | None:
    """Pessimistic PLD epsilon of ``event`` (add/remove), within :mod:`dpnet.privacy.pld`'s
    budget; None if dp-accounting's PLDAccountant has no PLD for it or the budget skipped it."""
    if not PLDAccountant().supports(event):
        return None
    return pld_accounting(event, delta)["pld_epsilon"]


def poisson_pld_epsilon(
    q: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    max_points: int = PLD_MAX_POINTS,
) -> dict:
    """Pessimistic PLD epsilon of ``steps`` Poisson-subsampled Gaussian steps, within a budget.

    The budget rule (grid coarsened from 1e-4 up to 1e-2 to fit ``max_points``, or skipped with
    the reason) is :mod:`dpnet.privacy.pld`'s. Returns {"pld_epsilon": float | None,
    "pld_discretization": float | None, "pld_note": str} (note: "" or why skipped/coarsened).
    """
    event = sampled_gaussian_event("poisson", q=q, noise_multiplier=noise_multiplier, steps=steps)
    return pld_accounting(event, delta, max_points)


def epsilon_for(
    sampling: str,
    q: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    n: int | None = None,
    conversion: str = "improved",
    orders: Sequence[float] | np.ndarray = DEFAULT_ORDERS,
    with_pld: bool = True,
) -> dict:
    """(epsilon, delta) of ``steps`` subsampled Gaussian steps: RDP epsilon, best order, PLD eps.

    The sampler must be declared: "poisson" (add/remove) or "fixed" (batches of q*n drawn
    without replacement, replace-one; n required). Poisson accounting is never applied to
    fixed-size batches. PLD epsilon (:func:`poisson_pld_epsilon`, bounded in time and memory)
    is None where dp-accounting has no PLD (fixed-size) or where it was skipped (pld_note).
    """
    sampled_gaussian_event(sampling, q=q, noise_multiplier=noise_multiplier, steps=steps, n=n)
    a = _check_orders(orders)
    rdp = _rdp_steps(sampling, q, float(noise_multiplier), int(steps), n, a)
    eps, order = rdp_to_epsilon(a, rdp, delta, conversion)
    out = {
        "sampling": sampling,
        "relation": "add_remove" if sampling == "poisson" else "replace_one",
        "q": float(q),
        "noise_multiplier": float(noise_multiplier),
        "steps": int(steps),
        "delta": float(delta),
        "epsilon": eps,
        "best_order": order,
        "conversion": conversion,
        "pld_epsilon": None,
        "pld_discretization": None,
        "pld_note": "not computed",
    }
    if sampling == "fixed":
        out["pld_note"] = "no PLD for fixed-size sampling"
    elif with_pld:
        out.update(poisson_pld_epsilon(q, noise_multiplier, int(steps), delta))
    return out


CALIBRATION_RANGE = (1e-3, 1e6)
"""Noise multipliers searched: above, refused; below, any sigma reaches the target."""


def calibrate_noise_multiplier(
    target_epsilon: float,
    delta: float,
    sampling: str,
    q: float,
    steps: int,
    n: int | None = None,
    conversion: str = "improved",
    orders: Sequence[float] | np.ndarray = DEFAULT_ORDERS,
    rtol: float = 1e-6,
) -> float:
    """Smallest noise multiplier (to rtol, rounded up) whose RDP epsilon is <= target_epsilon.

    Refused (PrivacyError) when sigma = 1e6 does not reach the target; a sigma < 1e-3 is
    returned as soon as one reaches it. Per-order roots by Brent's method on ln sigma (each
    order's epsilon is non-increasing in sigma), so the few full-grid evaluations stay cheap.
    The one calibration routine of dpnet: fixed-size batches are searched on the fast copy of
    the accountant's bound, and the answer is checked with the accountant itself on every
    order (on disagreement the search is redone on the accountant).
    """
    target = positive("target epsilon", target_epsilon)
    if not 0.0 < rtol < 0.5:
        raise PrivacyError(f"rtol must lie in (0, 0.5), got {rtol}")
    if not 0.0 < float(delta) < 1.0:
        raise PrivacyError(f"delta must lie in (0, 1), got {delta}")
    a = _check_orders(orders)
    sampled_gaussian_event(sampling, q=q, noise_multiplier=1.0, steps=steps, n=n)  # validate
    steps, delta = int(steps), float(delta)

    def rdp_of(fast: bool) -> Callable[[float, np.ndarray], np.ndarray]:
        return lambda s, o: _rdp_steps(sampling, q, s, steps, n, o, fast)

    # Fast orders first: exact integers for Poisson, <= 32 for fixed-size batches.
    first = a[a == np.round(a)] if sampling == "poisson" else a[a <= 32]
    fast = sampling == "fixed" and q < 1.0
    args = (target, delta, conversion, a, first, rtol)
    hi = _search(rdp_of(fast), *args)
    if fast and _eps_per_order(a, rdp_of(False)(hi, a), delta, conversion).min() > target:
        hi = _search(rdp_of(False), *args)  # the steering copy disagreed: the accountant decides
    return hi


def _search(
    rdp: Callable[[float, np.ndarray], np.ndarray],
    target: float,
    delta: float,
    conversion: str,
    a: np.ndarray,
    first: np.ndarray,
    rtol: float,
) -> float:
    """Smallest sigma (to rtol, rounded up) with min over orders a of epsilon <= target, the
    RDP of sigma at orders o being rdp(sigma, o); ``first``: orders solved together first."""
    s_min, s_max = CALIBRATION_RANGE

    def eps_vec(s: float, o: np.ndarray) -> np.ndarray:  # epsilon at each order in o
        return _eps_per_order(o, rdp(s, o), delta, conversion)

    kl_level = -math.log1p(-(delta**2)) * (1.0 - 1e-9) if conversion == "improved" else 0.0

    def solve_order(o: np.ndarray, test: float) -> float:
        """Root of one order's curve below test. That curve jumps to 0 where its RDP falls
        below -ln(1 - delta^2) (KL rule), so the jump and the continuous formula are solved
        apart (Brent is slow on a jump); a generic search is the fallback."""

        def rdp_o(s: float) -> float:
            return float(rdp(s, o)[0])

        def raw(s: float) -> float:
            return float(_raw_eps(o, np.array([rdp_o(s)]), delta, conversion)[0])

        roots = []
        if raw(test) <= target:
            roots.append(_solve_log(raw, target, s_min, test, rtol))
        if kl_level > 0.0 and rdp_o(test) <= kl_level:
            roots.append(_solve_log(rdp_o, kl_level, s_min, test, rtol))
        if roots and eps_vec(min(roots), o)[0] <= target:
            return min(roots)
        return _solve_log(lambda s: float(eps_vec(s, o)[0]), target, s_min, test, rtol)

    # epsilon = min over orders of non-increasing curves, so sigma* = min over orders of each
    # curve's own root. The ``first`` orders together; then one evaluation of every order just
    # below the current answer names the orders that still beat it, and the best is solved alone.
    hi, test = None, s_max
    if 0 < first.size < a.size and eps_vec(s_max, first).min() <= target:
        hi = _solve_log(lambda s: float(eps_vec(s, first).min()), target, s_min, s_max, rtol)
        test = hi / (1.0 + rtol)
    cand = a
    while hi is None or hi >= s_min:
        e = eps_vec(test, cand)
        if not np.any(e <= target):
            break
        cand, e = cand[e <= target], e[e <= target]
        hi = solve_order(cand[[int(np.argmin(e))]], test)
        test = hi / (1.0 + rtol)
    if hi is None:
        raise PrivacyError(f"no noise multiplier up to {s_max:g} reaches epsilon {target:g}")
    return hi


def _solve_log(
    f: Callable[[float], float],
    target: float,
    s_min: float,
    hi: float,
    rtol: float,
    step: float = 10.0,
) -> float:
    """Smallest s (rounded up, to rtol) with f(s) <= target, f non-increasing, f(hi) <= target.

    Returns s < s_min as soon as such an s satisfies the target.
    """
    memo: dict[float, float] = {}

    def g(t: float) -> float:  # f(e^t) - target, memoised (brentq re-evaluates the ends)
        if t not in memo:
            memo[t] = f(math.exp(t)) - target
        return memo[t]

    hi_t = math.log(hi)
    memo[hi_t] = f(hi) - target
    if memo[hi_t] > 0.0:
        raise PrivacyError("noise calibration: the upper end does not reach the target")
    lo_t = hi_t - math.log(step)
    while g(lo_t) <= 0.0:
        if lo_t < math.log(s_min):
            return math.exp(lo_t)
        hi_t, lo_t = lo_t, lo_t - math.log(step)
        step = min(step * step, 10.0)
    x = optimize.brentq(g, lo_t, hi_t, xtol=rtol / 4) + rtol / 2
    if x < hi_t and g(x) <= 0.0:
        return math.exp(x)
    lo, hi = math.exp(lo_t), math.exp(hi_t)  # bisection fallback (f glitches at round-off)
    while hi - lo > rtol * hi:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if f(mid) <= target else (mid, hi)
    return hi
