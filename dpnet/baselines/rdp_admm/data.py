"""The synthetic feature-selection design of Chen & Lee (Sec. 5) and the coverage metric xi_k.

Features s ~ N(0, Sigma), Sigma_ij = 0.5^|i-j| (p = 100); true model x_{1:10} = (0.5, 1, ..., 5),
x_{11:20} = -x_{1:10}, x_{21:100} = 0; labels P(l = +1) = sigma(x^T s + iota), iota ~ N(0, 1)
per row. The design matrix is [s, 1] (intercept last) mapped to the unit ball by a
data-independent radius: s is shrunk to norm <= radius (rarely active for radius 15, since
E||s||^2 = 100) and the row [s, 1] is divided by sqrt(radius^2 + 1).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from dpnet.checks import positive
from dpnet.errors import ConfigError

N_FEATURES = 100
N_RELEVANT = 20


def true_model(n_features: int = N_FEATURES) -> np.ndarray:
    """x* of the paper: 0.5..5 on features 1-10, their negatives on 11-20, zero elsewhere."""
    if n_features < N_RELEVANT:
        raise ConfigError(f"n_features must be >= {N_RELEVANT}, got {n_features}")
    x = np.zeros(n_features)
    x[:10] = 0.5 * np.arange(1, 11)
    x[10:20] = -x[:10]
    return x


def make_synthetic(
    n_samples: int, *, rng: np.random.Generator, radius: float = 15.0, n_features: int = N_FEATURES
) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): X of shape (n, p + 1) with rows in the unit ball (intercept last), y in {-1, +1}."""
    if n_samples < 1:
        raise ConfigError(f"n_samples must be >= 1, got {n_samples}")
    positive("radius", radius, error=ConfigError)
    # AR(1) with coefficient 0.5 and unit marginal variance has covariance 0.5^|i-j|.
    e = rng.standard_normal((n_samples, n_features))
    s = np.empty_like(e)
    s[:, 0] = e[:, 0]
    for j in range(1, n_features):
        s[:, j] = 0.5 * s[:, j - 1] + np.sqrt(0.75) * e[:, j]
    prob = expit(s @ true_model(n_features) + rng.standard_normal(n_samples))
    y = np.where(rng.random(n_samples) < prob, 1.0, -1.0)
    s *= np.minimum(1.0, radius / np.maximum(np.linalg.norm(s, axis=1), 1e-300))[:, None]
    X = np.hstack([s, np.ones((n_samples, 1))]) / np.sqrt(radius**2 + 1.0)
    return np.ascontiguousarray(X), y


def coverage(
    coef: np.ndarray, k: int, n_relevant: int = N_RELEVANT, n_features: int = N_FEATURES
) -> float:
    """xi_k: share of the relevant features among the k largest |coef_j| (intercept excluded)."""
    if not 1 <= k <= n_features:
        raise ConfigError(f"k must be in [1, {n_features}], got {k}")
    top = np.argsort(-np.abs(np.asarray(coef)[:n_features]), kind="stable")[:k]
    return float(np.count_nonzero(top < n_relevant) / n_relevant)
