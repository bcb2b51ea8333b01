"""L1 penalty lam ||x||_1 and its proximal operator (soft-thresholding)."""

from __future__ import annotations

import numpy as np


def soft_threshold(x: np.ndarray, threshold: float | np.ndarray) -> np.ndarray:
    """prox of threshold*||.||_1: sign(x) max(|x| - threshold, 0)."""
    return np.sign(x) * np.maximum(np.abs(x) - threshold, 0.0)
