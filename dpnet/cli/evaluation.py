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
  [0, 1]; the report gives it unclipped next to the clipped value;
- **held-out private rows under record-level privacy** (``--privacy record``): their features
  are private too, so the agreement count k = sum 1[pred_i = y~_i] (sensitivity 1 when one
  held-out record is replaced) is released with discrete Laplace noise of scale ~1/epsilon
  (:func:`dpnet.privacy.mechanisms.laplace_mechanism`, epsilon-DP, recorded in the ledger for
  the held-out rows); a~ = k~/n is then debiased as above, and the standard error adds the
  noise's variance, 2/(epsilon n)^2 before debiasing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

PUBLIC = "public test file"
RANDOMIZED = "randomized held-out labels"
AS_GIVEN = "held-out labels as given (not private)"
NOISY_COUNT = "held-out private rows, noisy agreement count"


@dataclass(frozen=True)
class EvaluationSet:
    """Rows to score the released model on: ``y`` are public or randomized labels."""

    X: np.ndarray
    y: np.ndarray
    source: str
    keep_prob: float = 1.0
    count_epsilon: float | None = None  # NOISY_COUNT: the agreement count's budget

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])


def predict_pm1(X: np.ndarray, coef: np.ndarray, intercept: float) -> np.ndarray:
    return np.where(X @ coef + intercept >= 0, 1.0, -1.0)


def accuracy_estimate(
    evaluation: EvaluationSet,
    coef: np.ndarray,
    intercept: float,
    rng: np.random.Generator | None = None,
) -> tuple[dict[str, Any], Any]:
    """(accuracy of the model on ``evaluation`` with its standard error, the event of its
    release or None); a NOISY_COUNT set needs ``rng``, a stream made for this draw alone
    (see module doc)."""
    n = evaluation.n_samples
    agree_count = float(
        np.count_nonzero(predict_pm1(evaluation.X, coef, intercept) == evaluation.y)
    )
    event, noise_var = None, 0.0
    if evaluation.source == NOISY_COUNT:
        from dpnet.privacy.mechanisms import noisy_count  # rank 0 only

        assert evaluation.count_epsilon is not None and rng is not None
        eps = evaluation.count_epsilon
        agree_count, event = noisy_count(int(agree_count), epsilon=eps, rng=rng)
        noise_var = 2.0 / (eps * n) ** 2
    agree = agree_count / n
    p = evaluation.keep_prob if evaluation.source != PUBLIC else 1.0
    scale = 2.0 * p - 1.0
    estimate = (agree - (1.0 - p)) / scale
    clipped = min(1.0, max(0.0, agree))
    method = {
        PUBLIC: "plain accuracy on public labels",
        RANDOMIZED: "agreement with randomized labels, debiased: (a - (1 - p)) / (2p - 1)",
        AS_GIVEN: "plain accuracy on the held-out labels (epsilon inf: none randomized)",
        NOISY_COUNT: "agreement count + discrete Laplace noise (epsilon-DP), then debiased: "
        "(a - (1 - p)) / (2p - 1)",
    }[evaluation.source]
    return {
        "estimate": min(1.0, max(0.0, estimate)),
        "unbiased_estimate": estimate,
        "standard_error": math.sqrt(clipped * (1.0 - clipped) / n + noise_var) / scale,
        "n": n,
        "source": evaluation.source,
        "method": method,
    }, event
