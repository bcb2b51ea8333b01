"""Gaps to the centralized optimum F* (skglm's, devtools/reference.py): the rounds a run takes
to a relative gap, and the simulator run until it is reached. Shared by the benchmarks and
the tests that rerun their experiments."""

from __future__ import annotations

from typing import Any

import numpy as np


def reference_value(X: np.ndarray, y: np.ndarray, groups: np.ndarray, lam: float) -> float:
    """F* = F(theta*) with theta* from skglm's GroupProxNewton (devtools/reference.py)."""
    # imported here: skglm takes seconds to import, and the median and RDP-ADMM benchmarks
    # use this module without it
    from devtools.reference import group_logistic_objective, group_logistic_optimum

    theta = group_logistic_optimum(X, y, groups, lam)
    return group_logistic_objective(X, y, groups, lam, theta)


def relative_gaps(history: list[dict[str, Any]], f_star: float) -> tuple[np.ndarray, np.ndarray]:
    """Rounds and |F_t - F*| / |F*| of a results file's history."""
    rounds = np.array([h["round"] for h in history], dtype=int)
    values = np.array([h["objective"] for h in history], dtype=float)
    return rounds, np.abs(values - f_star) / abs(f_star)


def first_round_within(rounds: np.ndarray, gaps: np.ndarray, rel: float) -> int | None:
    """First of ``rounds`` from which ``gaps`` stay <= ``rel`` to the end (None if the last
    gap is above ``rel``, or NaN, or there are no rounds)."""
    above = np.flatnonzero(~(np.asarray(gaps) <= rel))
    if len(rounds) == 0 or (len(above) and above[-1] == len(rounds) - 1):
        return None
    return int(rounds[above[-1] + 1]) if len(above) else int(rounds[0])


def rounds_to_gap(history: list[dict[str, Any]], f_star: float, rel: float) -> int | None:
    """First round from which the relative gap stays <= ``rel`` for the rest of a results
    file's history (None if it never does)."""
    return first_round_within(*relative_gaps(history, f_star), rel)


STOP_GAP = 1e-8
"""A simulated run to the optimum ends once its objective is this close to F* (relative)."""


def batched_to_optimum(shards: Any, groups: Any, config: Any, graph: Any, f_star: float) -> Any:
    """``run_batched`` until the network objective is within :data:`STOP_GAP` of ``f_star``
    (or the config's own stop); the :class:`~dpnet.decentralized.batched.BatchedResult`."""
    from dpnet.decentralized.batched import run_batched

    return run_batched(
        shards,
        groups,
        config,
        graph,
        stop_when=lambda r: abs(r.objective - f_star) <= STOP_GAP * abs(f_star),
    )


def batched_gaps(result: Any, f_star: float) -> tuple[np.ndarray, np.ndarray]:
    """(rounds, relative gaps |F_t - F*| / F*) of a batched run's history."""
    rounds = np.array([h.round for h in result.history])
    objective = np.array([h.objective for h in result.history])
    return rounds, np.abs(objective - f_star) / abs(f_star)
