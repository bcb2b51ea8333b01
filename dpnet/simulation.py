"""Step 4 of the main job for every machine at once: the simulated backend.

What :func:`dpnet.job.machine_main` does on one machine, done here for all J machines of one
process (:mod:`dpnet.decentralized.all_machines`): randomized response on machine j's labels
with its own stream, across the same release boundary; with ``--cv`` machine j's folds from
its own fold stream, then
:func:`~dpnet.decentralized.batched_cv.cross_validate_batched`; the ADMM rounds with the same
stop rule, the same rounds and iterates equal to rounding (tests/test_backends_agree.py).
Traffic is counted, not measured; times are simulated (``timing.per_machine`` says so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

import networkx as nx

from dpnet import streams
from dpnet.config import RunConfig
from dpnet.data.memory import check_bytes
from dpnet.decentralized.admm import ProgressRecord
from dpnet.decentralized.all_machines import fit_private_shards, randomize_all
from dpnet.decentralized.batched_cv import ExchangeCount, cross_validate_batched
from dpnet.decentralized.boundary import PrivateShard, RawShard
from dpnet.decentralized.cv import CVResult, assign_folds
from dpnet.decentralized.machine import local_problem
from dpnet.job import JobOutcome, admm_config, cv_path
from dpnet.report import print_cv_fold

ROW_VECTORS = 12
"""Float vectors per stacked row alive at once in the simulator's rounds (margins, weights,
labels, mask, loss values, ...): measured 10 to 10.5 at J = 5 and 20."""


def simulator_bytes(
    rows: Sequence[int], n_features: int, *, record: bool, cv: bool, shards_held: bool
) -> int:
    """Bytes the simulator allocates for machines of ``rows`` rows of ``n_features``: their raw
    shards (unless ``shards_held``: already allocated), every machine's rows with the intercept
    column X~ (n_j, p+1), their stack (J, n_max, p+1) padded to the largest shard, the Newton
    step's scaled copy of one machine's rows, and :data:`ROW_VECTORS` vectors per stacked row;
    under record privacy the rows clipped to --row-bound beside the raw ones; with --cv the
    folds' stacks and their vectors. Measured peaks of the synthetic job (p = 48, J = 5): 3.45,
    4.21 (record) and 4.88 (--cv 3) times n p 8 bytes, estimated 3.50, 4.50 and 5.02; at J = 20
    3.31, estimated 3.34."""
    dim = n_features + 1
    n, n_max = sum(rows), max(rows)
    stacked = len(rows) * n_max
    values = n * dim + stacked * dim + n_max * dim + ROW_VECTORS * stacked
    if not shards_held:
        values += n * n_features
    if record:
        values += n * n_features
    if cv:
        values += stacked * dim + 2 * ROW_VECTORS * stacked
    return 8 * values


def check_simulator_fits(
    config: RunConfig, rows: Sequence[int], n_features: int, *, shards_held: bool
) -> None:
    """DataError (exit 2) if the simulator's arrays (:func:`simulator_bytes`) exceed the
    available memory: one line with the size, before they are allocated."""
    size = simulator_bytes(
        rows,
        n_features,
        record=config.privacy == "record",
        cv=bool(config.cv),
        shards_held=shards_held,
    )
    what = f"--backend simulated: {len(rows)} machines' {sum(rows):,} rows x {n_features:,} columns"
    check_bytes(size, what + (" (beside the shards already loaded)" if shards_held else ""))


def simulate_machines(
    raws: list[RawShard],
    config: RunConfig,
    graph: nx.Graph,
    on_progress: Callable[[ProgressRecord], None] | None,
) -> list[JobOutcome]:
    """Every machine's outcome of the main job (module docstring)."""
    crossings = randomize_all(
        raws,
        config.keep_probability,
        config.seed,
        keep_oracle=config.oracle_output is not None,
        row_bound=config.row_bound,
    )
    admm = admm_config(config, crossings[0][0].columns)
    cv, cv_traffic = None, []
    if config.cv:
        count = ExchangeCount()
        cv = _cross_validation(
            [c[0] for c in crossings], config, graph, count, on_progress is not None
        )
        cv_traffic = [count.traffic(graph.degree(j)) for j in range(len(crossings))]
        admm = replace(admm, lam=cv.selected)
    outcomes = fit_private_shards(
        crossings,
        keep_prob=config.keep_probability,
        loss=config.loss,
        admm=admm,
        graph=graph,
        on_progress=on_progress,
    )
    return [
        JobOutcome(o.release, o.oracle, None if cv is None else replace(cv, traffic=cv_traffic[j]))
        for j, o in enumerate(outcomes)
    ]


def _cross_validation(
    shards: list[PrivateShard],
    config: RunConfig,
    graph: nx.Graph,
    count: ExchangeCount,
    verbose: bool,
) -> CVResult:
    """``--cv K``: the network's CVResult (its exchanges added to ``count``)."""
    assert config.cv is not None  # called with --cv K only
    admm = admm_config(config, shards[0].columns)
    problems = [
        local_problem(
            s,
            lam=admm.lam,
            loss=config.loss,
            keep_prob=config.keep_probability,
            n_machines=len(shards),
        )
        for s in shards
    ]
    folds = [
        assign_folds(len(s.y), config.cv, streams.machine_fold_stream(config.seed, j))
        for j, s in enumerate(shards)
    ]
    groups = problems[0][1]
    on_fold = partial(print_cv_fold, config.cv) if verbose else None
    return cross_validate_batched(
        graph,
        [p[0] for p in problems],
        groups.grp_ptr,
        groups.grp_indices,
        shards[0].group_weights,
        folds,
        config.cv,
        admm,
        count,
        path=cv_path(config),
        on_fold=on_fold,
    )
