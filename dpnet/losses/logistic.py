"""Logistic loss for labels y in {-1, +1}.

    l(z, y) = log(1 + exp(-y z)),   dl/dz = -y sigma(-y z),   0 <= d2l/dz2 <= 1/4.

With ||x||_2 <= 1 the per-example gradient in the weights has norm <= 1.

Every function of the margin m = y z is computed from e = exp(-|m|) in (0, 1], which neither
overflows nor loses the tail: l(m) = log1p(e) + max(-m, 0), sigma(-m) = e / (1 + e) for m >= 0
and 1 / (1 + e) for m < 0, l''(m) = e / (1 + e)^2. One exponential serves the value and both
derivatives, and each is computed by the same operations wherever it is asked for (a value
and its derivative together, or either alone), so they agree bit for bit.
"""

from __future__ import annotations

import numpy as np


def _tail(margin: np.ndarray) -> np.ndarray:
    """e = exp(-|m|)."""
    return np.exp(-np.abs(margin))


def _value(margin: np.ndarray, e: np.ndarray) -> np.ndarray:
    return np.log1p(e) + np.maximum(-margin, 0.0)


def _sigmoid_of_minus(margin: np.ndarray, e: np.ndarray) -> np.ndarray:
    return np.where(margin >= 0.0, e, 1.0) / (1.0 + e)


def _curvature(e: np.ndarray) -> np.ndarray:
    return e / (1.0 + e) ** 2


def logistic_loss(margin: np.ndarray) -> np.ndarray:
    """Elementwise log(1 + exp(-m)) for margins m = y z, computed without overflow."""
    return _value(margin, _tail(margin))


def logistic_dloss(margin: np.ndarray) -> np.ndarray:
    """Derivative of log(1 + exp(-m)) in m: -sigma(-m)."""
    return -_sigmoid_of_minus(margin, _tail(margin))


def logistic_d2loss(margin: np.ndarray) -> np.ndarray:
    """Second derivative of log(1 + exp(-m)) in m: sigma(m) sigma(-m) = e / (1 + e)^2, in
    [0, 1/4]."""
    return _curvature(_tail(margin))


def logistic_derivatives(margin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, l'') with s = sigma(-m): minus the first and the second derivative, from one
    exponential (a Newton iteration needs both)."""
    e = _tail(margin)
    return _sigmoid_of_minus(margin, e), _curvature(e)


def logistic_loss_and_sigmoid(margin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(l(m), s = sigma(-m)) from one exponential: a line search's accepted point needs its
    value and, next, its gradient."""
    e = _tail(margin)
    return _value(margin, e), _sigmoid_of_minus(margin, e)
