"""Exact-integer noise on a grid: the samplers and the Gaussian release, without the accounting.

Every mechanism of dpnet that adds Laplace or Gaussian noise releases ``(k + Y) g``: the value
rounded to a power-of-two grid g, plus integer noise Y drawn exactly (Canonne, Kamath & Steinke
2020), so the set of reachable outputs does not depend on the data (Mironov 2012). This module
imports numpy only: a machine that releases noisy values (the record-level mode of the main
job) need not import dp-accounting; :mod:`dpnet.privacy.mechanisms` pairs the releases with
their events.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dpnet.checks import check_rng, positive
from dpnet.errors import PrivacyError


def _finite_values(value: np.ndarray | float) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise PrivacyError("the value to privatise contains NaN or infinity")
    return arr


def on_grid(
    value: np.ndarray | float, sensitivity: float, grid: Callable[[float, int], float], name: str
) -> tuple[np.ndarray, int, float]:
    """(the finite values as an array, their count d >= 1, the grid step grid(sensitivity, d));
    PrivacyError on NaN or inf, or when the sensitivity is too small for a grid step."""
    arr = _finite_values(value)
    dim = max(arr.size, 1)
    return arr, dim, positive(f"grid step ({name} too small)", grid(sensitivity, dim))


GRID_FRACTION = 2.0**-10  # grid step <= l1_sensitivity * 2^-10 / dim
MAX_SCALE = 2.0**40  # largest noise scale in grid units: numpy's noise stays below 2^46
_EXACT_INT = 2.0**52  # |integers| <= 2^52 and sums of two of them are exact doubles
MIN_LAPLACE_SCALE = 1.0 / (52.0 * math.log(2.0))
"""Smallest discrete Laplace scale (grid units) whose draws can be non-zero: below it
a = exp(-1/scale) < 2^-52, the success probability q = 1 - a rounds to 1 - 2^-53 or to 1, and
numpy's geometric sampler (G > 1 iff a uniform double U <= 1 - 2^-53 exceeds q) always returns
1: the noise would be identically zero, a release without noise."""


def laplace_grid(l1_sensitivity: float, dim: int) -> float:
    """The power of two g <= l1_sensitivity * 2^-10 / dim on which Laplace outputs live."""
    return float(2.0 ** math.floor(math.log2(l1_sensitivity * GRID_FRACTION / dim)))


COUNT_GRID = laplace_grid(1.0, 1)  # a count's grid step (sensitivity 1, one coordinate): 2^-10
MAX_COUNT_EPSILON = 36_900.0
"""The largest epsilon of a noisy count (:func:`~dpnet.privacy.mechanisms.noisy_count`), to
three digits: its discrete Laplace scale (1 + 2^-10) / (epsilon 2^-10) grid steps is at least
:data:`MIN_LAPLACE_SCALE` up to epsilon = 1025 * 52 ln 2 = 36944.7 (the exact quotient rounds
to just below it); beyond, the count would go without noise."""


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


def gaussian_release(
    value: np.ndarray | float,
    *,
    l2_sensitivity: float,
    noise_multiplier: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """value + Gaussian noise of standard deviation ~ noise_multiplier * l2_sensitivity, on a
    grid: the Gaussian mechanism of multiplier ``noise_multiplier``, whose event,
    ``GaussianDpEvent(noise_multiplier)``, the caller records.

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
    arr, dim, g = on_grid(value, sens, gaussian_grid, "l2_sensitivity")
    delta_z = sens / g + math.sqrt(dim)
    scale = math.sqrt(((mult * delta_z) ** 2 + SMOOTHING**2) * (1.0 + 2.0**-40))
    if scale > MAX_SCALE:
        raise PrivacyError(f"noise scale {scale:.3g} grid steps is beyond exact integers")
    k = np.rint(np.clip(arr / g, -_EXACT_INT, _EXACT_INT))
    out = (k + discrete_gaussian(scale, arr.shape, rng)) * g
    return out
