"""Step 4 of the main job for every machine at once: the simulated backend.

What :func:`dpnet.job.machine_main` does on one machine, done here for all J machines of one
process, with the machines' arrays stacked (:mod:`dpnet.decentralized.batched`):

- randomized response on machine j's labels with its own stream
  (:func:`dpnet.streams.machine_flip_stream`, created for that machine's draw and dropped
  with it), across the same release boundary (:func:`dpnet.decentralized.boundary.cross_boundary`);
- with ``--cv`` machine j's folds from its own fold stream, then
  :func:`~dpnet.decentralized.batched_cv.cross_validate_batched`;
- the ADMM rounds (:func:`~dpnet.decentralized.batched.run_batched`): same stop rule, same
  rounds, iterates equal to rounding (tests/test_backends_agree.py).

Each machine's outcome has the fields a machine of the round loop sends rank 0. Its traffic
is counted, not measured: the messages and bytes a real network would carry, no time in
communication. Its times are simulated: the simulator's time divided by J (a machine's share
of one process doing every machine's work), as the results file says
(``timing.per_machine``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import networkx as nx

from dpnet import streams
from dpnet.config import RunConfig
from dpnet.decentralized import boundary
from dpnet.decentralized.admm import MachineResult, ProgressRecord
from dpnet.decentralized.batched import run_batched
from dpnet.decentralized.batched_cv import ExchangeCount, cross_validate_batched
from dpnet.decentralized.boundary import LabelOracle, PrivateShard, RawShard
from dpnet.decentralized.cv import CVResult, assign_folds
from dpnet.decentralized.machine import MachineRelease, local_problem, machine_oracle
from dpnet.decentralized.steps import local_objective
from dpnet.job import JobOutcome, admm_config
from dpnet.report import print_cv_fold


def simulate_machines(
    raws: list[RawShard],
    config: RunConfig,
    graph: nx.Graph,
    on_progress: Callable[[ProgressRecord], None] | None,
) -> list[JobOutcome]:
    """Every machine's outcome of the main job (module docstring)."""
    crossings = [_randomize(raw, config, j) for j, raw in enumerate(raws)]
    shards = [c[0] for c in crossings]
    admm = admm_config(config)
    cv, cv_traffic = None, []
    count = ExchangeCount()
    if config.cv:
        cv = _cross_validation(shards, config, graph, count, on_progress is not None)
        cv_traffic = [count.traffic(graph.degree(j)) for j in range(len(shards))]
        admm = replace(admm, lam=cv.selected)
        count = ExchangeCount()  # the final fit's counters start at zero, as without --cv
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
    started, cpu_started = time.perf_counter(), time.process_time()
    fit = run_batched([p[0] for p in problems], problems[0][1], admm, graph, on_progress)
    count.add_rounds(fit.rounds, problems[0][0].n_features + 1)
    share = 1.0 / len(shards)
    seconds, cpu_seconds = fit.seconds * share, (time.process_time() - cpu_started) * share
    outcomes = []
    for j, ((data, _), (_, label_oracle)) in enumerate(zip(problems, crossings, strict=True)):
        result = MachineResult(
            rank=j,
            theta=fit.theta[j],
            z=fit.z[j],
            rounds=fit.rounds,
            stop_reason=fit.stop_reason,
            local_objective=local_objective(data, fit.theta[j]),
            n_rows=len(data.y),
            traffic=count.traffic(graph.degree(j)),
            total_seconds=seconds,
            compute_seconds=seconds,
            compute_cpu_seconds=cpu_seconds,
            started_at=started,
            history=fit.history,
        )
        oracle = None if label_oracle is None else machine_oracle(label_oracle, data, result)
        part = None if cv is None else replace(cv, traffic=cv_traffic[j])
        outcomes.append(JobOutcome(MachineRelease(result, config.keep_probability), oracle, part))
    return outcomes


def _randomize(
    raw: RawShard, config: RunConfig, rank: int
) -> tuple[PrivateShard, LabelOracle | None]:
    """Machine ``rank``'s crossing of the release boundary, with its own stream."""
    flips = streams.machine_flip_stream(config.seed, rank)  # for this call alone
    crossing = boundary.cross_boundary(
        raw,
        config.keep_probability,
        flips,
        f"machine {rank}",
        keep_oracle=config.oracle_output is not None,
    )
    del flips
    return crossing


def _cross_validation(
    shards: list[PrivateShard],
    config: RunConfig,
    graph: nx.Graph,
    count: ExchangeCount,
    verbose: bool,
) -> CVResult:
    """``--cv K``: the network's CVResult (its exchanges added to ``count``)."""
    admm = admm_config(config)
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
        grid=config.lam_grid,
        n_lambdas=config.n_lambdas,
        ratio=config.lambda_ratio,
        rule=config.cv_rule,
        on_fold=on_fold,
    )
