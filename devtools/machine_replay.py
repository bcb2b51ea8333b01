"""The replay of benchmarks/machine_replay.py (its docstring describes the method): a job's
J machines run once as threads with every received buffer recorded, then each machine's round
loop runs again alone against the recorded buffers, its CPU time and flops counted.
:func:`replay_job` is shared by the benchmark and tests/test_machine_replay.py.
"""

from __future__ import annotations

import cProfile
import math
import pstats
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from devtools.convergence import reference_value, rounds_to_gap
from devtools.flop_count import FlopCounts, block_flops, newton_steps
from devtools.workloads import job_argv
from dpnet.cli import admm_config, parse_config, prepare_problem
from dpnet.decentralized import MachineResult, local_problem, randomize_all, run_machine
from dpnet.network import Communicator, TrafficStats, build_topology, run_in_process

GAP = 1e-4


class RecordingCommunicator:
    """A machine's communicator that keeps a copy of every buffer its neighbours sent."""

    def __init__(self, inner: Communicator) -> None:
        self.inner = inner
        self.rank, self.size = inner.rank, inner.size
        self.neighbours, self.stats = inner.neighbours, inner.stats
        self.received: list[np.ndarray] = []

    def neighbour_exchange(self, send: np.ndarray) -> np.ndarray:
        got = self.inner.neighbour_exchange(send)
        self.received.append(got.copy())
        return got

    def gather_to_root(self, obj: Any) -> list[Any] | None:
        return self.inner.gather_to_root(obj)


class ReplayCommunicator:
    """A machine alone: each exchange returns the next recorded buffer of its neighbours."""

    def __init__(self, rank: int, size: int, neighbours: list[int], received: list[np.ndarray]):
        self.rank, self.size, self.neighbours = rank, size, neighbours
        self.stats = TrafficStats()
        self._received = iter(received)

    def neighbour_exchange(self, send: np.ndarray) -> np.ndarray:
        self.stats.start()
        got = next(self._received)
        self.stats.stop(len(self.neighbours), send.nbytes)
        return got

    def gather_to_root(self, obj: Any) -> list[Any] | None:
        return [obj]


def training_rows(
    n: int, n_groups: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(X, y, group labels, lam) of the job's training rows, all of them in one place: what a
    single-node solver is given."""
    config = parse_config(job_argv(n, n_groups, seed, 1e-6, 3000))
    full = prepare_problem(config, 1).shards
    assert full is not None
    return full[0].X, full[0].y_raw, full[0].group_labels, config.lam


def replay_job(
    n: int,
    n_groups: int,
    J: int,
    topology: str,
    seed: int,
    repeats: int,
    profile: int | None = None,
    f_star: float | None = None,
    gap: float = GAP,
    reference: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """Record a J-machine job in threads, then replay every machine alone; one CSV row.
    ``f_star``: skglm's optimum of the job's training rows (:func:`training_rows`), if
    already known; ``gap``: the relative gap to which compute and flops are counted;
    ``reference``: a computation to compare with (skglm's solve to the gap), timed once in
    each repeat between the machines' replays, so that both medians span the same minutes of
    a host whose speed drifts ("reference_cpu_s")."""
    argv = job_argv(n, n_groups, seed, 1e-6, 3000) + ["--topology", topology]
    config = parse_config(argv)
    graph = build_topology(topology, J, seed=config.topology_seed)
    shards = prepare_problem(config, J).shards
    assert shards is not None
    keep_prob = config.keep_probability
    crossings = randomize_all(shards, keep_prob, config.seed)
    problems = [
        local_problem(s, lam=config.lam, loss=config.loss, keep_prob=keep_prob, n_machines=J)
        for s, _ in crossings
    ]
    admm = admm_config(config, shards[0].columns)
    recorders: list[RecordingCommunicator | None] = [None] * J

    def machine(comm: Communicator) -> MachineResult:
        recorder = RecordingCommunicator(comm)
        recorders[comm.rank] = recorder
        data, groups = problems[comm.rank]
        return run_machine(recorder, data, groups, admm, graph)

    recorded = run_in_process(graph, machine)
    if f_star is None:
        f_star = reference_value(*training_rows(n, n_groups, seed))
    history = [{"round": h.round, "objective": h.objective} for h in recorded[0].history]
    to_gap = rounds_to_gap(history, f_star, gap)

    def replay_comm(rank: int) -> ReplayCommunicator:
        """Machine ``rank`` alone, handed its neighbours' recorded buffers."""
        recorder = recorders[rank]
        assert recorder is not None
        return ReplayCommunicator(rank, J, recorder.neighbours, recorder.received)

    def replay(rank: int, rounds: int, profiler: cProfile.Profile | None = None) -> float:
        """CPU seconds of machine ``rank``'s first ``rounds`` rounds, replayed alone; a
        replay of the whole run is checked bitwise against the recorded one."""
        data, groups = problems[rank]
        comm = replay_comm(rank)
        if profiler is not None:
            profiler.enable()
        start = time.process_time()
        result = run_machine(comm, data, groups, replace(admm, max_rounds=rounds), graph)
        cpu = time.process_time() - start - comm.stats.comm_cpu_seconds
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        if rounds == recorded[rank].rounds and (
            result.rounds != rounds or not np.array_equal(result.theta, recorded[rank].theta)
        ):
            raise RuntimeError(f"machine {rank}'s replay is not the recorded run")
        return cpu

    def counted_flops(rank: int, rounds: int) -> FlopCounts:
        """The flops of machine ``rank``'s theta steps in its first ``rounds`` rounds."""
        data, groups = problems[rank]
        with newton_steps() as made:
            config = replace(admm, max_rounds=rounds)
            run_machine(replay_comm(rank), data, groups, config, graph)
        machine = [block_flops(step)[0] for step in made]  # a block of one each
        return {kind: sum(flops[kind] for flops in machine) for kind in machine[0]}

    # every replay and flop count under one limit of one BLAS thread, as a machine runs: a
    # count outside it woke OpenBLAS's worker thread, which then spun for about 0.1 s beside
    # the next timed replays and was counted in their CPU time (2.5 ms replays measured 6.5)
    to_gap_rounds = [] if to_gap is None else [to_gap]
    whole_times: list[list[float]] = [[] for _ in range(J)]
    gap_times: list[list[float]] = [[] for _ in range(J)]
    flops_to_gap = []
    with threadpool_limits(limits=1, user_api="blas"):
        for rank in range(J):  # warms the caches, not counted
            replay(rank, recorded[rank].rounds)
        # the repeats interleaved, machine after machine: a burst of the host's noise falls on
        # one replay of several machines, not on every replay of one; each figure a median,
        # as skglm's (speed_vs_skglm.skglm_times)
        reference_times = []
        for _ in range(repeats):
            for rank in range(J):
                whole_times[rank].append(replay(rank, recorded[rank].rounds))
                gap_times[rank] += [replay(rank, rounds) for rounds in to_gap_rounds]
                if reference is not None and rank in (0, J // 2):  # twice a repeat
                    start = time.process_time()
                    reference()
                    reference_times.append(time.process_time() - start)
        if profile is not None:
            replay(profile, recorded[profile].rounds, cProfile.Profile())
        for rank in range(J):
            flops_to_gap += [counted_flops(rank, rounds) for rounds in to_gap_rounds]
    cpu_per_round = [
        float(np.median(t)) / recorded[rank].rounds for rank, t in enumerate(whole_times)
    ]
    cpu_to_gap = [float(np.median(t)) for t in gap_times if t]
    return {
        "reference_cpu_s": float(np.median(reference_times)) if reference_times else math.nan,
        "n": n,
        "p": 3 * n_groups,
        "J": J,
        "topology": topology,
        "rounds": recorded[0].rounds,
        "rounds_to_gap": to_gap,
        "max_machine_replay_cpu_ms_per_round": max(cpu_per_round) * 1e3,
        "median_machine_replay_cpu_ms_per_round": float(np.median(cpu_per_round)) * 1e3,
        "compute_to_gap_s": max(cpu_to_gap) if cpu_to_gap else float("nan"),
        "median_machine_compute_to_gap_s": float(np.median(cpu_to_gap))
        if cpu_to_gap
        else float("nan"),
        "slowest_machine_to_gap": int(np.argmax(cpu_to_gap)) if cpu_to_gap else -1,
        **flop_columns(flops_to_gap),
    }


def flop_columns(machines: list[FlopCounts]) -> dict[str, float]:
    """The counted flops to the gap of the machine with the most (total and by kind)."""
    if not machines:
        return {"flops_to_gap": float("nan")}
    most = max(machines, key=lambda counts: sum(counts.values()))
    by_kind = {f"{kind}_flops_to_gap": flops for kind, flops in most.items()}
    return {"flops_to_gap": sum(most.values()), **by_kind}
