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


def logistic_objective(
    X: np.ndarray,
    y: np.ndarray,
    coef: np.ndarray,
    intercept: float = 0.0,
    scale: float | None = None,
) -> float:
    """sum_i log(1 + exp(-y_i (x_i^T coef + b))) * scale, with scale = 1/n by default."""
    margin = y * (X @ coef + intercept)
    s = 1.0 / len(y) if scale is None else scale
    return float(s * logistic_loss(margin).sum())


def logistic_gradient(
    X: np.ndarray,
    y: np.ndarray,
    coef: np.ndarray,
    intercept: float = 0.0,
    scale: float | None = None,
) -> tuple[np.ndarray, float]:
    """Gradient of :func:`logistic_objective` in (coef, intercept)."""
    margin = y * (X @ coef + intercept)
    s = 1.0 / len(y) if scale is None else scale
    w = s * y * logistic_dloss(margin)
    return X.T @ w, float(w.sum())


def logistic_per_example_gradients(X: np.ndarray, y: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """Rows are grad_w l(x_i^T w, y_i) = -y_i sigma(-y_i x_i^T w) x_i, shape (n, p)."""
    margin = y * (X @ coef)
    return (y * logistic_dloss(margin))[:, None] * X
