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

from collections.abc import Callable
from dataclasses import replace
from functools import partial

import networkx as nx

from dpnet import streams
from dpnet.config import RunConfig
from dpnet.decentralized.admm import ProgressRecord
from dpnet.decentralized.all_machines import fit_private_shards, randomize_all
from dpnet.decentralized.batched_cv import ExchangeCount, cross_validate_batched
from dpnet.decentralized.boundary import PrivateShard, RawShard
from dpnet.decentralized.cv import CVResult, assign_folds
from dpnet.decentralized.machine import local_problem
from dpnet.job import JobOutcome, admm_config, cv_path
from dpnet.report import print_cv_fold


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
