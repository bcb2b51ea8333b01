"""Scoring a private model on private held-out rows: :class:`PrivateAccuracyScorer`.

An estimator's ``score(X, y)``, and every scikit-learn scorer (``scoring="accuracy"``,
``"roc_auc"``, ...), compares the model's predictions with the held-out labels as given: a
function of raw labels (and, under record privacy, raw rows), released without noise. When
those rows are part of the private data (a cross-validation fold, a split of the training
set), the score, and what is chosen by it (GridSearchCV's ``best_params_``), is outside every
guarantee. :class:`PrivateAccuracyScorer` releases the accuracy with discrete Laplace noise on
the count of correct predictions, as the command line does for held-out private rows under
record privacy (``dpnet.cli.evaluation``), and charges its epsilon to an accountant.
docs/privacy.md, "Scoring and tuning the estimator privately", has the proof.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from dpnet import streams
from dpnet.checks import positive
from dpnet.data.labels import equal_labels
from dpnet.errors import PrivacyError
from dpnet.privacy.budget import (
    BudgetAccountant,
    PicklableLock,
    adopt_default,
    carry_default,
    charge,
)
from dpnet.privacy.discrete import COUNT_GRID, MAX_COUNT_EPSILON


def _paired(predictions: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Predictions and labels as two arrays of one shape (n,), n >= 1; ValueError otherwise."""
    predictions, y = np.asarray(predictions), np.asarray(y)
    if predictions.shape != y.shape or y.ndim != 1 or len(y) == 0:
        raise ValueError(
            f"PrivateAccuracyScorer needs one prediction per label (n >= 1): predict returned "
            f"shape {predictions.shape} for labels of shape {y.shape}"
        )
    return predictions, y


class PrivateAccuracyScorer(PicklableLock):
    """A scikit-learn scorer (``scoring=PrivateAccuracyScorer(epsilon)``, or called as
    ``scorer(estimator, X, y)``): the accuracy of ``estimator.predict(X)`` against ``y``
    released epsilon-DP under replacing one held-out record (its features and its label).

    A call charges ``(epsilon, 0)`` to ``accountant`` (None: the process-wide
    :func:`~dpnet.privacy.budget.default_accountant`), refused with ``BudgetExceeded``
    before ``y`` is read if that would pass the cap; then releases

        k~ = k + L,  k = #{i : predict(X)_i == y_i},  L ~ discrete Laplace, scale 1/epsilon

    (:func:`~dpnet.privacy.mechanisms.noisy_count`: the Laplace mechanism at L1 sensitivity
    1, noise of standard deviation about sqrt(2)/epsilon on the count) and returns k~ / n, unclipped
    (unbiased; it can leave [0, 1]). n = len(y) is public (replace-one keeps it).

    Sensitivity 1: the model is fixed (released by its own fit, on other rows), and
    ``predict`` maps each row to its prediction alone (every scikit-learn classifier's
    ``predict`` does, and a fitted Pipeline's when its transforms act row by row), so
    replacing one held-out record (x_i, y_i) changes one term of the count, by at most 1.
    Dividing by the public n is post-processing. The guarantee is the score's alone: the
    model's is its fit's, and the accountant adds both (basic composition).

    ``random_state``: None (default: fresh OS entropy every call) or an int (reproducible:
    call i of this object draws from child i of the seed; whoever knows the seed can remove
    the noise, and copies of the scorer in worker processes, ``n_jobs`` with joblib's loky
    backend, count their calls from the same number and repeat each other's noise: use None
    there). ``sample_weight`` is refused: a weight would scale one record's change of the count.
    """

    def __init__(
        self,
        epsilon: float,
        *,
        accountant: BudgetAccountant | None = None,
        random_state: int | None = None,
    ) -> None:
        self.epsilon = positive("epsilon", epsilon)
        if not self.epsilon <= MAX_COUNT_EPSILON:
            raise PrivacyError(
                f"epsilon must be at most {MAX_COUNT_EPSILON:g}: beyond it the count's "
                f"noise is identically zero, got {epsilon}"
            )
        self.accountant = accountant
        self.random_state = streams.check_seed(random_state, "random_state")
        self._calls = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PrivateAccuracyScorer(epsilon={self.epsilon:g})"

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for a worker process: with no ``accountant``, the caller's default
        accountant's spool goes along (:func:`~dpnet.privacy.budget.carry_default`)."""
        return carry_default(super().__getstate__(), self.accountant)

    def __setstate__(self, state: dict[str, Any]) -> None:
        adopt_default(state)
        super().__setstate__(state)

    def _stream(self) -> np.random.Generator:
        """A stream for this call's draw alone (dropped after it): OS entropy, or child
        ``call`` of the seed."""
        with self._lock:
            call, self._calls = self._calls, self._calls + 1
        if self.random_state is None:
            return np.random.default_rng()
        return np.random.default_rng(np.random.SeedSequence(self.random_state, spawn_key=(call,)))

    def __call__(self, estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
        from dpnet.privacy.mechanisms import noisy_count  # dp-accounting: on first use

        if sample_weight is not None:
            raise PrivacyError(
                "PrivateAccuracyScorer takes no sample_weight: a weight would scale one "
                "record's change of the count (its sensitivity is 1 for unweighted rows)"
            )
        predictions, y = _paired(estimator.predict(X), y)  # public: the shapes
        n = len(y)
        # the budget before the labels are compared (a refusal reads none of them)
        charge(self.accountant, self.epsilon, 0.0, label=type(self).__name__)
        released, _ = noisy_count(
            self.correct_count(predictions, y), epsilon=self.epsilon, rng=self._stream()
        )
        return released / n

    @staticmethod
    def correct_count(predictions: Any, y: Any) -> int:
        """k = #{i : predictions_i == y_i}, the count the scorer releases with noise: changing
        one pair (prediction_i, y_i) changes it by at most 1 (its L1 sensitivity)."""
        predictions, y = _paired(predictions, y)
        return int(np.count_nonzero(equal_labels(predictions, y)))

    @staticmethod
    def noise_std(epsilon: float, n: int) -> float:
        """The standard deviation of the returned accuracy's noise, about sqrt(2)/(epsilon n)
        (the discrete Laplace's, scale (1 + 2^-10)/epsilon on the count, at most 1 + 2^-10
        over the continuous one's)."""
        scale = (1.0 + COUNT_GRID) / (epsilon * COUNT_GRID)  # grid steps
        a = math.exp(-1.0 / scale)
        return math.sqrt(2.0 * a) / (1.0 - a) * COUNT_GRID / n
