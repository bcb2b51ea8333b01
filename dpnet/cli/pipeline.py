"""The main job, written once: what every machine does from its options to its exit code.

MPI and threads run :func:`machine_job` on every machine against its
:class:`~dpnet.network.comm.World` (MPI: one rank per machine; threads: one thread per machine
in this process); the simulated backend runs :func:`simulated_job`, the same steps with one
process holding every machine (steps 1 and 2 from the same functions, step 4 in
:mod:`dpnet.cli.simulation`, step 5 the same). So the set-up, the machines' work and the release
exist in one copy:

1. checks every machine agrees on: the same options on every machine, writable output paths
   (rank 0), the checkpoint directory, the graph (built by rank 0, connected, one node per
   machine, sent to every machine);
2. the data: every machine loads its own file (``{rank}`` in ``--data``), or rank 0 loads or
   generates all rows and delivers each machine its shard (:mod:`dpnet.cli.setup`);
3. ``--resume``: the machines agree on the latest round they all have;
4. the machine's work (:func:`dpnet.cli.job.block_main`: randomized response, --cv, rounds);
5. rank 0 gathers the releases and writes them (:func:`dpnet.cli.release.finish`).

Errors of steps 1-3 are agreed (every machine learns the first one) and end the job with exit
code 2 and one line from rank 0; so does data every machine finds unusable in the same exchange
of step 4 (:class:`~dpnet.errors.NetworkDataError`). Faults of a neighbour (PeerFault) and
unexpected exceptions are the backend's to end (:mod:`dpnet.run`).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import networkx as nx

from dpnet.cli.checkpoint import available_rounds, common_round
from dpnet.cli.config import RunConfig
from dpnet.cli.job import JobOutcome, block_main, check_checkpoint_dir, resume_machine
from dpnet.cli.provenance import host_name
from dpnet.cli.release import exit_code, finish
from dpnet.cli.report import ProgressPrinter, check_output_paths
from dpnet.cli.setup import (
    SetUp,
    check_shards_agree,
    data_per_machine,
    load_own_shard,
    own_data_problem,
    prepare_problem,
    shard_from_own_data,
)
from dpnet.cli.simulation import check_simulator_fits, simulate_machines
from dpnet.decentralized.block import CommBlock
from dpnet.decentralized.boundary import RawShard
from dpnet.decentralized.columns import (
    ColumnMoments,
    PublicColumns,
    public_columns,
)
from dpnet.decentralized.cv import check_fold_counts
from dpnet.errors import (
    EXIT_BAD_INPUT,
    DataError,
    DpnetError,
    NetworkDataError,
    TopologyError,
)
from dpnet.network.comm import World
from dpnet.network.launcher import launched_by_open_mpi, launcher_rank
from dpnet.network.topology import build_topology, machine_count, validate_topology

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


def machine_job(world: World, config: RunConfig, started_at: float) -> int:
    """This machine's whole job; its exit code (the same on every machine)."""
    start = time.perf_counter()
    graph, error = _checks(world, config)
    if error is not None:
        return fail(error, world.rank)
    assert graph is not None
    shard, setup, error = _shard(world, config)
    if error is None:
        resumed, error = _resume(world, config, graph, shard)
    if error is not None:
        return fail(error, world.rank)
    comm = world.communicator(graph, config.peer_timeout)
    try:
        block = CommBlock(comm, graph)
        outcome = block_main(block, [shard], config, graph, _progress(config), resumed)[0]
    except NetworkDataError as exc:  # every machine raised it in the same exchange
        world.free(comm)
        return fail(str(exc), world.rank)
    outcomes = comm.gather_to_root(_timed_startup(outcome, started_at))
    code = exit_code(outcome.release.result.stop_reason)
    if world.rank == 0:
        assert setup is not None and outcomes is not None
        code = finish(config, graph, setup, outcomes, time.perf_counter() - start, world.backend)
    world.free(comm)
    return code


def _checks(world: World, config: RunConfig) -> tuple[nx.Graph | None, str | None]:
    """Step 1: the machine graph (built once, by rank 0: a random family's draws until
    connected cost J times as much on every machine), or the first error any machine met."""
    graph = None
    configs = world.allgather(config.as_dict())
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


def _shard(world: World, config: RunConfig) -> tuple[Any, SetUp | None, str | None]:
    """Step 2: (this machine's RawShard, rank 0's SetUp, the first error)."""
    if data_per_machine(config):
        return _own_shard(world, config)
    setup, error = None, None
    if world.rank == 0:
        try:
            setup = prepare_problem(config, world.size)
            check_cv_rows(config, [s.X.shape[0] for s in setup.shards or []])
        except DpnetError as exc:
            error = str(exc)
    if (error := world.agree(error)) is not None:
        return None, None, error
    return world.scatter_from_root(setup.shards if setup is not None else None), setup, None


def _own_shard(world: World, config: RunConfig) -> tuple[Any, SetUp | None, str | None]:
    """Every machine loads its own file; set-up messages agree on sizes and groups (public)."""
    own = setup = None
    error = None
    try:
        own = load_own_shard(config, world.rank)
    except DpnetError as exc:
        error = f"machine {world.rank}: {exc}"
    if (error := world.agree(error)) is not None:
        return None, None, error
    assert own is not None
    # label privacy: the column moments for the fit's shift and start (the features are
    # public there)
    moments = ColumnMoments.of(own.X, world.size) if config.privacy_mode.features_public else None
    # the public schema of each file (rows, groups, header): every machine checks they agree
    schema = (own.n_samples, own.groups.tolist(), own.feature_names)
    metas = world.allgather((schema, moments))
    try:
        check_own_shards(config, [m[0] for m in metas])
        if world.rank == 0:
            setup = own_data_problem(config, own.groups, own.feature_names, own.group_names)
    except DpnetError as exc:
        error = str(exc)
    if (error := world.agree(error)) is not None:
        return None, None, error
    total = sum(m[0][0] for m in metas)
    columns = PublicColumns.pooled([m[1] for m in metas], total) if moments is not None else None
    return shard_from_own_data(own, total, config, columns), setup, None


def check_own_shards(
    config: RunConfig, metas: list[tuple[int, list[int], tuple[str, ...] | None]]
) -> None:
    """Every machine's (row count, column groups, CSV header) of its own file: the same
    groups and header, and rows enough for --cv (ConfigError)."""
    check_shards_agree([m[0] for m in metas], [m[1] for m in metas], [m[2] for m in metas])
    check_cv_rows(config, [m[0] for m in metas])


def all_shards(config: RunConfig, size: int) -> tuple[list[RawShard], SetUp]:
    """Step 2 for a process that holds every machine (the simulated backend): each machine's
    RawShard, from its own file or from rank 0's split, and the SetUp (DpnetError)."""
    if not data_per_machine(config):
        setup = prepare_problem(config, size)
        assert setup.shards is not None
        check_cv_rows(config, [s.X.shape[0] for s in setup.shards])
        return setup.shards, setup
    own = []
    for rank in range(size):
        try:
            own.append(load_own_shard(config, rank))
        except DpnetError as exc:
            raise DataError(f"machine {rank}: {exc}") from None
    check_own_shards(config, [(o.n_samples, o.groups.tolist(), o.feature_names) for o in own])
    total = sum(o.n_samples for o in own)
    columns = public_columns(config.privacy_mode, [o.X for o in own], total)
    shards = [shard_from_own_data(o, total, config, columns) for o in own]
    return shards, own_data_problem(config, own[0].groups, own[0].feature_names, own[0].group_names)


def simulated_job(config: RunConfig, started_at: float) -> int:
    """The whole job with every machine in this process as arrays (:mod:`dpnet.cli.simulation`):
    steps 1, 2 and 5 as above with one process holding all machines, step 4 for all at once.
    --checkpoint and --resume do not apply (RunConfig refuses them)."""
    start = time.perf_counter()
    try:
        size = machine_count(config.topology, config.machines)
        graph = checked_graph(config, size, None)
        if (planned := _synthetic_rows(config, size)) is not None:
            # before any row is drawn (the data's own check counts its generation only)
            check_simulator_fits(config, planned, 3 * config.n_groups, shards_held=False)
        shards, setup = all_shards(config, size)
        rows = [s.X.shape[0] for s in shards]
        check_simulator_fits(config, rows, shards[0].X.shape[1], shards_held=True)
    except DpnetError as exc:
        return fail(str(exc), 0)
    try:
        outcomes = simulate_machines(shards, config, graph, _progress(config))
    except NetworkDataError as exc:
        return fail(str(exc), 0)
    for outcome in outcomes:
        _timed_startup(outcome, started_at)
    return finish(config, graph, setup, outcomes, time.perf_counter() - start, "simulated")


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


def _resume(world: World, config: RunConfig, graph: nx.Graph, shard: Any) -> tuple[Any, str | None]:
    """Step 3, ``--resume``: the machines agree on the latest round all have, each loads its
    own file."""
    if config.resume is None:
        return None, None
    resumed, error = None, None
    rounds = world.allgather(available_rounds(config.resume, world.rank))
    try:
        resumed = resume_machine(
            config, graph, world.rank, shard, common_round(rounds, config.resume)
        )
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
