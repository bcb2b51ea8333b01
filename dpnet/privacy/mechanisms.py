"""Noise mechanisms. Each checks its parameters, draws from the given Generator and returns
``(released_value, event)``, the event describing exactly what was released.

Sensitivities are the caller's, under the caller's neighbouring relation: for a sum of terms
clipped to norm C the sensitivity is C under add/remove-one and 2C under replace-one.
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting import dp_event
from scipy import optimize, special

from dpnet.errors import PrivacyError
from dpnet.privacy.binary_rr import epsilon_from_keep_prob, flip_labels
from dpnet.privacy.checks import check_rng, positive
from dpnet.privacy.events import PureDpEvent

ArrayOrFloat = np.ndarray | float


def _finite_values(value: ArrayOrFloat) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise PrivacyError("the value to privatise contains NaN or infinity")
    return arr


def _like_input(value: ArrayOrFloat, out: np.ndarray) -> ArrayOrFloat:
    return float(out) if np.ndim(value) == 0 else out


GRID_FRACTION = 2.0**-10  # grid step <= l1_sensitivity * 2^-10 / dim
MAX_SCALE = 2.0**40  # largest noise scale in grid units: numpy's noise stays below 2^46
_EXACT_INT = 2.0**52  # |integers| <= 2^52 and sums of two of them are exact doubles


def laplace_grid(l1_sensitivity: float, dim: int) -> float:
    """The power of two g <= l1_sensitivity * 2^-10 / dim on which Laplace outputs live."""
    return float(2.0 ** math.floor(math.log2(l1_sensitivity * GRID_FRACTION / dim)))


def discrete_laplace(
    scale: float, size: int | tuple[int, ...], rng: np.random.Generator
) -> np.ndarray:
    """Integers k with P(k) = (1 - a)/(1 + a) a^|k|, a = exp(-1/scale): G1 - G2 for iid
    geometric G_i on {1, 2, ...} with success probability q = 1 - a.

    Sampler slack (numpy >= 2 ``Generator.geometric``, C ``random_geometric``). For q < 1/3,
    i.e. scale > 1/ln 1.5 = 2.47 -- the Laplace mechanism's scales (>= 1025 d/epsilon) unless
    epsilon > 415 d, and every proposal of :func:`discrete_gaussian` inside
    :func:`gaussian_mechanism` (scale >= 5) -- numpy inverts: G = ceil(E / -log1p(-q)), E from
    its ziggurat exponential sampler; for q >= 1/3 it searches the cumulative sums p, p + pq,
    ... against one uniform double U in 2^-53 Z (G <= ~37 scale + 2). Either way the law is
    not exactly geometric, but it depends on the scale only, never on the data:

    - E lies on a grid (53-bit integers times a layer width <= 1e-15) and E <= r + 53 ln 2 =
      44.43 (tail branch r - log1p(-U)), so G <= ceil(44.44 scale): the noise support is
      bounded (the int64 cap of numpy is never reached since scale <= 2^40 in the mechanisms);
    - estimated (not proved) total-variation distance from the exact law: of order 1e-17 *
      scale per geometric draw (a few ziggurat points, of probability 2^-61 each, cross each
      of the ~8 scale atom boundaries of the bulk; tail-branch points weigh ~5e-20) plus
      ~1e-16 from the floating-point exp in the ziggurat's wedge test, plus the missing tail,
      P(G > 44.44 scale) = e^-44.4 = 5e-20; the effective scale is scale (1 +- ~1e-16).

    A mechanism that is epsilon-DP with the exact law and uses draws whose laws are within
    total variation tau_i of it is (epsilon, (1 + e^epsilon) sum_i tau_i)-DP (couple each draw
    with an exact one); pure epsilon-DP does not survive the bounded support exactly. The
    ledger does not carry this slack.
    """
    q = -math.expm1(-1.0 / scale)
    return (rng.geometric(q, size=size) - rng.geometric(q, size=size)).astype(np.float64)


def laplace_mechanism(
    value: ArrayOrFloat, *, l1_sensitivity: float, epsilon: float, rng: np.random.Generator
) -> tuple[ArrayOrFloat, PureDpEvent]:
    """value + Laplace noise of scale ~ l1_sensitivity / epsilon per coordinate: epsilon-DP.

    Textbook floating-point Laplace sampling leaks through the set of floats it can reach
    (Mironov 2012). dpnet releases on a grid instead: with d = value.size, g =
    :func:`laplace_grid` (a power of two) and Delta' = l1_sensitivity + d g,

        k = rint(clip(value / g, +-2^52)),  out = (k + Y) g,  Y_j iid P(y) ~ exp(-|y| / t),
        t = Delta' / (epsilon g) <= 2^40 (PrivacyError otherwise).

    Rounding moves each coordinate by at most g/2 and the clip is 1-Lipschitz, so neighbours'
    k differ by at most Delta'/g in L1 and the pmf ratio is <= exp(||k - k'||_1 / t) <=
    e^epsilon (Canonne, Kamath & Steinke 2020, or the Laplace proof with sums instead of
    integrals). numpy's noise satisfies |Y| < 2^46 (:func:`discrete_laplace`), so k + Y is an
    exact integer and out an exact multiple of g, whatever the data. Noise scale factor
    1 + d g / l1_sensitivity <= 1 + 2^-10.

    Event: ``PureDpEvent(epsilon)`` also for a scalar. dp-accounting's ``LaplaceDpEvent`` is
    the continuous Laplace mechanism, whose (epsilon', delta) curve and RDP lie below the
    discrete one's for some epsilon' (tests/test_privacy_mechanisms.py); PureDpEvent is
    accounted by what every epsilon-DP mechanism satisfies. The sampler's data-independent
    slack (:func:`discrete_laplace`) is not in the event.
    """
    sens = positive("l1_sensitivity", l1_sensitivity)
    eps = positive("epsilon", epsilon)
    check_rng(rng)
    arr = _finite_values(value)
    dim = max(arr.size, 1)
    g = positive("grid step (l1_sensitivity too small)", laplace_grid(sens, dim))
    scale = (sens + dim * g) / (eps * g)
    if not scale <= MAX_SCALE:
        raise PrivacyError(
            f"noise scale {scale:.3g} grid steps is beyond exact integers "
            f"(epsilon {eps:.3g} too small)"
        )
    k = np.rint(np.clip(arr / g, -_EXACT_INT, _EXACT_INT))
    out = (k + discrete_laplace(scale, arr.shape, rng)) * g
    event = PureDpEvent(epsilon=eps, mechanism="discrete_laplace", dim=dim)
    return _like_input(value, out), event


SMOOTHING = 4.0  # r: discrete Gaussian scale added on top of m * Delta_Z, in grid units


def gaussian_grid(l2_sensitivity: float, dim: int) -> float:
    """The power of two g <= l2_sensitivity * 2^-10 / sqrt(dim) on which Gaussian outputs live."""
    bound = l2_sensitivity * GRID_FRACTION / math.sqrt(dim)
    return float(2.0 ** math.floor(math.log2(bound)))


def discrete_gaussian(
    scale: float, size: int | tuple[int, ...], rng: np.random.Generator
) -> np.ndarray:
    """Integers y with P(y) proportional to exp(-y^2 / (2 scale^2)) (as float64).

    Canonne, Kamath & Steinke (2020), Algorithm 3: propose Y from the discrete Laplace with
    scale t = floor(scale) + 1 and accept with probability exp(-(|Y| - scale^2/t)^2 /
    (2 scale^2)); since exp(-|y|/t) exp(-(|y| - s^2/t)^2/(2 s^2)) = exp(-y^2/(2 s^2) -
    s^2/(2 t^2)), accepted proposals have the target law. Vectorised: each round proposes
    1.5 times the missing count plus 16 (0.76 of them are accepted for large scales, 0.44 at
    worst) and keeps the accepted values in order. The law is exact up to the floating-point
    exp and the 2^-53 granularity of the uniform double in the acceptance test (~1e-16 per
    draw) and up to numpy's geometric sampler (estimated ~1e-17 t per proposal in total
    variation, support bounded by |Y| <= 44.44 t + 1; see :func:`discrete_laplace`): a slack
    that depends on the scale only, never on the data.
    """
    shape = (size,) if isinstance(size, int) else tuple(size)
    n = math.prod(shape)
    t = math.floor(scale) + 1.0
    kept: list[np.ndarray] = []
    missing = n
    while missing > 0:
        y = discrete_laplace(t, missing + missing // 2 + 16, rng)
        accept = rng.random(y.size) < np.exp(-((np.abs(y) - scale**2 / t) ** 2) / (2.0 * scale**2))
        kept.append(y[accept][:missing])
        missing -= kept[-1].size
    out = np.concatenate(kept) if kept else np.empty(0)
    return out.reshape(shape)


def gaussian_mechanism(
    value: ArrayOrFloat,
    *,
    l2_sensitivity: float,
    noise_multiplier: float,
    rng: np.random.Generator,
) -> tuple[ArrayOrFloat, dp_event.GaussianDpEvent]:
    """value + Gaussian noise of standard deviation ~ noise_multiplier * l2_sensitivity, on a
    grid, accounted as the Gaussian mechanism: ``GaussianDpEvent(noise_multiplier)``.

    Floating-point Gaussian samples leak through the set of reachable doubles (Mironov 2012;
    Jin, McMurtry, Rubinstein & Ohrimenko 2022). Here, with m = noise_multiplier, Delta =
    l2_sensitivity, d = value.size and g = :func:`gaussian_grid` (a power of two):

        u = clip(value / g, +-2^52),  k = rint(u) in Z^d,  out = (k + Y) g,  Y_j iid N_Z(0, s^2),
        s^2 = ((m Delta_Z)^2 + r^2)(1 + 2^-40),  Delta_Z = Delta / g + sqrt(d),  r = SMOOTHING = 4,

    N_Z the discrete Gaussian (:func:`discrete_gaussian`). s <= 2^40 is required, so k + Y is
    an integer below 2^53 in magnitude (numpy's proposals give |Y| <= 44.44 (s + 1) + 1 <
    2^46) and out is an exact multiple of g whatever the data. Noise std < s g <= m Delta
    (1 + 2^-10) (1 + 8e-6 / m^2) (1 + 2^-41); the factor 1 + 2^-40 keeps floating point from
    shrinking s.

    Sensitivity. The clip is 1-Lipschitz and |k_j - u_j| <= 1/2, so for neighbours
    ||k - k'||_2 <= ||u - u'||_2 + ||(k - u) - (k' - u')||_2 <= Delta / g + sqrt(d) = Delta_Z
    (each coordinate of the second difference is at most 1).

    RDP (exact; Canonne, Kamath & Steinke 2020, multivariate zCDP): for v in Z^d, per coordinate
    alpha (y - v)^2 + (1 - alpha) y^2 = (y - alpha v)^2 - alpha (alpha - 1) v^2 and
    sum_y exp(-(y - c)^2 / 2s^2) <= sum_y exp(-y^2 / 2s^2) for real c (Poisson summation), so
    D_alpha(N_Z(v, s^2 I) || N_Z(0, s^2 I)) <= alpha ||v||^2 / (2 s^2) <= alpha / (2 m^2).

    (epsilon, delta), PLD and subsampled accounting of the event are theorems about the
    continuous Gaussian; the plain discrete Gaussian does not always meet them (its delta can
    be larger at small scales). The r^2 term makes them hold: draw Z ~ N(k, (s^2 - r^2) I),
    a continuous Gaussian mechanism with sensitivity Delta_Z and multiplier >= m, then
    Y' ~ N_Z(Z, r^2 I). By Poisson summation, sum_y exp(-(y - z)^2 / 2r^2) =
    sqrt(2 pi) r (1 + 2 sum_{j>=1} e^{-2 pi^2 r^2 j^2} cos(2 pi j z)) varies with z by a factor
    within 1 +- eta, eta = 2 sum_j e^{-2 pi^2 r^2 j^2} < 1e-136, and the Gaussian convolution
    gives exp(-(y - k)^2 / 2s^2); so P(Y' = y) / N_Z(k, s^2 I)(y) lies within
    ((1 + eta) / (1 - eta))^(+-d). The release is thus a post-processing of the continuous
    mechanism up to that likelihood factor: every (epsilon, delta) that GaussianDpEvent(m)
    certifies, with or without Poisson / fixed-size subsampling (mixtures keep the factor),
    holds with epsilon + 4.1 d eta and delta e^{2.1 d eta}, negligible for any d. The
    sampler's data-independent slack (:func:`discrete_gaussian`) is not in the event.
    """
    sens = positive("l2_sensitivity", l2_sensitivity)
    mult = positive("noise_multiplier", noise_multiplier)
    check_rng(rng)
    arr = _finite_values(value)
    dim = max(arr.size, 1)
    g = positive("grid step (l2_sensitivity too small)", gaussian_grid(sens, dim))
    delta_z = sens / g + math.sqrt(dim)
    scale = math.sqrt(((mult * delta_z) ** 2 + SMOOTHING**2) * (1.0 + 2.0**-40))
    if scale > MAX_SCALE:
        raise PrivacyError(f"noise scale {scale:.3g} grid steps is beyond exact integers")
    k = np.rint(np.clip(arr / g, -_EXACT_INT, _EXACT_INT))
    out = (k + discrete_gaussian(scale, arr.shape, rng)) * g
    return _like_input(value, out), dp_event.GaussianDpEvent(noise_multiplier=mult)


def _analytic_gaussian_delta(sigma_over_sens: float, epsilon: float) -> float:
    """delta(s) = Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s) (Balle & Wang 2018, Thm 8)."""
    s = sigma_over_sens
    a = special.ndtr(1.0 / (2.0 * s) - epsilon * s)
    b = math.exp(epsilon + special.log_ndtr(-1.0 / (2.0 * s) - epsilon * s))
    return float(a - b)


def gaussian_sigma(
    epsilon: float, delta: float, l2_sensitivity: float, method: str = "analytic"
) -> float:
    """Noise standard deviation that makes the Gaussian mechanism (epsilon, delta)-DP.

    ``analytic``: the smallest sigma, root of Balle & Wang's exact delta(sigma) (any epsilon > 0).
    ``classic``: sqrt(2 ln(1.25/delta)) l2_sensitivity / epsilon (Dwork & Roth, Thm A.1;
    valid only for epsilon < 1).
    """
    eps = positive("epsilon", epsilon)
    sens = positive("l2_sensitivity", l2_sensitivity)
    if not 0.0 < float(delta) < 1.0:
        raise PrivacyError(f"delta must lie in (0, 1), got {delta}")
    if method == "classic":
        if eps >= 1.0:
            raise PrivacyError(f"the classic Gaussian calibration needs epsilon < 1, got {eps}")
        return math.sqrt(2.0 * math.log(1.25 / delta)) * sens / eps
    if method != "analytic":
        raise PrivacyError(f"method must be 'analytic' or 'classic', got {method!r}")
    lo, hi = 1e-3, 1.0
    while _analytic_gaussian_delta(lo, eps) < delta:
        lo /= 10.0
    while _analytic_gaussian_delta(hi, eps) > delta:
        hi *= 10.0
    s = optimize.brentq(
        lambda v: _analytic_gaussian_delta(v, eps) - delta, lo, hi, xtol=1e-14, rtol=1e-14
    )
    return float(s) * sens


def randomized_response(
    labels: np.ndarray, *, keep_prob: float, rng: np.random.Generator
) -> tuple[np.ndarray, dp_event.DpEvent]:
    """Binary randomized response (:func:`dpnet.privacy.binary_rr.flip_labels`, which states
    the guarantee and the sampler) with its event: ``RandomizedResponseDpEvent`` with
    dp-accounting's noise parameter 2(1 - p) (uniform resampling w.p. 2(1 - p)), or
    ``NonPrivateDpEvent`` when p = 1."""
    return flip_labels(labels, keep_prob=keep_prob, rng=rng), randomized_response_event(keep_prob)


def randomized_response_event(keep_prob: float) -> dp_event.DpEvent:
    """The event of :func:`randomized_response` with keep probability p (also for a run that
    resumes from labels randomized before: the same release, recorded again, not a new one)."""
    if math.isinf(epsilon_from_keep_prob(keep_prob)):
        return dp_event.NonPrivateDpEvent()
    return dp_event.RandomizedResponseDpEvent(
        noise_parameter=2.0 * (1.0 - float(keep_prob)), num_buckets=2
    )


def kary_randomized_response(
    labels: np.ndarray, *, n_classes: int, epsilon: float, rng: np.random.Generator
) -> tuple[np.ndarray, dp_event.RandomizedResponseDpEvent]:
    """k-ary RR on labels 0..k-1: keep w.p. e^eps/(e^eps + k - 1), else a uniform other class.

    The largest likelihood ratio is e^eps: epsilon-label-DP. dp-accounting noise parameter
    k/(e^eps + k - 1). Sampler: the other class is exact (``rng.integers``); the keep
    probability is the computed double p~ = e^eps/(e^eps + k - 1) rounded up to a multiple of
    2^-53 (p~ itself when p~ >= 1/2), so the real epsilon differs from eps by floating-point
    rounding only, ~1e-16 / (p~ (1 - p~)), independently of the data.
    """
    eps = positive("epsilon", epsilon)
    if int(n_classes) != n_classes or n_classes < 2:
        raise PrivacyError(f"n_classes must be an integer >= 2, got {n_classes}")
    k = int(n_classes)
    check_rng(rng)
    y = np.asarray(labels)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer) or np.any((y < 0) | (y >= k)):
        raise PrivacyError(f"kary_randomized_response needs a 1-d integer array in 0..{k - 1}")
    keep = rng.random(y.shape[0]) < math.exp(eps) / (math.exp(eps) + k - 1)
    shift = rng.integers(1, k, size=y.shape[0])
    noisy = np.where(keep, y, (y + shift) % k)
    event = dp_event.RandomizedResponseDpEvent(
        noise_parameter=k / (math.exp(eps) + k - 1), num_buckets=k
    )
    return noisy, event


def objective_perturbation_noise(
    dim: int,
    *,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    jacobian_log_bound: float = 0.0,
) -> tuple[np.ndarray, PureDpEvent]:
    """b in R^dim with density proportional to exp(-epsilon ||b||_2 / sensitivity).

    In polar coordinates the density of r = ||b|| is proportional to r^(dim-1) e^(-eps r/sens),
    i.e. Gamma(dim, scale = sensitivity/epsilon), and the direction is uniform on the sphere.
    If the two noise vectors producing the same minimiser differ by at most ``sensitivity``
    the density ratio is <= e^epsilon (Chaudhuri, Monteleoni & Sarwate 2011, Thm 9); their
    proof adds the log-ratio of the Jacobians, which the caller passes as
    ``jacobian_log_bound`` so that the event carries the total epsilon + jacobian_log_bound.
    """
    eps = positive("epsilon", epsilon)
    sens = positive("sensitivity", sensitivity)
    if int(dim) != dim or dim < 1:
        raise PrivacyError(f"dim must be a positive integer, got {dim}")
    jac = float(jacobian_log_bound)
    if not (math.isfinite(jac) and jac >= 0):
        raise PrivacyError(f"jacobian_log_bound must be finite and >= 0, got {jac}")
    check_rng(rng)
    direction = rng.standard_normal(int(dim))
    direction /= np.linalg.norm(direction)
    radius = rng.gamma(shape=int(dim), scale=sens / eps)
    event = PureDpEvent(epsilon=eps + jac, mechanism="objective_perturbation", dim=int(dim))
    return radius * direction, event
