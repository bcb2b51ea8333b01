"""Shared numerics of the Rényi-DP ADMM baselines (Chen & Lee, arXiv 1909.08180).

Every method minimises the L1-regularised empirical risk

    F(w) = (1/n) sum_i l(y_i s_i^T w) + lam ||w||_1,   y_i in {-1, +1},  ||s_i||_2 <= row_bound,

with l the logistic or the huberized hinge loss. The per-example gradient is
g_i(w) = y_i l'(y_i s_i^T w) s_i, and clip_C(g) = g min(1, C / ||g||). Because g_i is a scalar
multiple a_i s_i of the row, ||g_i|| = |a_i| ||s_i||, so clipped sums cost one matrix product.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpnet.errors import ConfigError, DataError
from dpnet.losses.huberized_hinge import huberized_hinge_dloss, huberized_hinge_loss
from dpnet.losses.logistic import logistic_dloss, logistic_loss
from dpnet.penalties.l1 import soft_threshold
from dpnet.privacy.mechanisms import gaussian_mechanism

LOSS_NAMES = ("logistic", "huberized_hinge")
SAMPLINGS = ("fixed", "poisson")


@dataclass(frozen=True)
class MarginLoss:
    """A loss of the margin m = y s^T w: value, derivative, and curvature bound c >= l''."""

    name: str
    value: Callable[[np.ndarray], np.ndarray]
    derivative: Callable[[np.ndarray], np.ndarray]
    curvature: float


def get_loss(name: str, huber_h: float = 0.5) -> MarginLoss:
    """The logistic loss (c = 1/4) or the huberized hinge of width h (c = 1/(2h))."""
    if name == "logistic":
        return MarginLoss("logistic", logistic_loss, logistic_dloss, 0.25)
    if name == "huberized_hinge":
        if not np.isfinite(huber_h) or huber_h <= 0:
            raise ConfigError(f"huber_h must be a positive number, got {huber_h}")
        return MarginLoss(
            "huberized_hinge",
            lambda m: huberized_hinge_loss(m, huber_h),
            lambda m: huberized_hinge_dloss(m, huber_h),
            1.0 / (2.0 * huber_h),
        )
    raise ConfigError(f"loss must be one of {LOSS_NAMES}, got {name!r}")


def check_features(X: ArrayLike, row_bound: float) -> np.ndarray:
    """Float matrix whose rows satisfy ||s_i|| <= row_bound (a user bound, never data-derived)."""
    A = np.asarray(X, dtype=float)
    if A.ndim != 2 or A.shape[0] < 1 or A.shape[1] < 1:
        raise DataError(f"X must be a non-empty 2-D array, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise DataError("X contains NaN or infinite values")
    worst = float(np.sqrt(np.max(np.einsum("ij,ij->i", A, A))))
    if worst > row_bound * (1.0 + 1e-9):
        raise DataError(
            f"a row of X has L2 norm {worst:.4g} > row_bound {row_bound:.4g}; "
            "scale rows by a data-independent bound or clip them first"
        )
    return A


def encode_labels(y: ArrayLike, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels in {-1, +1}, classes_); classes_[1] maps to +1.

    Labels within {-1, +1} or {0, 1} get those public classes even if one is absent (so
    classes_ reveals nothing about the data); other labels must form exactly two classes.
    """
    v = np.asarray(y)
    if v.ndim != 1 or v.shape[0] != n_rows:
        raise DataError(f"y must be 1-D with {n_rows} entries, got shape {v.shape}")
    classes = np.unique(v)
    for public in (np.array([-1, 1]), np.array([0, 1])):
        if np.isin(classes, public).all():
            return np.where(v == public[1], 1.0, -1.0), public.astype(v.dtype)
    if classes.size != 2:
        raise DataError(f"y must contain exactly two classes, found {classes.size}")
    return np.where(v == classes[1], 1.0, -1.0), classes


def objective(loss: MarginLoss, X: np.ndarray, ypm: np.ndarray, w: np.ndarray, lam: float) -> float:
    """F(w) = mean_i l(y_i s_i^T w) + lam ||w||_1."""
    return float(loss.value(ypm * (X @ w)).mean() + lam * np.abs(w).sum())


def clipped_gradient_sum(
    loss: MarginLoss, X: np.ndarray, ypm: np.ndarray, w: np.ndarray, clip: float
) -> np.ndarray:
    """sum_i clip_C(g_i(w)) over the rows given (per-example clipping to L2 norm C)."""
    a = ypm * loss.derivative(ypm * (X @ w))
    norms = np.abs(a) * np.sqrt(np.einsum("ij,ij->i", X, X))
    scale = np.minimum(1.0, clip / np.maximum(norms, np.finfo(float).tiny))
    return X.T @ (a * scale)


def linearised_x_update(
    x: np.ndarray, z: np.ndarray, y: np.ndarray, grad: np.ndarray, eta: float, rho: float
) -> np.ndarray:
    """argmin_u grad^T u + y^T (u - z) + (rho/2)||u - z||^2 + ||u - x||^2 / (2 eta)
    = (x/eta + rho z - y - grad) / (1/eta + rho)."""
    return (x / eta + rho * z - y - grad) / (1.0 / eta + rho)


def zy_update(
    x: np.ndarray, y: np.ndarray, rho: float, lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """z+ = S_{lam/rho}(x + y/rho) (argmin of lam||z||_1 - y^T z + (rho/2)||x - z||^2) and the
    dual step y+ = y + rho (x - z+)."""
    z = soft_threshold(x + y / rho, lam / rho)
    return z, y + rho * (x - z)


class BatchSampler:
    """Mini-batches for gradient perturbation; the sampling scheme fixes the neighbour relation.

    ``fixed``: a uniformly random subset of exactly m rows, drawn afresh (without replacement)
    at every step; replace-one relation, the clipped sum has L2 sensitivity 2C.
    ``poisson``: each row independently with probability q = m/n; add/remove relation,
    sensitivity C. The sum is always divided by the (public) m, never by the drawn size.
    """

    def __init__(self, sampling: str, n: int, batch_size: int, rng: np.random.Generator):
        if sampling not in SAMPLINGS:
            raise ConfigError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
        if not 1 <= batch_size <= n:
            raise ConfigError(f"batch_size must be in [1, n={n}], got {batch_size}")
        self.sampling, self.n, self.batch_size, self.rng = sampling, n, batch_size, rng

    @property
    def q(self) -> float:
        return self.batch_size / self.n

    @property
    def relation(self) -> str:
        return "replace_one" if self.sampling == "fixed" else "add_remove"

    def sensitivity(self, clip: float) -> float:
        """L2 sensitivity of the clipped batch sum under this sampler's relation."""
        return 2.0 * clip if self.sampling == "fixed" else clip

    def draw(self) -> np.ndarray:
        if self.sampling == "fixed":
            return self.rng.choice(self.n, size=self.batch_size, replace=False)
        return np.flatnonzero(self.rng.random(self.n) < self.q)


def check_positive(name: str, value: float, allow_zero: bool = False) -> float:
    """Reject non-finite and non-positive (or negative, with allow_zero) parameters."""
    v = float(value)
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name} must be a finite number {bound}, got {value}")
    return v


def check_int(name: str, value: int, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


class LinearClassifierMixin:
    """scikit-learn style plumbing: parameters live in ``__init__``; ``coef_`` after ``fit``."""

    coef_: np.ndarray
    classes_: np.ndarray

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> LinearClassifierMixin:
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ConfigError(f"{type(self).__name__} has no parameter {name!r}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise ConfigError(f"{type(self).__name__} is not fitted; call fit(X, y) first")

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """s^T w for each row (no intercept: add a constant column to the features)."""
        self._check_fitted()
        A = np.asarray(X, dtype=float)
        if A.ndim != 2 or A.shape[1] != self.coef_.shape[0]:
            raise DataError(f"X must have shape (n, {self.coef_.shape[0]}), got {A.shape}")
        return A @ self.coef_

    def predict(self, X: ArrayLike) -> np.ndarray:
        """classes_[1] where s^T w > 0, else classes_[0]."""
        positive = self.decision_function(X) > 0
        return self.classes_[positive.astype(int)]

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Mean accuracy."""
        return float(np.mean(self.predict(X) == np.asarray(y)))


def release(
    value: np.ndarray, l2_sensitivity: float, noise_multiplier: float, rng: np.random.Generator
) -> np.ndarray:
    """A Gaussian release through the privacy core (grid + discrete Gaussian); the value itself
    when the noise is off (noise_multiplier = 0, non-private runs)."""
    if noise_multiplier == 0:
        return value
    out, _ = gaussian_mechanism(
        value, l2_sensitivity=l2_sensitivity, noise_multiplier=noise_multiplier, rng=rng
    )
    return out
