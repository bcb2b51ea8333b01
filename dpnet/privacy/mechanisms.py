"""Noise mechanisms. Each checks its parameters, draws from the given Generator and returns
``(released_value, event)``, the event describing exactly what was released.

Sensitivities are the caller's, under the caller's neighbouring relation: for a sum of terms
clipped to norm C the sensitivity is C under add/remove-one and 2C under replace-one.
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting import dp_event

from dpnet.checks import check_rng, positive
from dpnet.errors import PrivacyError
from dpnet.privacy.binary_rr import epsilon_from_keep_prob, flip_labels
from dpnet.privacy.discrete import (
    _EXACT_INT,
    MAX_COUNT_EPSILON,
    MAX_SCALE,
    MIN_LAPLACE_SCALE,
    discrete_laplace,
    gaussian_release,
    laplace_grid,
    on_grid,
)
from dpnet.privacy.events import PureDpEvent

ArrayOrFloat = np.ndarray | float


def _like_input(value: ArrayOrFloat, out: np.ndarray) -> ArrayOrFloat:
    return float(out) if np.ndim(value) == 0 else out


def laplace_mechanism(
    value: ArrayOrFloat, *, l1_sensitivity: float, epsilon: float, rng: np.random.Generator
) -> tuple[ArrayOrFloat, PureDpEvent]:
    """value + Laplace noise of scale ~ l1_sensitivity / epsilon per coordinate: epsilon-DP.

    Textbook floating-point Laplace sampling leaks through the set of floats it can reach
    (Mironov 2012). dpnet releases on a grid instead: with d = value.size, g =
    :func:`laplace_grid` (a power of two) and Delta' = l1_sensitivity + d g,

        k = rint(clip(value / g, +-2^52)),  out = (k + Y) g,  Y_j iid P(y) ~ exp(-|y| / t),
        t = Delta' / (epsilon g) <= 2^40 (PrivacyError otherwise).

    Below t = :data:`~dpnet.privacy.discrete.MIN_LAPLACE_SCALE` (epsilon > 36 Delta'/g)
    numpy's sampler never draws a non-zero value: the output would be k g, without noise, so
    such an epsilon is refused (PrivacyError; a count's bound in epsilon:
    :data:`~dpnet.privacy.discrete.MAX_COUNT_EPSILON`).

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
    arr, dim, g = on_grid(value, sens, laplace_grid, "l1_sensitivity")
    scale = (sens + dim * g) / (eps * g)
    if not scale <= MAX_SCALE:
        raise PrivacyError(
            f"noise scale {scale:.3g} grid steps is beyond exact integers "
            f"(epsilon {eps:.3g} too small)"
        )
    if not scale >= MIN_LAPLACE_SCALE:
        raise PrivacyError(
            f"noise scale {scale:.3g} grid steps draws no noise at all (epsilon {eps:.3g} too "
            f"large: at most {(sens + dim * g) / (g * MIN_LAPLACE_SCALE):.6g} here)"
        )
    k = np.rint(np.clip(arr / g, -_EXACT_INT, _EXACT_INT))
    out = (k + discrete_laplace(scale, arr.shape, rng)) * g
    event = PureDpEvent(epsilon=eps, mechanism="discrete_laplace", dim=dim)
    return _like_input(value, out), event


def noisy_count(
    count: int, *, epsilon: float, rng: np.random.Generator
) -> tuple[float, PureDpEvent]:
    """A count of records released epsilon-DP: :func:`laplace_mechanism` at L1 sensitivity 1
    (replacing one record changes a count of records meeting a condition by at most 1), noise
    of standard deviation about sqrt(2)/epsilon. PrivacyError above
    :data:`~dpnet.privacy.discrete.MAX_COUNT_EPSILON`, where the noise would be identically
    zero. Used by the command line's held-out accuracy and :mod:`dpnet.metrics`' scorer."""
    if not epsilon <= MAX_COUNT_EPSILON:
        raise PrivacyError(
            f"epsilon must be at most {MAX_COUNT_EPSILON:g} for a noisy count: beyond it the "
            f"noise is identically zero, got {epsilon}"
        )
    released, event = laplace_mechanism(float(count), l1_sensitivity=1.0, epsilon=epsilon, rng=rng)
    return float(released), event


def gaussian_mechanism(
    value: ArrayOrFloat,
    *,
    l2_sensitivity: float,
    noise_multiplier: float,
    rng: np.random.Generator,
) -> tuple[ArrayOrFloat, dp_event.GaussianDpEvent]:
    """:func:`~dpnet.privacy.discrete.gaussian_release` of ``value`` (its docstring has the
    grid, the sampler and the proof), accounted as ``GaussianDpEvent(noise_multiplier)``."""
    out = gaussian_release(
        value, l2_sensitivity=l2_sensitivity, noise_multiplier=noise_multiplier, rng=rng
    )
    return _like_input(value, out), dp_event.GaussianDpEvent(noise_multiplier=noise_multiplier)


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
    jac = positive("jacobian_log_bound", jacobian_log_bound, allow_zero=True)
    check_rng(rng)
    direction = rng.standard_normal(int(dim))
    direction /= np.linalg.norm(direction)
    radius = rng.gamma(shape=int(dim), scale=sens / eps)
    event = PureDpEvent(epsilon=eps + jac, mechanism="objective_perturbation", dim=int(dim))
    return radius * direction, event
