"""Shared numerics of the Rényi-DP ADMM baselines (Chen & Lee, arXiv 1909.08180).

Every method minimises the L1-regularised empirical risk

    F(w) = (1/n) sum_i l(y_i s_i^T w) + lam ||w||_1,   y_i in {-1, +1},  ||s_i||_2 <= row_bound,

with l the logistic or the huberized hinge loss. The per-example gradient is
g_i(w) = y_i l'(y_i s_i^T w) s_i, and clip_C(g) = g min(1, C / ||g||). Because g_i is a scalar
multiple a_i s_i of the row, ||g_i|| = |a_i| ||s_i||, so clipped sums cost one matrix product.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit
from sklearn.base import ClassifierMixin
from sklearn.utils import Tags
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from dpnet.errors import ConfigError, DataError
from dpnet.losses.margin import HuberizedHinge, Logistic, MarginLoss
from dpnet.params import (
    FINITE_NON_NEGATIVE,
    FINITE_POSITIVE,
    OPEN_UNIT_INTERVAL,
    ConstrainedEstimator,
)
from dpnet.penalties.l1 import soft_threshold
from dpnet.privacy.budget import BudgetAccountant, charge
from dpnet.privacy.clipping import clip_rows_l2
from dpnet.privacy.leaks import WarnsOnRawScore
from dpnet.privacy.mechanisms import gaussian_mechanism

LOSS_NAMES = ("logistic", "huberized_hinge")
SAMPLINGS = ("fixed", "poisson")
PUBLIC_CLASSES = ((-1, 1), (0, 1))
# the defaults the five classifiers share (paper 2's settings)
DEFAULT_LAM = 1e-4
DEFAULT_HUBER_H = 0.5
DEFAULT_EPSILON = 1.0
DEFAULT_DELTA = 1e-8
DEFAULT_CLIP = 1.0
DEFAULT_ROW_BOUND = 1.0
"""Label pairs taken as public: y within one of them gets it as classes_ even if a class is
absent from the data, so classes_ reveals nothing about the rows."""


def get_loss(name: str, huber_h: float = DEFAULT_HUBER_H) -> MarginLoss:
    """The logistic loss (c = 1/4) or the huberized hinge of width h (c = 1/(2h))."""
    if name == "logistic":
        return Logistic()
    if name == "huberized_hinge":
        return HuberizedHinge(huber_h)
    raise ConfigError(f"loss must be one of {LOSS_NAMES}, got {name!r}")


def smoothness(loss: MarginLoss, row_bound: float) -> float:
    """L = c R^2: a bound on the curvature of one row's loss l(y s^T w) in w, for rows of norm
    <= R and l'' <= c (1/L is the default gradient step)."""
    return loss.curvature_bound * row_bound**2


def encode_labels(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(labels in {-1, +1}, classes_) of a validated 1-D ``y``; classes_[1] maps to +1.

    Labels within {-1, +1} or {0, 1} get those public classes even if one is absent
    (:data:`PUBLIC_CLASSES`); other labels must form exactly two classes (read from y).
    """
    kind = type_of_target(y, input_name="y")
    if kind in ("continuous", "continuous-multioutput", "unknown"):
        raise DataError(f"Unknown label type: {kind}; y must hold the labels of two classes")
    if kind != "binary":
        raise DataError(
            f"Only binary classification is supported. The type of the target is {kind}."
        )
    classes = np.unique(y)
    for public in PUBLIC_CLASSES:
        if np.isin(classes, public).all():
            return np.where(y == public[1], 1.0, -1.0), np.array(public, dtype=y.dtype)
    if classes.size != 2:
        raise DataError(
            f"y must hold two classes, got {classes.size} class(es); labels outside "
            "{-1, +1} and {0, 1} need both classes present"
        )
    return np.where(y == classes[1], 1.0, -1.0), classes


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


GAUSSIAN_NOISE_CONSTRAINTS: dict = {
    "noise_multiplier": [FINITE_NON_NEGATIVE, None],
    "clip": [FINITE_POSITIVE],
}
"""Parameter constraints of the four classifiers that release with Gaussian noise."""


def _logistic(estimator: DPLinearClassifier) -> bool:
    return estimator.loss == "logistic"


class DPLinearClassifier(WarnsOnRawScore, ClassifierMixin, ConstrainedEstimator):
    """Base of the five classifiers: a binary scikit-learn classifier with decision function
    s^T w (no intercept: add a constant column to the features).

    Subclasses store parameters in ``__init__``, extend ``_parameter_constraints`` (checked as
    ``fit`` starts, :mod:`dpnet.params`) and start ``fit`` with
    :meth:`_validate_training_data`: dense finite float64 X (sparse input is refused with
    scikit-learn's TypeError, NaN/inf with a DataError), ``n_features_in_``, ``classes_`` in the
    user's labels, and rows clipped to the public, data-independent row bound (as diffprivlib
    clips to its ``data_norm``). ``coef_`` marks a fitted model.
    """

    _parameter_constraints: dict = {
        "lam": [FINITE_NON_NEGATIVE],
        "loss": [StrOptions(set(LOSS_NAMES))],
        "huber_h": [FINITE_POSITIVE],
        "epsilon": [FINITE_POSITIVE, None],
        "delta": [OPEN_UNIT_INTERVAL],
        "row_bound": [FINITE_POSITIVE],
        # checked where they are used: privacy.budget.charge, streams.check_seed
        "accountant": "no_validation",
        "random_state": "no_validation",
    }

    coef_: np.ndarray
    classes_: np.ndarray
    loss: str
    epsilon: float | None
    accountant: BudgetAccountant | None
    privacy_: dict[str, Any]

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = False
        return tags

    def _validate(self, X: ArrayLike, y: ArrayLike | str = "no_validation", *, reset: bool) -> Any:
        """validate_data (dense, finite float64, n_features_in_); its ValueErrors as DataError."""
        try:
            return validate_data(self, X, y, reset=reset, dtype=np.float64)
        except ValueError as err:
            raise DataError(str(err)) from err

    def _validate_training_data(
        self, X: ArrayLike, y: ArrayLike, row_bound: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(rows clipped to ||s_i|| <= row_bound, labels in {-1, +1}); sets n_features_in_ and
        classes_. Clipping acts on each row alone, so the guarantee holds for the rows given
        (docs/privacy-rdp-admm.md); how many rows it changed is not reported (a function of
        the data)."""
        A, v = self._validate(X, y, reset=True)
        ypm, self.classes_ = encode_labels(v)
        return clip_rows_l2(A, row_bound), ypm

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """s^T coef_ for each row of X."""
        check_is_fitted(self, "coef_")
        return self._validate(X, reset=False) @ self.coef_

    def predict(self, X: ArrayLike) -> np.ndarray:
        """classes_[1] where s^T coef_ > 0, else classes_[0]."""
        positive = self.decision_function(X) > 0
        return self.classes_[positive.astype(int)]

    _private_score_remedy = (
        "use dpnet.metrics.PrivateAccuracyScorer(epsilon) to score them privately"
    )

    def _score_reads(self) -> str | None:
        """``score`` is scikit-learn's accuracy on the rows as given; with a finite
        ``epsilon`` it warns :class:`~dpnet.privacy.PrivacyLeakWarning` (the guarantee
        protects whole rows: :class:`~dpnet.privacy.leaks.WarnsOnRawScore`)."""
        return None if self.epsilon is None else "rows X and labels y"

    def _charge(self) -> None:
        """Charge this fit's guarantee (``privacy_``, known before the training loop) to the
        ``accountant`` parameter (:mod:`dpnet.privacy.budget`): BudgetExceeded, nothing fitted,
        if it would pass the cap."""
        privacy = self.privacy_
        charge(
            self.accountant,
            privacy["epsilon"],
            privacy["delta"],
            label=f"{type(self).__name__}.fit",
            relation=privacy["relation"],
        )

    @available_if(_logistic)
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """(n, 2): P(classes_[0] | s), P(classes_[1] | s) = 1 / (1 + exp(-s^T coef_)), the
        logistic model's (``loss="logistic"`` only: the huberized hinge has no probabilities)."""
        positive = expit(self.decision_function(X))
        return np.column_stack([1.0 - positive, positive])


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
    return cast(np.ndarray, out)  # a vector in, a vector out (a float only for a 0-d value)
