"""Huber smoothing of the absolute value (Madsen & Nielsen 1993), paper 1 eq. (3).

    rho_g(t) = t^2 / (2 g)   if |t| <= g,        rho_g(t) = |t| - g/2   otherwise;
    rho_g'(t) = clip(t / g, -1, 1)  (|rho_g'| <= 1),
    rho_g''(t) = 1/g on |t| < g and 0 on |t| > g (undefined on |t| = g, a null set).

rho_g is C^1 with a 1/g-Lipschitz derivative and 0 <= |t| - rho_g(t) <= g/2.
"""

from __future__ import annotations

import numpy as np


def huber(t: np.ndarray, gamma: float) -> np.ndarray:
    """Elementwise rho_gamma(t)."""
    a = np.abs(t)
    return np.where(a <= gamma, 0.5 * t * t / gamma, a - 0.5 * gamma)


def huber_derivative(t: np.ndarray, gamma: float) -> np.ndarray:
    """Elementwise rho_gamma'(t) = clip(t / gamma, -1, 1)."""
    return np.clip(t / gamma, -1.0, 1.0)


def huber_curvature(t: np.ndarray, gamma: float) -> np.ndarray:
    """Elementwise rho_gamma''(t): 1/gamma inside the quadratic zone |t| <= gamma, else 0."""
    return np.where(np.abs(t) <= gamma, 1.0 / gamma, 0.0)
