"""Every machine of the label-private fit at once, on the library layer (no CLI config): the
simulated backend's counterpart of :mod:`dpnet.decentralized.machine`.

``randomize_all``: machine j crosses the release boundary with its own stream
(:func:`dpnet.streams.machine_flip_stream`, created for its draw and dropped with it).
``fit_private_shards``: the ADMM rounds for all machines as arrays
(:func:`~dpnet.decentralized.batched.run_batched`), each machine's outcome with the fields a
machine of the round loop sends rank 0. Traffic is counted (:class:`ExchangeCount`), not
measured; times are the simulator's divided by J (a machine's share of one process).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import networkx as nx

from dpnet import streams
from dpnet.decentralized import boundary
from dpnet.decentralized.admm import ADMMConfig, MachineResult, ProgressRecord, released_loss
from dpnet.decentralized.batched import run_batched
from dpnet.decentralized.batched_cv import ExchangeCount
from dpnet.decentralized.boundary import LabelOracle, PrivateShard, RawShard
from dpnet.decentralized.machine import (
    MachineOutcome,
    MachineRelease,
    local_problem,
    machine_oracle,
    result_in_given_columns,
    shift_of,
    theta_budget,
)


def randomize_all(
    raws: Sequence[RawShard],
    keep_prob: float,
    seed: int | None,
    *,
    keep_oracle: bool = False,
    row_bound: float | None = None,
) -> list[tuple[PrivateShard, LabelOracle | None]]:
    """Every machine's crossing of the release boundary, each with its own stream (rows
    clipped to ``row_bound`` under record-level privacy)."""
    crossings = []
    for rank, raw in enumerate(raws):
        flips = streams.machine_flip_stream(seed, rank)  # for this machine's call alone
        crossings.append(
            boundary.cross_boundary(
                raw,
                keep_prob,
                flips,
                f"machine {rank}",
                keep_oracle=keep_oracle,
                row_bound=row_bound,
            )
        )
        del flips
    return crossings


def fit_private_shards(
    crossings: Sequence[tuple[PrivateShard, LabelOracle | None]],
    *,
    keep_prob: float,
    loss: str,
    admm: ADMMConfig,
    graph: nx.Graph,
    on_progress: Callable[[ProgressRecord], None] | None = None,
) -> list[MachineOutcome]:
    """The ADMM rounds on every machine's randomized shard (``crossings[j]`` machine j's)."""
    n_machines = len(crossings)
    problems = [
        local_problem(s, lam=admm.lam, loss=loss, keep_prob=keep_prob, n_machines=n_machines)
        for s, _ in crossings
    ]
    cpu_started = time.process_time()
    fit = run_batched([p[0] for p in problems], problems[0][1], admm, graph, on_progress)
    count = ExchangeCount()
    count.add_rounds(fit.rounds, problems[0][0].n_features + 1)
    seconds = fit.seconds / n_machines
    cpu_seconds = (time.process_time() - cpu_started) / n_machines
    outcomes, budget = [], theta_budget(admm)
    shift = shift_of(crossings[0][0])
    for j, ((data, _), (_, label_oracle)) in enumerate(zip(problems, crossings, strict=True)):
        result = MachineResult(
            rank=j,
            theta=fit.theta[j],
            z=fit.z[j],
            rounds=fit.rounds,
            stop_reason=fit.stop_reason,
            local_objective=released_loss(admm, data, fit.theta[j], math.nan),
            n_rows=len(data.y),
            traffic=count.traffic(graph.degree(j)),
            total_seconds=seconds,
            compute_seconds=seconds,
            compute_cpu_seconds=cpu_seconds,
            started_at=fit.started_at,
            history=fit.history,
            penalty=fit.penalty,
        )
        oracle = None if label_oracle is None else machine_oracle(label_oracle, data, result)
        result = result_in_given_columns(result, shift)
        outcomes.append(MachineOutcome(MachineRelease(result, keep_prob, budget), oracle))
    return outcomes
