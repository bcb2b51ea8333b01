"""The strongest observer of one machine's messages under --privacy record, shared by
tests/test_record_privacy.py and benchmarks/record_pairwise_audit.py: it knows the inputs of
the machine's theta steps (their centres and penalties, functions of released messages) and
both candidate shards, and sums the Gaussian log-likelihood ratio of the released thetas."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from dpnet.decentralized import NewtonThetaStep, StackedShards
from dpnet.decentralized.theta import NO_ANCHORS


def exact_theta(data: StackedShards, center: np.ndarray, rho: float) -> np.ndarray:
    """The exact theta step of a block of one, from ``center`` to a gradient norm of 1e-14:
    argmin f(theta) + (rho/2) ||theta - center||^2 (a fresh Newton step: no kept matrix)."""
    step = NewtonThetaStep(data, center[None], NO_ANCHORS, NO_ANCHORS)
    return step(center[None], np.array([rho]), center[None], tol=1e-14).theta[0]


def theta_likelihood_ratio(
    observed: Iterable[tuple[np.ndarray, float, np.ndarray]],
    candidates: tuple[StackedShards, StackedShards],
    std_at: Callable[[float], float],
) -> float:
    """sum over rounds of [||theta~ - theta_0||^2 - ||theta~ - theta_1||^2] / (2 std^2), for
    ``observed`` rows (centre, rho, released theta~), theta_b the exact theta step of
    candidate b at that centre and rho, std = ``std_at(rho)``: log P(view | D') / P(view | D)."""
    total = 0.0
    for center, rho, released in observed:
        exact = [exact_theta(c, center, rho) for c in candidates]
        gap = np.sum((released - exact[0]) ** 2) - np.sum((released - exact[1]) ** 2)
        total += gap / (2 * std_at(rho) ** 2)
    return total
