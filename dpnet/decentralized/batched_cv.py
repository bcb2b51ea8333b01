"""K-fold cross-validation of lambda for all machines at once (the simulated backend).

The same procedure as :func:`dpnet.decentralized.cv.cross_validate` (its module docstring has
the math), built from the same pieces (fold counts, lambda_max, the path, the fold split, the
validation scores, the CV curve and its selection), with the machines as arrays: the network
sums are :func:`~dpnet.decentralized.batched.tree_sum` (bitwise the round loop's), the fits
:func:`~dpnet.decentralized.batched.run_batched`, warm-started along the path exactly as the
round loop is (the iterates of the last round that did not stop, c reset). Every exchange a
real network would carry is counted in :class:`ExchangeCount`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import networkx as nx
import numpy as np

from dpnet.decentralized.admm import ADMMConfig
from dpnet.decentralized.batched import (
    FLOAT_BYTES,
    EdgeIndex,
    StackedShards,
    WarmStart,
    run_batched,
    tree_sum,
)
from dpnet.decentralized.cv import (
    DEFAULT_PATH,
    CVPath,
    CVResult,
    check_cv_inputs,
    cv_result,
    fold_counts,
    fold_split,
    intercept_gradient,
    intercept_only,
    lambda_from_gradient,
    path_grid,
    validation_score,
)
from dpnet.decentralized.steps import GroupStructure, LocalData
from dpnet.decentralized.termination import MESSAGE_SIZE, tree_plan


@dataclass
class ExchangeCount:
    """Neighbour exchanges every machine made, and the floats each of its messages carried
    in total: machine j's traffic is ``traffic(d_j)`` (every machine exchanges buffers of the
    same sizes in the same exchanges)."""

    exchanges: int = 0
    floats: int = 0

    def add(self, exchanges: int, floats_each: int) -> None:
        self.exchanges += exchanges
        self.floats += exchanges * floats_each

    def add_rounds(self, rounds: int, dim: int) -> None:
        """``rounds`` ADMM rounds: Z (dim floats), then theta with the stop statistics."""
        self.add(rounds, dim)
        self.add(rounds, dim + MESSAGE_SIZE)

    def add_network_sum(self, graph_height: int, size: int) -> None:
        """One :func:`~dpnet.decentralized.cv.network_sum` of ``size`` floats."""
        self.add(2 * graph_height, 2 * size)

    def traffic(self, degree: int) -> dict[str, float | int]:
        """A machine's counters as the round loop's ``TrafficStats.as_dict`` (no time spent
        communicating: there is no network)."""
        return {
            "messages_sent": degree * self.exchanges,
            "bytes_sent": degree * FLOAT_BYTES * self.floats,
            "exchanges": self.exchanges,
            "comm_seconds": 0.0,
            "comm_cpu_seconds": 0.0,
        }


def cross_validate_batched(
    graph: nx.Graph,
    data: Sequence[LocalData],
    grp_ptr: np.ndarray,
    grp_indices: np.ndarray,
    weights: np.ndarray,
    folds: Sequence[np.ndarray],
    k: int,
    config: ADMMConfig,
    count: ExchangeCount,
    *,
    path: CVPath = DEFAULT_PATH,
    on_fold: Callable[[int, np.ndarray, tuple[str, ...]], None] | None = None,
) -> CVResult:
    """The network's CV (what every machine of ``cross_validate`` returns, but ``traffic``:
    here the CV's exchanges are added to ``count``); ``data[j]``, ``folds[j]`` machine j's."""
    n_mach = len(data)
    for shard, fold in zip(data, folds, strict=True):
        check_cv_inputs(path.rule, fold, shard.y, k)
    height = tree_plan(graph, 0).height
    counts = tree_sum(
        graph, np.stack([fold_counts(f, k, d.y) for f, d in zip(folds, data, strict=True)])
    )
    count.add_network_sum(height, k + 2)
    sizes = counts[:k]

    def lam_max() -> float:
        b_star = intercept_only(data[0].loss, *counts[k:])
        grad = tree_sum(graph, np.stack([intercept_gradient(d, b_star) for d in data]))
        count.add_network_sum(height, grad.size)
        return lambda_from_gradient(grad, grp_ptr, grp_indices, weights)

    lams, source = path_grid(path, lam_max)
    edges = EdgeIndex.from_graph(graph)
    dim = data[0].n_features + 1
    scores = np.zeros((n_mach, k, len(lams)))
    rounds = np.zeros((k, len(lams)), dtype=np.int64)
    reasons: list[tuple[str, ...]] = []
    for f in range(k):
        splits = [fold_split(d, fold, f, sizes[f]) for d, fold in zip(data, folds, strict=True)]
        train = StackedShards.stack([s[0] for s in splits])
        warm: WarmStart | None = None
        fold_reasons = []
        for i, lam in enumerate(lams):
            groups = GroupStructure(grp_ptr, grp_indices, lam * weights / (2.0 * n_mach))
            result = run_batched(
                train, groups, replace(config, lam=float(lam)), graph, start=warm, edges=edges
            )
            warm = result.warm_start
            count.add_rounds(result.rounds, dim)
            for j, (d, (_, X_val, y_val)) in enumerate(zip(data, splits, strict=True)):
                scores[j, f, i] = validation_score(d, X_val, y_val, result.z[j])
            rounds[f, i] = result.rounds
            fold_reasons.append(result.stop_reason)
        reasons.append(tuple(fold_reasons))
        if on_fold is not None:
            on_fold(f, rounds[f], reasons[-1])
    fold_losses = tree_sum(graph, scores) / sizes[:, None]
    count.add_network_sum(height, k * len(lams))
    return cv_result(lams, sizes, fold_losses, path.rule, rounds, reasons, source, {})
