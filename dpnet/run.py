"""``python -m dpnet.run``: the one place that picks the backend and wires the main job.

Under ``mpiexec -n J`` every rank is one machine (MPI backend); run without mpiexec, all J
machines run as threads of this process (in-process backend, same numerics, same results).

Exit codes: 0 a result (converged, or max_rounds with a warning); 1 an exception on some rank
aborted the job; 2 bad input (one line from rank 0, before any round: options, data, graph,
output paths, ranks started with different settings; or, after set-up, data every machine
finds unusable in the same exchange: NetworkDataError, e.g. --cv on one-class randomized
labels); 3 no estimate (an iterate became
non-finite, or ran away: stop_reason "non-finite" / "diverged"); 4 the results were written
but the plot could not be; 5 a neighbour went silent for --peer-timeout seconds (or a machine
was told so by its neighbours): every machine stops, nothing written; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from typing import Any

import networkx as nx

import dpnet
from dpnet.checkpoint import available_rounds, common_round
from dpnet.config import RunConfig, parse_config
from dpnet.decentralized.cv import check_fold_counts
from dpnet.decentralized.machine import consensus_model
from dpnet.errors import (
    DpnetError,
    MachineFailure,
    NetworkDataError,
    TopologyError,
)
from dpnet.job import JobOutcome, check_checkpoint_dir, machine_main, resume_machine
from dpnet.network.comm import PeerFault
from dpnet.network.topology import build_topology, describe_topology, validate_topology
from dpnet.report import (
    STOP_WARNINGS,
    build_report,
    check_output_paths,
    print_progress,
    summary_lines,
    write_json_atomic,
)
from dpnet.setup import (
    SetUp,
    check_shards_agree,
    data_per_machine,
    load_own_shard,
    own_data_problem,
    prepare_problem,
    shard_from_own_data,
)

EXIT_MACHINE_FAILED = 1
EXIT_NO_ESTIMATE = 3
EXIT_PLOT_FAILED = 4
EXIT_PEER_FAULT = 5
EXIT_INTERRUPTED = 130
NO_ESTIMATE = ("non-finite", "diverged")

_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def _launcher_rank() -> tuple[int, bool]:
    """(rank announced by mpiexec, whether mpiexec started us at all: also for -n 1)."""
    found = [int(os.environ[v]) for v in _RANK_VARS if v in os.environ]
    return (found[0] if found else 0), bool(found)


def _fail(message: str, rank: int) -> int:
    if rank == 0:
        print(f"dpnet: error: {message}", file=sys.stderr, flush=True)
    return 2


def run_baselines(config: RunConfig) -> dict[str, Any]:
    """Rank 0's single-node baselines, each on its own synthetic data with its own ledger."""
    from dpnet.privacy.ledger import PrivacyLedger  # rank 0 only: machines skip the import

    out: dict[str, Any] = {}
    # without --seed the baselines draw OS entropy too (a fixed default would be public)
    seed = config.seed
    eps = 1.0 if config.label_epsilon == float("inf") else config.label_epsilon
    if "median" in config.baselines:
        from dpnet.baselines.median import run_median_baselines

        ledger = PrivacyLedger()
        out["median"] = run_median_baselines(epsilon=eps, seed=seed, ledger=ledger)
        out["median"]["ledger"] = ledger.to_dict()
    if "rdp-admm" in config.baselines:
        from dpnet.baselines.rdp_admm import run_rdp_admm_baselines

        ledger = PrivacyLedger(delta=1e-8)
        out["rdp-admm"] = run_rdp_admm_baselines(epsilon=eps, delta=1e-8, seed=seed, ledger=ledger)
        out["rdp-admm"]["ledger"] = ledger.to_dict()
    return out


def _exit_code(stop_reason: str) -> int:
    return EXIT_NO_ESTIMATE if stop_reason in NO_ESTIMATE else 0


def _finish(
    config: RunConfig,
    graph: nx.Graph,
    setup: SetUp,
    outcomes: list[JobOutcome],
    wall: float,
    backend: str,
) -> int:
    """Rank 0: the release (report, file, summary, plot) and, if asked, the oracle file."""
    baselines = run_baselines(config) if config.baselines else None
    releases = [o.release for o in outcomes]
    report = build_report(
        config,
        describe_topology(graph),
        setup.public,
        releases,
        wall,
        backend,
        baselines,
        [o.cross_validation for o in outcomes] if config.cv else None,
    )
    if config.oracle_output:
        from dpnet.oracle import build_oracle_report

        coef, intercept = consensus_model(releases)
        fitted = config  # the oracle's objective uses the fit's lambda: with --cv, the selected
        if config.cv:
            fitted = replace(config, lam=report["cross_validation"]["lambda_selected"])
        write_json_atomic(
            config.oracle_output,
            build_oracle_report(
                fitted,
                setup.public,
                [o.oracle for o in outcomes],
                coef,
                intercept,
                setup.holdout_raw,
            ),
        )
    if config.output:
        write_json_atomic(config.output, report)
    if not config.quiet or config.output is None:
        print("\n".join(summary_lines(report)), flush=True)
        if config.output:
            print(f"  results written to {config.output}", flush=True)
    if report["stop_reason"] in STOP_WARNINGS:  # also with --quiet
        print(
            f"dpnet: warning: stop {report['stop_reason']}: {STOP_WARNINGS[report['stop_reason']]}",
            file=sys.stderr,
            flush=True,
        )
    from dpnet.plots import plot_convergence, plot_cross_validation

    for path, draw in ((config.plot, plot_convergence), (config.cv_plot, plot_cross_validation)):
        if not path:
            continue
        try:
            draw(report, path)
        except (OSError, ValueError, RuntimeError) as exc:
            kept = f"results in {config.output}" if config.output else "summary above"
            print(
                f"dpnet: error: the plot {path} could not be written "
                f"({type(exc).__name__}: {exc}); the run itself finished ({kept})",
                file=sys.stderr,
                flush=True,
            )
            return EXIT_PLOT_FAILED
    return _exit_code(report["stop_reason"])


def check_cv_rows(config: RunConfig, rows: list[int]) -> None:
    """``--cv K`` needs K <= every machine's row count (ConfigError before round 1)."""
    if config.cv:
        check_fold_counts(config.cv, rows)


def _progress(config: RunConfig) -> Any:
    return None if config.quiet or not config.progress_every else print_progress


def run_inprocess(config: RunConfig, started_at: float) -> int:
    from dpnet.network.inprocess import Stopped, run_in_process

    start = time.perf_counter()
    try:
        check_output_paths(config)
        check_checkpoint_dir(config)
        graph = build_topology(config.topology, config.machines, seed=config.topology_seed)
        graph = validate_topology(graph, graph.number_of_nodes())
        if data_per_machine(config):
            own = [load_own_shard(config, j) for j in range(graph.number_of_nodes())]
            check_shards_agree([d.n_samples for d in own], [d.groups.tolist() for d in own])
            check_cv_rows(config, [d.n_samples for d in own])
            setup = own_data_problem(config, own[0].groups)
            n_total = sum(d.n_samples for d in own)
            shards = [shard_from_own_data(d, n_total, config) for d in own]
        else:
            setup = prepare_problem(config, graph.number_of_nodes())
            shards = setup.shards
            check_cv_rows(config, [s.X.shape[0] for s in shards])
        resumed = [None] * len(shards)
        if config.resume is not None:
            rounds = [available_rounds(config.resume, j) for j in range(len(shards))]
            start_round = common_round(rounds, config.resume)
            resumed = [
                resume_machine(config, graph, j, shard, start_round)
                for j, shard in enumerate(shards)
            ]
    except DpnetError as exc:
        return _fail(str(exc), 0)

    def machine(comm: Any) -> JobOutcome:
        try:
            outcome = machine_main(
                comm, shards[comm.rank], config, graph, _progress(config), resumed[comm.rank]
            )
        except (NetworkDataError, PeerFault, Stopped):
            raise  # every machine's (exit 2), a silent peer's (5), or another machine's fault
        except Exception as exc:  # as under MPI, whose abort hook sees the same exception
            raise MachineFailure(comm.rank, exc) from exc
        return _timed_startup(outcome, started_at)

    try:
        outcomes = run_in_process(graph, machine, peer_timeout=config.peer_timeout)
    except PeerFault as exc:
        print(f"dpnet: {exc}; nothing written", file=sys.stderr, flush=True)
        return EXIT_PEER_FAULT
    except MachineFailure as exc:
        print(exc, file=sys.stderr, flush=True)
        return EXIT_MACHINE_FAILED
    return _finish(config, graph, setup, outcomes, time.perf_counter() - start, "inprocess")


def run_mpi(config: RunConfig, started_at: float) -> int:
    from threadpoolctl import threadpool_limits

    from dpnet.network import mpi_comm

    # One BLAS thread per rank: with more ranks than cores, BLAS worker threads spinning
    # beside the ranks made an 8-rank ring 17x slower per round (measured on 2 cores).
    threadpool_limits(limits=1, user_api="blas")
    mpi_comm.install_abort_hook()
    world = mpi_comm.MPISetup()
    start = time.perf_counter()
    graph = setup = None
    error = settings_mismatch(world.allgather(config.as_dict()))
    if error is None:
        try:
            if world.rank == 0:
                check_output_paths(config)
            check_checkpoint_dir(config)
            graph = validate_topology(
                build_topology(config.topology, world.size, seed=config.topology_seed), world.size
            )
        except TopologyError as exc:
            error = f"{exc} (mpiexec started {world.size} ranks, one per machine)"
        except DpnetError as exc:
            error = str(exc)
    if (error := world.agree(error)) is not None:
        return _fail(error, world.rank)
    if data_per_machine(config):
        shard, setup, error = _own_shards(config, world)
    else:
        if world.rank == 0:
            try:
                setup = prepare_problem(config, world.size)
                check_cv_rows(config, [s.X.shape[0] for s in setup.shards])
            except DpnetError as exc:
                error = str(exc)
        if (error := world.agree(error)) is None:
            shard = world.scatter_from_root(setup.shards if setup is not None else None)
    if error is not None:
        return _fail(error, world.rank)
    resumed, error = _resume(config, graph, world, shard)
    if error is not None:
        return _fail(error, world.rank)
    comm = mpi_comm.MPICommunicator(graph, peer_timeout=config.peer_timeout)
    try:
        outcome = _timed_startup(
            machine_main(comm, shard, config, graph, _progress(config), resumed), started_at
        )
        outcomes = comm.gather_to_root(outcome)
    except PeerFault as exc:
        # no MPI_Finalize: it would wait for the silent peer; mpiexec ends the reachable ranks
        print(f"dpnet: {exc}; nothing written", file=sys.stderr, flush=True)
        os._exit(EXIT_PEER_FAULT)
    except NetworkDataError as exc:  # every rank raised it in the same exchange
        comm.free()
        return _fail(str(exc), world.rank)
    code = _exit_code(outcome.release.result.stop_reason)
    if world.rank == 0:
        code = _finish(config, graph, setup, outcomes, time.perf_counter() - start, "mpi")
    comm.free()
    return code


def _timed_startup(outcome: JobOutcome, started_at: float) -> JobOutcome:
    """Stamp the machine's start-up, the job's start to its first round, on this process's
    clock (before the outcome travels to rank 0)."""
    result = outcome.release.result
    result.startup_seconds = result.started_at - started_at
    return outcome


def _resume(config: RunConfig, graph: nx.Graph, world: Any, shard: Any) -> tuple[Any, str | None]:
    """``--resume``: the ranks agree on the latest round all have, each loads its own file."""
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


def _own_shards(config: RunConfig, world: Any) -> tuple[Any, Any, str | None]:
    """Every rank loads its own file; set-up messages agree on sizes and groups (public)."""
    own = setup = None
    error = None
    try:
        own = load_own_shard(config, world.rank)
    except DpnetError as exc:
        error = f"machine {world.rank}: {exc}"
    if (error := world.agree(error)) is not None:
        return None, None, error
    metas = world.allgather((own.n_samples, own.groups.tolist()))
    try:
        check_shards_agree([m[0] for m in metas], [m[1] for m in metas])
        check_cv_rows(config, [m[0] for m in metas])
        if world.rank == 0:
            setup = own_data_problem(config, own.groups)
    except DpnetError as exc:
        error = str(exc)
    if (error := world.agree(error)) is not None:
        return None, None, error
    return shard_from_own_data(own, sum(m[0] for m in metas), config), setup, None


def main(argv: list[str] | None = None, *, started_at: float | None = None) -> int:
    """The main job; exit code. Start-up (report: ``timing.startup_seconds``) is timed from
    ``started_at`` (a ``time.perf_counter()`` reading; default: this call)."""
    started_at = time.perf_counter() if started_at is None else started_at
    launcher_rank, launched = _launcher_rank()
    try:
        config = parse_config(argv)
    except DpnetError as exc:
        return _fail(str(exc), launcher_rank)
    # under mpiexec (even -n 1) every rank is one machine; --machines is for in-process runs
    use_mpi = config.backend == "mpi" or (config.backend == "auto" and launched)
    if use_mpi:
        try:
            return run_mpi(config, started_at)
        except KeyboardInterrupt:  # mpiexec forwards Ctrl-C to every rank it can reach
            if launcher_rank == 0:
                print("dpnet: interrupted: nothing written", file=sys.stderr, flush=True)
            os._exit(EXIT_INTERRUPTED)  # no MPI_Finalize: the other ranks are stopping too
    try:
        return run_inprocess(config, started_at)
    except DpnetError as exc:
        return _fail(str(exc), 0)
    except KeyboardInterrupt:
        print(
            "dpnet: interrupted: every machine stopped, nothing written",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    try:
        sys.exit(main(started_at=dpnet.IMPORTED_AT))  # the process's imports count
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        sys.exit(0)
