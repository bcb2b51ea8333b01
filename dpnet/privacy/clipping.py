"""Clipping to user-given, data-independent bounds (a bound computed from the data would
itself be a release and is refused: every function here takes the bound as an argument).

After clipping, a sum over rows changes by at most ``bound`` when one row is added or
removed, and by at most ``2 * bound`` when one row is replaced.
"""

from __future__ import annotations

import numpy as np

from dpnet.checks import positive
from dpnet.errors import DataError


def _bound(bound: float) -> float:
    return positive("clipping bound", bound)


def _matrix(x: np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 2:
        raise DataError(f"{name} must be a 2-d array, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise DataError(f"{name} contains NaN or infinity")
    return a


def clip_rows_l2(X: np.ndarray, bound: float) -> np.ndarray:
    """Rows scaled to L2 norm <= bound: x_i * min(1, bound / ||x_i||_2)."""
    b = _bound(bound)
    a = _matrix(X, "X")
    norms = np.linalg.norm(a, axis=1)
    scale = np.minimum(1.0, b / np.maximum(norms, np.finfo(float).tiny))
    return a * scale[:, None]


def clip_values(y: np.ndarray, bound: float) -> np.ndarray:
    """Values clipped to [-bound, bound]."""
    b = _bound(bound)
    a = np.asarray(y, dtype=float)
    if not np.all(np.isfinite(a)):
        raise DataError("values to clip contain NaN or infinity")
    return np.clip(a, -b, b)


def clip_per_example(grads: np.ndarray, bound: float) -> np.ndarray:
    """Per-example gradients (one per row) scaled to L2 norm <= bound (Abadi et al. 2016)."""
    return clip_rows_l2(_matrix(grads, "grads"), bound)


def check_row_norms(X: np.ndarray, bound: float, rtol: float = 1e-9) -> None:
    """DataError unless every row of X has L2 norm <= bound (up to rtol)."""
    b = _bound(bound)
    norms = np.linalg.norm(_matrix(X, "X"), axis=1)
    if norms.size and norms.max() > b * (1.0 + rtol):
        raise DataError(
            f"row norms must be <= {b} (data-independent bound), the largest is {norms.max():.6g}"
        )
