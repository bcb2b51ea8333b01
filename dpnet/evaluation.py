r"""Test accuracy that keeps the privacy promise.

Two sources, and the report says which:

- a **public test file** (``--test-data``, declared public by the user): the plain accuracy
  a = mean(1[pred_i = y_i]), standard error sqrt(a(1 - a)/n);
- **held-out private rows**, whose labels went through randomized response with keep
  probability p like every other private label. With agreement rate
  a~ = mean(1[pred_i = y~_i]) and E[a~] = p a + (1 - p)(1 - a), the unbiased estimate is

      a_hat = (a~ - (1 - p)) / (2p - 1),   SE(a_hat) = sqrt(a~(1 - a~)/n) / (2p - 1)

  (the flips are independent of the model, which was fitted on other rows). It is a function
  of the randomized labels only: post-processing, no extra privacy cost. a_hat can leave
  [0, 1]; the report gives it unclipped next to the clipped value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

PUBLIC = "public test file"
RANDOMIZED = "randomized held-out labels"


@dataclass(frozen=True)
class EvaluationSet:
    """Rows to score the released model on: ``y`` are public or randomized labels."""

    X: np.ndarray
    y: np.ndarray
    source: str
    keep_prob: float = 1.0

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])


def predict_pm1(X: np.ndarray, coef: np.ndarray, intercept: float) -> np.ndarray:
    return np.where(X @ coef + intercept >= 0, 1.0, -1.0)


def accuracy_estimate(
    evaluation: EvaluationSet, coef: np.ndarray, intercept: float
) -> dict[str, Any]:
    """Accuracy of the model on ``evaluation`` with its standard error (see module doc)."""
    n = evaluation.n_samples
    agree = float(np.mean(predict_pm1(evaluation.X, coef, intercept) == evaluation.y))
    p = evaluation.keep_prob if evaluation.source == RANDOMIZED else 1.0
    scale = 2.0 * p - 1.0
    estimate = (agree - (1.0 - p)) / scale
    return {
        "estimate": min(1.0, max(0.0, estimate)),
        "unbiased_estimate": estimate,
        "standard_error": math.sqrt(agree * (1.0 - agree) / n) / scale,
        "n": n,
        "source": evaluation.source,
        "method": "plain accuracy on public labels"
        if p == 1.0 and evaluation.source == PUBLIC
        else "agreement with randomized labels, debiased: (a - (1 - p)) / (2p - 1)",
    }
