"""The main job, written once: what every process does from its options to its exit code.

Every backend runs :func:`process_job` in each of its processes against its
:class:`~dpnet.network.comm.World`, which says which machines the process runs: MPI one per
rank, threads one per thread (:mod:`dpnet.network.inprocess`), the simulator every machine in
one process (as arrays). So the set-up, the machines' work and the release exist in one copy:

1. checks every machine agrees on: the same options on every machine, writable output paths
   (rank 0), the checkpoint directory, the graph (built by rank 0, connected, one node per
   machine, sent to every process); then ``--budget-file``: every machine's file checked,
   then charged (:mod:`dpnet.cli.budget`), before any data is read;
2. the data: every machine loads its own file (``{rank}`` in ``--data``), or rank 0 loads or
   generates all rows and delivers each machine its shard (:mod:`dpnet.cli.setup`); the
   simulator first checks that its arrays fit in memory (:mod:`dpnet.cli.simulation`);
3. ``--resume``: the machines agree on the latest round they all have;
4. the process's machines' work (:func:`dpnet.cli.job.block_main` on the world's block:
   randomized response, --cv, rounds);
5. rank 0 gathers the releases and writes them (:func:`dpnet.cli.release.finish`).

Errors of steps 1-3 are agreed (every process learns the first one) and end the job with exit
code 2 and one line from rank 0; so does data every machine finds unusable in the same exchange
of step 4 (:class:`~dpnet.errors.NetworkDataError`). Faults of a neighbour (PeerFault) and
unexpected exceptions are the backend's to end (:mod:`dpnet.cli.command`, :mod:`dpnet.run`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

import networkx as nx

from dpnet.cli.budget import check_budget_paths, machine_budget
from dpnet.cli.checkpoint import Resumed, available_rounds, common_round
from dpnet.cli.config import RunConfig
from dpnet.cli.job import JobOutcome, block_main, check_checkpoint_dir, resume_machine
from dpnet.cli.provenance import host_name
from dpnet.cli.release import exit_code, finish
from dpnet.cli.report import ProgressPrinter, check_output_paths
from dpnet.cli.setup import (
    PublicSetUp,
    SetUp,
    check_shards_agree,
    data_per_machine,
    load_own_shard,
    own_data_problem,
    prepare_problem,
    shard_from_own_data,
)
from dpnet.data.dataset import GroupData
from dpnet.decentralized.boundary import RawShard
from dpnet.decentralized.columns import column_part, pooled_columns, scaling_warning
from dpnet.decentralized.cv import check_fold_counts
from dpnet.errors import EXIT_BAD_INPUT, DpnetError, NetworkDataError, TopologyError
from dpnet.network.comm import World
from dpnet.network.launcher import launched_by_open_mpi, launcher_rank
from dpnet.network.topology import build_topology, validate_topology
from dpnet.privacy.modes import CLI

FIRST_LINE_GRACE_SECONDS = 2.0  # how long another rank lets rank 0 exit first (Open MPI)


def fail(message: str, rank: int) -> int:
    """Exit code 2, with the one line printed by rank 0. Open MPI's launcher ends the job at
    the first rank's non-zero exit, killing rank 0 before its line when another rank was
    quicker: there another rank waits up to ``FIRST_LINE_GRACE_SECONDS`` for that (the
    launcher's teardown then ends it silently, see :mod:`dpnet.run`)."""
    if rank == 0:
        print(f"dpnet: error: {message}", file=sys.stderr, flush=True)
    elif launched_by_open_mpi() and launcher_rank()[0] == rank:
        time.sleep(FIRST_LINE_GRACE_SECONDS)
    return EXIT_BAD_INPUT


class FitsCheck(Protocol):
    """A process's check that its machines' arrays fit in memory (DpnetError if not): the
    simulator's :func:`~dpnet.cli.simulation.check_simulator_fits`."""

    def __call__(
        self, config: RunConfig, rows: Sequence[int], n_features: int, *, shards_held: bool
    ) -> None: ...


def process_job(
    world: World, config: RunConfig, started_at: float, check_fits: FitsCheck | None = None
) -> int:
    """This process's whole job; its exit code (the same in every process). ``check_fits``:
    the process's memory check, before the rows are drawn and once they are known."""
    start = time.perf_counter()
    graph, error = _checks(world, config)
    if error is None:
        error = _charge_budgets(world, config)
    if error is not None:
        return fail(error, world.rank)
    assert graph is not None
    shards, setup, error = _shards(world, config, check_fits)
    if error is None:
        resumed, error = _resume(world, config, graph, shards)
    if error is not None:
        return fail(error, world.rank)
    if world.rank == 0:
        assert setup is not None
        warn_scaling(config, setup.public)
    block = world.block(graph, config.peer_timeout)
    try:
        outcomes = block_main(block, shards, config, graph, _progress(config), resumed)
    except NetworkDataError as exc:  # every machine raised it in the same exchange
        world.free()
        return fail(str(exc), world.rank)
    gathered = world.gather_to_root([_timed_startup(o, started_at) for o in outcomes])
    code = exit_code(outcomes[0].release.result.stop_reason)
    if world.rank == 0:
        assert setup is not None and gathered is not None
        code = finish(config, graph, setup, gathered, time.perf_counter() - start, world.backend)
    world.free()
    return code


def warn_scaling(config: RunConfig, public: PublicSetUp) -> None:
    """Rank 0, before the first round: the one line naming a badly scaled column and the
    remedy (:func:`~dpnet.decentralized.columns.scaling_warning`: from the public column facts
    of label privacy only), also with --quiet."""
    line = scaling_warning(public.columns, CLI, public.feature_names)
    if line is not None:
        print(f"dpnet: warning: {line}", file=sys.stderr, flush=True)


def _checks(world: World, config: RunConfig) -> tuple[nx.Graph | None, str | None]:
    """Step 1: the machine graph (built once, by rank 0: a random family's draws until
    connected cost J times as much on every machine), or the first error any machine met."""
    graph = None
    configs = world.allgather([config.as_dict()] * len(world.machines))
    error = settings_mismatch(configs) if world.rank == 0 else None  # agreed below
    if error is None:
        try:
            check_checkpoint_dir(config)
            if world.rank == 0:
                graph = checked_graph(config, world.size, world.launched_as)
        except DpnetError as exc:
            error = str(exc)
    if (error := world.agree(error)) is not None:
        return None, error
    return world.broadcast_from_root(graph), None


def _charge_budgets(world: World, config: RunConfig) -> str | None:
    """Step 1, --budget-file: every machine checks its file would take the job's spend
    (agreed: a job refused by one machine's cap charges none), then charges it durably;
    both before any data is read (:mod:`dpnet.cli.budget`). The first error, or None."""
    if config.budget_file is None:
        return None
    for charge in (False, True):
        error = None
        try:
            check_budget_paths(config, world.size)
            for machine in world.machines:
                machine_budget(config, machine, world.size, charge=charge)
        except DpnetError as exc:
            error = str(exc)
        if (error := world.agree(error)) is not None:
            return error
    return None


def checked_graph(config: RunConfig, size: int, launched_as: str | None) -> nx.Graph:
    """Rank 0's part of step 1: writable output paths, then the graph of ``size`` machines
    (connected, nodes 0..size-1); a TopologyError says how the size was fixed."""
    check_output_paths(config)
    try:
        return validate_topology(
            build_topology(config.topology, size, seed=config.topology_seed), size
        )
    except TopologyError as exc:
        if launched_as is None:
            raise
        raise TopologyError(f"{exc} ({launched_as})") from None


def _shards(
    world: World, config: RunConfig, check_fits: FitsCheck | None
) -> tuple[list[RawShard], SetUp | None, str | None]:
    """Step 2: (the RawShards of this process's machines, rank 0's SetUp, the first error)."""
    if data_per_machine(config):
        shards, setup, error = _own_shards(world, config)
    else:
        shards, setup, error = _split_shards(world, config, check_fits)
    if error is None and check_fits is not None:
        try:
            rows = [s.X.shape[0] for s in shards]
            check_fits(config, rows, shards[0].X.shape[1], shards_held=True)
        except DpnetError as exc:
            error = str(exc)
        error = world.agree(error)
    return shards, setup, error


def _split_shards(
    world: World, config: RunConfig, check_fits: FitsCheck | None
) -> tuple[list[RawShard], SetUp | None, str | None]:
    """Rank 0 loads or generates all rows and splits them; each process gets its machines'."""
    setup, error = None, None
    if world.rank == 0:
        try:
            planned = _synthetic_rows(config, world.size)
            if check_fits is not None and planned is not None:
                # before any row is drawn (the data's own check counts its generation only)
                check_fits(config, planned, 3 * config.n_groups, shards_held=False)
            setup = prepare_problem(config, world.size)
            check_cv_rows(config, [s.X.shape[0] for s in setup.shards or []])
        except DpnetError as exc:
            error = str(exc)
    if (error := world.agree(error)) is not None:
        return [], None, error
    return world.scatter_from_root(setup.shards if setup is not None else None), setup, None


def _own_shards(world: World, config: RunConfig) -> tuple[list[RawShard], SetUp | None, str | None]:
    """Every machine loads its own file; set-up messages agree on sizes and groups (public)."""
    own: list[GroupData] = []
    setup, error = None, None
    for machine in world.machines:
        try:
            own.append(load_own_shard(config, machine))
        except DpnetError as exc:
            error = f"machine {machine}: {exc}"
            break
    if (error := world.agree(error)) is not None:
        return [], None, error
    # label privacy: the column moments for the fit's shift and start (the features are
    # public there); record privacy with --standardize: each machine's released column sums
    mode = config.privacy_mode
    # the public schema of each file (rows, groups, header): every machine checks they agree
    metas = world.allgather(
        [
            (
                (o.n_samples, o.groups.tolist(), o.feature_names),
                column_part(mode, o.X, world.size, machine, config.seed),
            )
            for machine, o in zip(world.machines, own, strict=True)
        ]
    )
    try:
        check_own_shards(config, [m[0] for m in metas])
        if world.rank == 0:
            first = own[0]  # machine 0's
            setup = own_data_problem(config, first.groups, first.feature_names, first.group_names)
    except DpnetError as exc:
        error = str(exc)
    if (error := world.agree(error)) is not None:
        return [], None, error
    total = sum(m[0][0] for m in metas)
    columns = pooled_columns(mode, [m[1] for m in metas], total, standardize=config.standardize)
    if setup is not None:  # rank 0's report states the columns' facts (public or released)
        setup = replace(setup, public=replace(setup.public, columns=columns))
    return [shard_from_own_data(o, total, config, columns) for o in own], setup, None


def check_own_shards(
    config: RunConfig, metas: list[tuple[int, list[int], tuple[str, ...] | None]]
) -> None:
    """Every machine's (row count, column groups, CSV header) of its own file: the same
    groups and header, and rows enough for --cv (ConfigError)."""
    check_shards_agree([m[0] for m in metas], [m[1] for m in metas], [m[2] for m in metas])
    check_cv_rows(config, [m[0] for m in metas])


def _synthetic_rows(config: RunConfig, size: int) -> list[int] | None:
    """Every machine's row count of the synthetic data, known from the options before any row
    is drawn; None for data files (their width is read with them) or sizes set-up refuses."""
    if config.data is not None:
        return None
    if config.shard_sizes is None:
        q, r = divmod(config.n_samples, size)  # as split_rows: the first r get one more
        return [q + (j < r) for j in range(size)]
    if len(config.shard_sizes) != size or sum(config.shard_sizes) != config.n_samples:
        return None
    return list(config.shard_sizes)


def _resume(
    world: World, config: RunConfig, graph: nx.Graph, shards: list[RawShard]
) -> tuple[Resumed | None, str | None]:
    """Step 3, ``--resume``: the machines agree on the latest round all have, each loads its
    own file (a process of one machine: the simulator refuses --resume)."""
    if config.resume is None:
        return None, None
    (machine,), (shard,) = world.machines, shards
    resumed, error = None, None
    rounds = world.allgather([available_rounds(config.resume, machine)])
    try:
        resumed = resume_machine(config, graph, machine, shard, common_round(rounds, config.resume))
    except DpnetError as exc:
        error = str(exc)
    return resumed, world.agree(error)


def check_cv_rows(config: RunConfig, rows: list[int]) -> None:
    """``--cv K`` needs K <= every machine's row count (ConfigError before round 1)."""
    if config.cv:
        check_fold_counts(config.cv, rows)


def settings_mismatch(configs: list[dict[str, Any]]) -> str | None:
    """A line naming the first rank and option that differ from rank 0's, or None.

    Ranks started with different settings (an MPMD command line) would disagree on buffer
    sizes or on the stop round and wait for each other forever; they are refused at set-up.
    """
    for rank, other in enumerate(configs):
        diff = [k for k in configs[0] if configs[0][k] != other.get(k)]
        if diff:
            key = diff[0]
            return (
                f"rank {rank} was started with other settings than rank 0 "
                f"(--{key.replace('_', '-')}: {other.get(key)!r} vs {configs[0][key]!r}); "
                f"every rank needs the same options"
            )
    return None


def _progress(config: RunConfig) -> Any:
    return None if config.quiet or not config.progress_every else ProgressPrinter(config.rounds)


def _timed_startup(outcome: JobOutcome, started_at: float) -> JobOutcome:
    """Stamp the machine's start-up, the job's start to its first round, on this process's
    clock, and its host (before the outcome travels to rank 0)."""
    result = outcome.release.result
    result.startup_seconds = result.started_at - started_at
    result.host = host_name()
    return outcome
