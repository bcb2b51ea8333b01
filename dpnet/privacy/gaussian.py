r"""The Gaussian mechanism's exact privacy curve, its calibration and its composition over
rounds (scipy only: every machine of the record-level job computes its noise multiplier
without importing dp-accounting).

A Gaussian mechanism of noise multiplier s (noise std / L2 sensitivity) is mu-GDP with
mu = 1/s, and its exact (epsilon, delta) curve is
delta(epsilon) = Phi(mu/2 - epsilon/mu) - e^epsilon Phi(-mu/2 - epsilon/mu) (Balle & Wang 2018,
Thm 8; Dong, Roth & Su 2022, Cor. 2.13). T adaptively composed Gaussian mechanisms of
multiplier s are sqrt(T)/s-GDP (Dong, Roth & Su 2022, Cor. 3.3): their curve is that of one
Gaussian mechanism of multiplier s / sqrt(T), exactly.
"""

from __future__ import annotations

import math

from scipy import special

from dpnet.checks import positive
from dpnet.errors import PrivacyError


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
    from scipy.optimize import brentq  # here: every rank imports this module, few calibrate

    s = brentq(lambda v: _analytic_gaussian_delta(v, eps) - delta, lo, hi, xtol=1e-14, rtol=1e-14)
    return float(s) * sens


def composed_gaussian_multiplier(epsilon: float, delta: float, rounds: int) -> float:
    """Noise multiplier s of each of ``rounds`` adaptively composed Gaussian releases whose
    composition is exactly (epsilon, delta)-DP: s = sqrt(rounds) * gaussian_sigma(epsilon,
    delta, 1) (module docstring)."""
    if int(rounds) != rounds or rounds < 1:
        raise PrivacyError(f"rounds must be a positive integer, got {rounds}")
    return math.sqrt(rounds) * gaussian_sigma(epsilon, delta, 1.0)


def composed_gaussian_delta(noise_multiplier: float, rounds: int, epsilon: float) -> float:
    """Exact delta at ``epsilon`` of ``rounds`` composed Gaussian releases of multiplier
    ``noise_multiplier``."""
    s = positive("noise_multiplier", noise_multiplier) / math.sqrt(rounds)
    return max(_analytic_gaussian_delta(s, epsilon), 0.0)
