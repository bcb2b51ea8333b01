"""Logistic loss for labels y in {-1, +1}.

    l(z, y) = log(1 + exp(-y z)),   dl/dz = -y sigma(-y z),   0 <= d2l/dz2 <= 1/4.

With ||x||_2 <= 1 the per-example gradient in the weights has norm <= 1.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit


def logistic_loss(margin: np.ndarray) -> np.ndarray:
    """Elementwise log(1 + exp(-m)) for margins m = y z, computed without overflow."""
    return np.logaddexp(0.0, -margin)


def logistic_dloss(margin: np.ndarray) -> np.ndarray:
    """Derivative of log(1 + exp(-m)) in m: -sigma(-m)."""
    return -expit(-margin)


def logistic_d2loss(margin: np.ndarray) -> np.ndarray:
    """Second derivative of log(1 + exp(-m)) in m: s (1 - s) with s = sigma(-m), in [0, 1/4]."""
    s = expit(-margin)
    return s * (1.0 - s)


def logistic_derivatives(margin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, s (1 - s)) with s = sigma(-m): minus the first and the second derivative, from one
    sigmoid (a Newton iteration needs both)."""
    s = expit(-margin)
    return s, s * (1.0 - s)
