r"""K-fold cross-validation of lambda carried out by the machines themselves (paper 3, §3.1).

Machine j splits its own n_j rows into K folds with a stream of its own
(:func:`dpnet.streams.machine_fold_stream`: not the randomized-response stream, never shared
with another machine) and keeps the assignment to itself. For every fold k and every lambda
of a grid, largest first, the decentralized ADMM (:func:`~dpnet.decentralized.admm.run_block`,
unchanged) minimises

    F_k(theta) = (1/n_{-k}) sum_{i not in fold k} l(y_i x~_i^T theta) + (lam/2) sum_g w_g ||beta_g||

(n_{-k} = n - n_k: the network's rows outside fold k), warm-started from the previous lambda's
iterates. Machine j scores its own Z_j on its fold-k rows: s_jk(lam) = sum_{i in fold k of j}
l(y_i x~_i^T Z_j), with the training loss l (logistic on the randomized labels, or the
flip-corrected loss). Three network sums with neighbour-only messages
(:func:`~dpnet.decentralized.block.network_sum`)
give every machine the same numbers: the fold sizes n_k (and the label counts for lambda_max),
the gradient at the intercept-only model (lambda_max), and S_k(lam) = sum_j s_jk(lam). Then,
as glmnet's cv.glmnet,

    L_k(lam) = S_k(lam) / n_k,   CV(lam) = sum_k n_k L_k / n,
    SE(lam)  = sqrt( sum_k n_k (L_k - CV)^2 / n / (K - 1) ),

lambda_min = the largest lambda minimising CV, lambda_1se = the largest lambda with
CV <= CV(lambda_min) + SE(lambda_min). Every machine computes them from bitwise identical sums,
so all take the same decision. Everything here is a function of features, public parameters
and the labels the machine was given (the randomized ones): post-processing, no privacy cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx
import numpy as np

from dpnet.decentralized.admm import (
    ADMMConfig,
    BlockResult,
    LoopState,
    initial_penalty,
    initial_state,
    run_block,
)
from dpnet.decentralized.block import Block
from dpnet.decentralized.stacked import StackedShards
from dpnet.decentralized.steps import GroupStructure, LocalData
from dpnet.errors import ConfigError, NetworkDataError
from dpnet.penalties.group import group_norms

CV_RULES = ("min", "1se")
INTERCEPT_BRACKET = 60.0  # |b| beyond this the intercept-only model has no useful minimiser


def assign_folds(n_rows: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Fold of each of the machine's rows: a random permutation dealt round-robin, so fold f
    has n_rows // k + (f < n_rows % k) rows (sizes are public: a function of n_rows and k)."""
    if not 2 <= k <= n_rows:
        raise ConfigError(f"K-fold cross-validation of {n_rows} rows needs 2 <= K <= {n_rows}")
    folds = np.empty(n_rows, dtype=np.int64)
    folds[rng.permutation(n_rows)] = np.arange(n_rows) % k
    return folds


def check_fold_counts(k: int, rows: Sequence[int]) -> None:
    """Every machine holds at least K rows (each fold needs a row on every machine); K >= 2 is
    RunConfig.validate's."""
    smallest = min(rows)
    if k > smallest:
        j = int(np.argmin(rows))
        raise ConfigError(
            f"--cv {k}: machine {j} holds only {smallest} rows; K may be at most the smallest "
            f"machine's row count ({smallest})"
        )


def check_grid(grid: Sequence[float]) -> np.ndarray:
    """A lambda grid as fitted (decreasing); ConfigError unless it has >= 2 finite positive
    values sorted one way or the other without repeats."""
    values = np.asarray(grid, dtype=float)
    if values.size < 2:
        raise ConfigError(f"--lam-grid needs at least 2 values, got {values.size}")
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise ConfigError(f"--lam-grid values must be finite and > 0, got {list(grid)}")
    if np.unique(values).size != values.size:
        raise ConfigError(f"--lam-grid has repeated values: {list(grid)}")
    steps = np.diff(values)
    if not ((steps > 0).all() or (steps < 0).all()):
        raise ConfigError(f"--lam-grid must be sorted (increasing or decreasing): {list(grid)}")
    return np.sort(values)[::-1]


def geometric_grid(lam_max: float, n_lambdas: int, ratio: float) -> np.ndarray:
    """glmnet's path: lam_max * ratio^(i / (L - 1)), i = 0..L-1 (decreasing)."""
    return lam_max * ratio ** (np.arange(n_lambdas) / (n_lambdas - 1))


def intercept_only(loss: Any, n_pos: float, n_neg: float) -> float:
    """argmin_b n_pos l(b) + n_neg l(-b): the intercept of the model with beta = 0 (a root of
    the increasing derivative); NetworkDataError if it does not lie within +-60."""

    def slope(b: float) -> float:
        d_pos, d_neg = loss.derivative(np.array([b, -b]))
        return float(n_pos * d_pos - n_neg * d_neg)

    from scipy.optimize import brentq  # here: every rank imports this module, few run CV

    lo, hi = -INTERCEPT_BRACKET, INTERCEPT_BRACKET
    if not (slope(lo) < 0 < slope(hi)):
        raise NetworkDataError(
            "cross-validation: the intercept-only model has no minimiser on these (randomized) "
            "labels, so lambda_max is undefined: give --lam-grid"
        )
    return float(brentq(slope, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps))


def intercept_gradient(data: LocalData, b_star: float) -> np.ndarray:
    """This machine's part of grad = (1/n) sum_i x_i y_i l'(y_i b*) (features only)."""
    X, y = data.X_aug[:, :-1], data.y
    return X.T @ (y * data.loss.derivative(y * b_star)) / data.n_total


def lambda_from_gradient(
    grad: np.ndarray, grp_ptr: np.ndarray, grp_indices: np.ndarray, weights: np.ndarray
) -> float:
    r"""The smallest lambda at which beta = 0 is optimal (on all n rows):

        lambda_max = max_{g: w_g > 0} 2 ||grad_g|| / w_g,  grad = (1/n) sum_i x_i y_i l'(y_i b*),

    b* the intercept-only minimiser (:func:`intercept_only`); NetworkDataError unless finite
    and positive."""
    norms = group_norms(grad, grp_ptr, grp_indices)
    penalised = weights > 0
    lam = float(np.max(2.0 * norms[penalised] / weights[penalised], initial=0.0))
    if not (0.0 < lam < math.inf):
        raise NetworkDataError(
            f"cross-validation: lambda_max = {lam:g} (no column correlates with the labels): "
            "give --lam-grid"
        )
    return lam


def lambda_max(
    block: Block,
    data: Sequence[LocalData],
    grp_ptr: np.ndarray,
    grp_indices: np.ndarray,
    weights: np.ndarray,
    label_counts: np.ndarray,
) -> float:
    """:func:`lambda_from_gradient` at b* from the network's label counts ``label_counts`` =
    (#{y = +1}, #{y = -1}); grad by one network sum of p floats over the block's shards
    ``data``."""
    b_star = intercept_only(data[0].loss, *label_counts)
    grad = block.network_sum(np.stack([intercept_gradient(d, b_star) for d in data]))
    return lambda_from_gradient(grad, grp_ptr, grp_indices, weights)


def fold_counts(folds: np.ndarray, k: int, y: np.ndarray) -> np.ndarray:
    """This machine's rows per fold and its label counts (#{y = +1}, #{y = -1}): K + 2 floats,
    summed over the network before the path."""
    return np.concatenate([np.bincount(folds, minlength=k), [np.sum(y > 0), np.sum(y < 0)]]).astype(
        float
    )


@dataclass(frozen=True)
class CVPath:
    """The lambdas cross-validation tries and how it picks one, and the one place of their
    defaults (the CLI takes its from here): ``grid`` (any sorted order; fitted decreasing), or
    None for ``n_lambdas`` values from lambda_max down to ``ratio`` * lambda_max (glmnet's
    path); ``rule`` one of CV_RULES."""

    grid: Sequence[float] | None = None
    n_lambdas: int = 10
    ratio: float = 0.01
    rule: str = "min"


DEFAULT_PATH = CVPath()


def path_grid(path: CVPath, lam_max: Callable[[], float]) -> tuple[np.ndarray, str]:
    """(the lambdas, decreasing; where they came from): ``path.grid`` checked, or the
    geometric path from ``lam_max()`` (called only then: it costs a network sum)."""
    if path.grid is not None:
        return check_grid(path.grid), "--lam-grid"
    top = lam_max()
    return (
        geometric_grid(top, path.n_lambdas, path.ratio),
        f"{path.n_lambdas} values from lambda_max = {top:.6g} down to {path.ratio:g} lambda_max",
    )


def fold_split(
    data: LocalData, folds: np.ndarray, fold: int, held_out_rows: float
) -> tuple[LocalData, np.ndarray, np.ndarray]:
    """(training data without fold ``fold``, n_total = n - n_k; validation design; labels)."""
    train, held = folds != fold, folds == fold
    train_data = LocalData(
        data.X_aug[train], data.y[train], int(round(data.n_total - held_out_rows)), data.loss
    )
    return train_data, data.X_aug[held], data.y[held]


def validation_score(data: LocalData, X_val: np.ndarray, y_val: np.ndarray, z: np.ndarray) -> float:
    """s_jk(lambda) = sum over the machine's fold-k rows of l(y x~^T Z_j)."""
    return float(data.loss.value(y_val * (X_val @ z)).sum())


def cv_curve(fold_losses: np.ndarray, fold_sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(CV, SE) per lambda from the (K, L) mean validation losses and the K fold sizes (see the
    module docstring; glmnet's weighted mean and standard error)."""
    w = fold_sizes[:, None] / fold_sizes.sum()
    mean = (w * fold_losses).sum(axis=0)
    k = fold_losses.shape[0]
    se = np.sqrt((w * (fold_losses - mean) ** 2).sum(axis=0) / (k - 1))
    return mean, se


def select(mean: np.ndarray, se: np.ndarray) -> tuple[int, int]:
    """(index of lambda_min, index of lambda_1se) on a decreasing grid: the first (largest
    lambda) minimiser of CV, and the first lambda with CV <= CV_min + SE_min. Non-finite CV
    values (a fit that ran away) are never chosen; NetworkDataError if every one is."""
    finite = np.isfinite(mean) & np.isfinite(se)
    if not finite.any():
        raise NetworkDataError("cross-validation: every lambda's validation loss is NaN or inf")
    i_min = int(np.argmin(np.where(finite, mean, np.inf)))
    bound = mean[i_min] + se[i_min]
    i_1se = int(np.flatnonzero(finite & (mean <= bound))[0])
    return i_min, i_1se


@dataclass(frozen=True)
class CVResult:
    """The network's cross-validation, identical on every machine but ``traffic`` (this
    machine's messages and communication time during the cross-validation)."""

    grid: np.ndarray  # (L,) decreasing: the order of the path
    fold_sizes: np.ndarray  # (K,) validation rows of each fold, network total
    fold_losses: np.ndarray  # (K, L) mean validation loss L_k(lambda)
    mean: np.ndarray
    se: np.ndarray
    index_min: int
    index_1se: int
    rule: str
    rounds: np.ndarray  # (K, L) ADMM rounds of each fit
    stop_reasons: tuple[tuple[str, ...], ...]  # (K, L)
    grid_source: str
    traffic: dict[str, float | int]

    @property
    def lambda_min(self) -> float:
        return float(self.grid[self.index_min])

    @property
    def lambda_1se(self) -> float:
        return float(self.grid[self.index_1se])

    @property
    def selected(self) -> float:
        """The lambda the final fit uses, by ``rule``."""
        return self.lambda_min if self.rule == "min" else self.lambda_1se


def _fit(
    block: Block,
    data: StackedShards,
    groups: GroupStructure,
    config: ADMMConfig,
    graph: nx.Graph,
    start: LoopState | None,
) -> tuple[BlockResult, LoopState | None]:
    """One ADMM run from ``start``; also the state of its second-to-last round (copied), to
    warm-start the next lambda (run_block shows every round's state but the stopping one's;
    None if it stopped in its first round)."""
    kept: list[LoopState | None] = [None]

    def keep(state: LoopState) -> None:
        # theta, z and theta_nbhd are new arrays every round; only the dual copies are
        # updated in place
        kept[0] = replace(state, v_out=state.v_out.copy(), v_in=state.v_in.copy())

    result = run_block(block, data, groups, config, graph, None, start_state=start, on_round=keep)
    return result, kept[0]


def _restart(state: LoopState | None, fresh: LoopState) -> LoopState | None:
    """A warm start: the iterates and dual copies of ``state`` in a new run's ``fresh`` state
    (round 0, the configured c: the previous run's adapted c slowed the next one down,
    e.g. 814 instead of 229 rounds in the tests' setting)."""
    if state is None:
        return None
    return replace(
        fresh,
        theta=state.theta,
        z=state.z,
        theta_nbhd=state.theta_nbhd,
        v_out=state.v_out,
        v_in=state.v_in,
    )


def cross_validate(
    block: Block,
    graph: nx.Graph,
    data: Sequence[LocalData],
    grp_ptr: np.ndarray,
    grp_indices: np.ndarray,
    weights: np.ndarray,
    folds: Sequence[np.ndarray],
    k: int,
    config: ADMMConfig,
    *,
    path: CVPath = DEFAULT_PATH,
    on_fold: Callable[[int, np.ndarray, tuple[str, ...]], None] | None = None,
) -> list[CVResult]:
    """K-fold CV of lambda on the block's machines, ``data[r]`` all the rows of its r-th
    (``n_total`` = n) with fold labels ``folds[r]`` in 0..k-1; see the module docstring.
    One result per block machine, the same but for ``traffic`` (its own, during the CV).

    ``path``: the lambdas and the selection rule (:class:`CVPath`). ``on_fold(k, rounds,
    reasons)`` after each fold's path. Every block of the network must call it with the same
    arguments but its own ``data`` and ``folds``.
    """
    for shard, fold in zip(data, folds, strict=True):
        check_cv_inputs(path.rule, fold, shard.y, k)
    before = block.traffic()
    counts = block.network_sum(
        np.stack([fold_counts(f, k, d.y) for f, d in zip(folds, data, strict=True)])
    )
    sizes = counts[:k]

    lams, source = path_grid(
        path, lambda: lambda_max(block, data, grp_ptr, grp_indices, weights, counts[k:])
    )
    fresh = initial_state(block, data[0].n_features + 1, initial_penalty(config, graph))
    n_machines = graph.number_of_nodes()
    scores = np.zeros((len(data), k, len(lams)))
    rounds = np.zeros((k, len(lams)), dtype=np.int64)
    reasons: list[tuple[str, ...]] = []
    for f in range(k):
        splits = [fold_split(d, fold, f, sizes[f]) for d, fold in zip(data, folds, strict=True)]
        train = StackedShards.stack([s[0] for s in splits])
        state: LoopState | None = None
        fold_reasons = []
        for i, lam in enumerate(lams):
            groups = GroupStructure(grp_ptr, grp_indices, lam * weights / (2.0 * n_machines))
            result, state = _fit(
                block, train, groups, replace(config, lam=float(lam)), graph, state
            )
            state = _restart(state, fresh)
            for r, (d, (_, X_val, y_val)) in enumerate(zip(data, splits, strict=True)):
                scores[r, f, i] = validation_score(d, X_val, y_val, result.z[r])
            rounds[f, i] = result.rounds
            fold_reasons.append(result.stop_reason)
        reasons.append(tuple(fold_reasons))
        if on_fold is not None:
            on_fold(f, rounds[f], reasons[-1])
    fold_losses = block.network_sum(scores) / sizes[:, None]
    after = block.traffic()
    return [
        cv_result(
            lams,
            sizes,
            fold_losses,
            path.rule,
            rounds,
            reasons,
            source,
            {key: end[key] - start[key] for key in end},
        )
        for start, end in zip(before, after, strict=True)
    ]


def check_cv_inputs(rule: str, folds: np.ndarray, y: np.ndarray, k: int) -> None:
    """ConfigError for an unknown rule or fold labels outside 0..k-1 (one per row)."""
    if rule not in CV_RULES:
        raise ConfigError(f"unknown cross-validation rule {rule!r}; choose from {CV_RULES}")
    if folds.shape != y.shape or folds.min(initial=0) < 0 or folds.max(initial=0) >= k:
        raise ConfigError(f"fold labels must lie in 0..{k - 1}, one per row")


def cv_result(
    lams: np.ndarray,
    sizes: np.ndarray,
    fold_losses: np.ndarray,
    rule: str,
    rounds: np.ndarray,
    reasons: list[tuple[str, ...]],
    source: str,
    traffic: dict[str, float | int],
) -> CVResult:
    """The CV curve, its selection and the path's record as one :class:`CVResult`."""
    mean, se = cv_curve(fold_losses, sizes)
    i_min, i_1se = select(mean, se)
    return CVResult(
        grid=lams,
        fold_sizes=sizes.astype(np.int64),
        fold_losses=fold_losses,
        mean=mean,
        se=se,
        index_min=i_min,
        index_1se=i_1se,
        rule=rule,
        rounds=rounds,
        stop_reasons=tuple(reasons),
        grid_source=source,
        traffic=traffic,
    )
