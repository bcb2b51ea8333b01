"""Binary randomized response on labels: the keep probability of a budget and the flips.

No privacy accounting is imported here, nor scipy.special (its import costs ~0.2 s for two
scalar functions): every machine (MPI rank) randomizes its own labels with this module at
start-up, while the ledger (and dp-accounting, whose import alone costs ~0.6 s of CPU) is
needed on rank 0 only. The release's event is
:func:`dpnet.privacy.mechanisms.randomized_response_event`.
"""

from __future__ import annotations

import math

import numpy as np

from dpnet.checks import check_rng, positive
from dpnet.errors import PrivacyError

MAX_FINITE_EPSILON = 36.7
"""The largest label budget (to three digits) that still flips labels: from eps = 36.7368...
on, e^eps / (1 + e^eps) rounds to 1 in float64 and no label would ever be flipped."""


def keep_prob_from_epsilon(epsilon: float) -> float:
    """The keep probability of binary RR with budget epsilon: the double nearest below
    e^eps / (1 + e^eps) whose own budget ln(p / (1 - p)) does not exceed epsilon.

    Rounding to the nearest double can raise the budget: at eps = 30, 1 - p is 9.4e-14 and
    its rounding moves ln(p/(1-p)) by 1e-3 (30.001 > 30). p = 1 (eps past
    :data:`MAX_FINITE_EPSILON`) is refused.
    """
    eps = positive("epsilon", epsilon)
    p = 1.0 / (1.0 + math.exp(-eps))  # the logistic function of eps >= 0 (1 at inf)
    if p == 1.0:
        raise PrivacyError(
            f"epsilon {eps:g} is too large: the keep probability rounds to 1 "
            f"(no label would ever be flipped)"
        )
    # ln(p/(1-p)) in floating point: 1 - p is exact (Sterbenz), the division and the log add
    # at most ~2 ulp, i.e. < 4.5e-16 (1 + eps) in absolute terms: stay below eps by that much
    while p > 0.5 and epsilon_from_keep_prob(p) + 4.5e-16 * (1.0 + eps) > eps:
        p = math.nextafter(p, 0.0)
    return p


def epsilon_from_keep_prob(p: float) -> float:
    """epsilon = ln(p / (1 - p)) for keep probability p in (0.5, 1] (inf at p = 1)."""
    p = float(p)
    if not 0.5 < p <= 1.0:
        raise PrivacyError(f"keep_prob must lie in (0.5, 1], got {p}")
    if p == 1.0:
        return math.inf
    if p < 0.65:  # near 1/2 by log1p of the exact 2p - 1: log(p/(1-p)) loses digits there
        return math.log1p((2.0 * p - 1.0) / (1.0 - p))
    return math.log(p / (1.0 - p))


def flip_labels(labels: np.ndarray, *, keep_prob: float, rng: np.random.Generator) -> np.ndarray:
    """Binary randomized response on labels in {-1, +1}: each kept w.p. p, else flipped.

    Replacing one label changes the law of one output coordinate only, by the factor
    p / (1 - p): ln(p/(1-p))-label-DP under replacing one label (Warner 1965). Event:
    :func:`dpnet.privacy.mechanisms.randomized_response_event` (p).

    Sampler: a label is kept iff U < p, U = ``rng.random()`` uniform on 2^-53 {0, ..., 2^53 - 1}
    (numpy's next_double), so P(keep) = ceil(p 2^53) 2^-53 exactly. Every double in [0.5, 1]
    is a multiple of 2^-53, so this is p itself: no sampler slack beyond the assumption that
    the bit generator's output is uniform; 2(1 - p) is exact in floating point too.
    """
    epsilon_from_keep_prob(keep_prob)  # validates p
    check_rng(rng)
    y = np.asarray(labels)
    if y.ndim != 1 or not np.all((y == 1) | (y == -1)):
        raise PrivacyError("randomized_response needs a 1-d array of labels in {-1, +1}")
    flip = rng.random(y.shape[0]) >= keep_prob
    return np.where(flip, -y, y).astype(y.dtype, copy=False)
