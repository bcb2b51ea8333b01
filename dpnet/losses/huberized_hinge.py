"""Huberized hinge loss (Chapelle 2007; Chaudhuri, Monteleoni, Sarwate 2011, eq. 7).

For a margin m = y z with labels y in {-1, +1} and smoothing width h > 0,

    l(m) = 0                     if m > 1 + h,
           (1 + h - m)^2 / (4h)  if |1 - m| <= h,
           1 - m                 if m < 1 - h,

    dl/dm = -clip((1 + h - m) / (2h), 0, 1),   0 <= d2l/dm2 <= 1/(2h).

l is convex and C^1, |dl/dm| <= 1, so with ||x||_2 <= 1 the per-example gradient in the weights
has norm <= 1, and its curvature bound is c = 1/(2h) (c = 1 for the paper's h = 0.5).
"""

from __future__ import annotations

import numpy as np

from dpnet.checks import positive
from dpnet.errors import ConfigError


def check_width(h: float) -> None:
    """Reject a width h that is not a finite positive number."""
    positive("huberized hinge width h", h, error=ConfigError)


def huberized_hinge_loss(margin: np.ndarray, h: float = 0.5) -> np.ndarray:
    """Elementwise huberized hinge loss of the margins m = y z."""
    check_width(h)
    m = np.asarray(margin, dtype=float)
    quad = (1.0 + h - m) ** 2 / (4.0 * h)
    return np.where(m > 1.0 + h, 0.0, np.where(m < 1.0 - h, 1.0 - m, quad))


def huberized_hinge_dloss(margin: np.ndarray, h: float = 0.5) -> np.ndarray:
    """Derivative in the margin: -clip((1 + h - m) / (2h), 0, 1)."""
    check_width(h)
    return -np.clip((1.0 + h - np.asarray(margin, dtype=float)) / (2.0 * h), 0.0, 1.0)


def huberized_hinge_d2loss(margin: np.ndarray, h: float = 0.5) -> np.ndarray:
    """Second derivative in the margin: 1/(2h) on |1 - m| <= h, else 0 (undefined at the two
    knots |1 - m| = h, a null set; the value there is the bound 1/(2h))."""
    check_width(h)
    return np.where(np.abs(1.0 - np.asarray(margin, dtype=float)) <= h, 1.0 / (2.0 * h), 0.0)


def huberized_hinge_objective(
    X: np.ndarray, y: np.ndarray, coef: np.ndarray, h: float = 0.5, scale: float | None = None
) -> float:
    """scale * sum_i l(y_i x_i^T coef), with scale = 1/n by default."""
    s = 1.0 / len(y) if scale is None else scale
    return float(s * huberized_hinge_loss(y * (X @ coef), h).sum())


def huberized_hinge_gradient(
    X: np.ndarray, y: np.ndarray, coef: np.ndarray, h: float = 0.5, scale: float | None = None
) -> np.ndarray:
    """Gradient of :func:`huberized_hinge_objective` in coef."""
    s = 1.0 / len(y) if scale is None else scale
    return X.T @ (s * y * huberized_hinge_dloss(y * (X @ coef), h))
