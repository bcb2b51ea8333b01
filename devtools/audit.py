"""Empirical privacy audits: a Monte Carlo lower bound on epsilon and an adversarial search
for the sensitivity of a pre-noise statistic.

Lower bound. If M is (eps, delta)-DP then for every event S and both orders of a neighbouring
pair, P[M(d1) in S] <= e^eps P[M(d0) in S] + delta, hence eps >= ln((P1(S) - delta) / P0(S)).
``audit_epsilon`` runs M n_trials times on each dataset, reduces each output to a scalar,
chooses the threshold event S = {stat > t} or {stat < t} (and the order of the pair) on one
half of the runs, and evaluates it on the other half with Clopper-Pearson bounds (lower on
P1, upper on P0, each at level (1 - confidence)/2). Because S is fixed before the second half
is seen, ``epsilon_lower`` is a valid lower bound with probability >= confidence
(Jagielski, Ullman & Oprea 2020; Nasr et al. 2021).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from dp_accounting import dp_event
from scipy import stats

from dpnet.errors import PrivacyError

_MAX_THRESHOLDS = 400


@dataclass(frozen=True)
class AuditResult:
    """Outcome of an audit: the lower bound and the test that produced it."""

    epsilon_lower: float
    threshold: float
    direction: str  # "greater" (S = {stat > t}) or "less" (S = {stat < t})
    numerator: str  # "d1" if the bound is ln(P_d1(S)/P_d0(S)), "d0" for the swapped pair
    p_numerator: float  # empirical rates on the evaluation half
    p_denominator: float
    n_trials: int
    confidence: float
    delta: float


def _scalar_outputs(
    mechanism: Callable[[Any, np.random.Generator], Any],
    data: Any,
    n_trials: int,
    rng: np.random.Generator,
    statistic: Callable[[Any], float] | None,
) -> np.ndarray:
    out = np.empty(n_trials)
    for k in range(n_trials):
        value = mechanism(data, rng)
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dp_event.DpEvent):
            value = value[0]
        if statistic is not None:
            out[k] = float(statistic(value))
        else:
            arr = np.ravel(np.asarray(value, dtype=float))
            if arr.size != 1:
                raise PrivacyError("audit of a vector output needs a scalar statistic")
            out[k] = arr[0]
    return out


def _cp_lower(k: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bound at level 1 - alpha."""
    k = np.asarray(k, dtype=float)
    return np.where(k > 0, stats.beta.ppf(alpha, np.maximum(k, 1), n - k + 1), 0.0)


def _cp_upper(k: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound at level 1 - alpha."""
    k = np.asarray(k, dtype=float)
    return np.where(k < n, stats.beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)), 1.0)


def _counts(sorted_stats: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(#stat > t, #stat < t) for each threshold t."""
    n = sorted_stats.size
    greater = n - np.searchsorted(sorted_stats, thresholds, side="right")
    less = np.searchsorted(sorted_stats, thresholds, side="left")
    return greater, less


def _bounds(
    s0: np.ndarray, s1: np.ndarray, thresholds: np.ndarray, alpha: float, delta: float
) -> np.ndarray:
    """Lower bounds on eps for every (threshold, direction, order): shape (4, n_thresholds)."""
    g0, l0 = _counts(np.sort(s0), thresholds)
    g1, l1 = _counts(np.sort(s1), thresholds)
    n0, n1 = s0.size, s1.size
    out = []
    for num, n_num, den, n_den in (
        (g1, n1, g0, n0),
        (l1, n1, l0, n0),
        (g0, n0, g1, n1),
        (l0, n0, l1, n1),
    ):
        lo = _cp_lower(num, n_num, alpha) - delta
        hi = _cp_upper(den, n_den, alpha)
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(np.where(lo > 0, np.log(np.maximum(lo, 1e-300) / hi), -np.inf))
    return np.array(out)


def audit_epsilon(
    mechanism: Callable[[Any, np.random.Generator], Any],
    d0: Any,
    d1: Any,
    *,
    n_trials: int,
    rng: np.random.Generator,
    confidence: float = 0.95,
    delta: float = 0.0,
    statistic: Callable[[Any], float] | None = None,
) -> AuditResult:
    """Lower bound on the epsilon of ``mechanism(data, rng)`` from the neighbours d0, d1.

    ``mechanism`` may return a value or a (value, DpEvent) pair; ``statistic`` maps the value
    to a scalar (default: the value itself, which must then be a scalar). Valid with
    probability >= confidence for an (eps, delta)-DP mechanism: P[epsilon_lower > eps] <=
    1 - confidence.
    """
    if int(n_trials) != n_trials or n_trials < 20:
        raise PrivacyError(f"n_trials must be an integer >= 20, got {n_trials}")
    if not 0.0 < confidence < 1.0:
        raise PrivacyError(f"confidence must lie in (0, 1), got {confidence}")
    if not 0.0 <= delta < 1.0:
        raise PrivacyError(f"delta must lie in [0, 1), got {delta}")
    s0 = _scalar_outputs(mechanism, d0, int(n_trials), rng, statistic)
    s1 = _scalar_outputs(mechanism, d1, int(n_trials), rng, statistic)
    half = int(n_trials) // 2
    alpha = (1.0 - confidence) / 2.0
    pooled = np.concatenate([s0[:half], s1[:half]])
    thresholds = np.unique(np.quantile(pooled, np.linspace(0, 1, _MAX_THRESHOLDS)))
    chosen = _bounds(s0[:half], s1[:half], thresholds, alpha, delta)
    row, col = np.unravel_index(int(np.argmax(chosen)), chosen.shape)
    t = thresholds[col : col + 1]
    e0, e1 = s0[half:], s1[half:]
    final = _bounds(e0, e1, t, alpha, delta)[row, 0]
    direction = "greater" if row in (0, 2) else "less"
    g0, l0 = _counts(np.sort(e0), t)
    g1, l1 = _counts(np.sort(e1), t)
    r0 = (g0 if direction == "greater" else l0)[0] / e0.size
    r1 = (g1 if direction == "greater" else l1)[0] / e1.size
    numerator = "d1" if row < 2 else "d0"
    return AuditResult(
        epsilon_lower=max(float(final), 0.0),
        threshold=float(t[0]),
        direction=direction,
        numerator=numerator,
        p_numerator=float(r1 if numerator == "d1" else r0),
        p_denominator=float(r0 if numerator == "d1" else r1),
        n_trials=int(n_trials),
        confidence=float(confidence),
        delta=float(delta),
    )


def _norm(diff: np.ndarray, norm: float | str) -> float:
    orders = {"l1": 1, "l2": 2, "linf": np.inf, 1: 1, 2: 2, np.inf: np.inf}
    if norm not in orders:
        raise PrivacyError(f"norm must be 1, 2, inf, 'l1', 'l2' or 'linf', got {norm!r}")
    return float(np.linalg.norm(np.ravel(diff), ord=orders[norm]))


def max_sensitivity(
    statistic: Callable[[Any], Any],
    neighbour_pairs: Iterable[tuple[Any, Any]],
    norm: float | str = 2,
) -> float:
    """max over the given neighbouring pairs of ||statistic(D) - statistic(D')||_norm.

    A lower bound on the true sensitivity: it must never exceed the stated one.
    """
    worst, seen = 0.0, 0
    for a, b in neighbour_pairs:
        diff = np.asarray(statistic(a), dtype=float) - np.asarray(statistic(b), dtype=float)
        worst = max(worst, _norm(diff, norm))
        seen += 1
    if seen == 0:
        raise PrivacyError("max_sensitivity needs at least one neighbouring pair")
    return worst


def extreme_rows(
    dim: int, row_bound: float, y_bound: float, rng: np.random.Generator, n_random: int = 20
) -> list[tuple[np.ndarray, float]]:
    """Adversarial candidate records: +-row_bound e_k and random points on the sphere of radius
    row_bound, each with y = +-y_bound and y = 0."""
    rows = [s * row_bound * np.eye(dim)[k] for k in range(dim) for s in (1.0, -1.0)]
    rand = rng.standard_normal((n_random, dim))
    rows += list(row_bound * rand / np.linalg.norm(rand, axis=1, keepdims=True))
    return [(x, y) for x in rows for y in (y_bound, -y_bound, 0.0)]


def replace_one_pairs(
    X: np.ndarray,
    y: np.ndarray,
    candidates: list[tuple[np.ndarray, float]],
    indices: Iterable[int] | None = None,
) -> Iterator[tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]]:
    """Pairs ((X, y), (X', y')) with row i replaced by each candidate (and by each other)."""
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    idx = range(X.shape[0]) if indices is None else indices
    for i in idx:
        for xa, ya in candidates:
            Xa, yaa = X.copy(), y.copy()
            Xa[i], yaa[i] = xa, ya
            yield (X, y), (Xa, yaa)
            for xb, yb in candidates:
                Xb, ybb = X.copy(), y.copy()
                Xb[i], ybb[i] = xb, yb
                yield (Xa, yaa), (Xb, ybb)


def add_remove_pairs(
    X: np.ndarray, y: np.ndarray, candidates: list[tuple[np.ndarray, float]]
) -> Iterator[tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]]:
    """Pairs (D, D + one candidate record) and (D, D minus row i)."""
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    for xa, ya in candidates:
        yield (X, y), (np.vstack([X, xa]), np.append(y, ya))
    for i in range(X.shape[0]):
        yield (X, y), (np.delete(X, i, axis=0), np.delete(y, i))
