"""Audit (devtools.audit) of dpnet.metrics.PrivateAccuracyScorer: on two held-out sets that
differ in one record, the Monte Carlo lower bound on epsilon stays below the epsilon the scorer
charges, and exceeds it when the count gets half the noise it claims."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpnet.privacy.mechanisms as mechanisms
from devtools.audit import audit_epsilon
from dpnet.metrics import PrivateAccuracyScorer
from dpnet.privacy import BudgetAccountant

pytestmark = pytest.mark.slow  # statistical: 2 x 20,000 scores (about 2 s)

EPS = 1.0


class Threshold:
    def predict(self, X):
        return (np.asarray(X)[:, 0] > 0).astype(int)


X = np.array([[1.0], [-1.0]] * 5)
D0 = np.array([1, 0] * 5)  # every prediction right: k = 10
D1 = D0.copy()
D1[0] = 0  # one held-out label replaced: k = 9


@pytest.mark.parametrize("halved,caught", [(False, False), (True, True)])
def test_private_accuracy_audit(monkeypatch, halved, caught):
    if halved:  # the count gets the noise of 2 epsilon while 1 epsilon is charged
        honest = mechanisms.laplace_mechanism

        def half_noise(value, *, l1_sensitivity, epsilon, rng):
            return honest(value, l1_sensitivity=l1_sensitivity, epsilon=2 * epsilon, rng=rng)

        monkeypatch.setattr(mechanisms, "laplace_mechanism", half_noise)
    budget = BudgetAccountant(math.inf, math.inf)
    scorer = PrivateAccuracyScorer(EPS, accountant=budget, random_state=17)

    def mechanism(labels, rng):
        return scorer(Threshold(), X, labels)

    res = audit_epsilon(mechanism, D0, D1, n_trials=20_000, rng=np.random.default_rng(3))
    assert budget.spent[0] == pytest.approx(40_000 * EPS)  # every score was charged
    if caught:
        assert res.epsilon_lower > EPS
    else:
        assert 0.8 < res.epsilon_lower <= EPS  # valid and nearly tight
