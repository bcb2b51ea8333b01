"""Which MPI launcher started this process, read from its environment (no mpi4py import).

The entry point (:mod:`dpnet.run`) reads it before anything heavy loads; the MPI communicator
(:mod:`dpnet.network.mpi_comm`) and the job (:mod:`dpnet.cli`) read it too.
"""

from __future__ import annotations

import os

OPEN_MPI_RANK = "OMPI_COMM_WORLD_RANK"  # set by Open MPI's launcher only
RANK_VARIABLES = ("PMI_RANK", OPEN_MPI_RANK, "PMIX_RANK")

__all__ = ["OPEN_MPI_RANK", "RANK_VARIABLES", "launched_by_open_mpi", "launcher_rank"]


def launcher_rank() -> tuple[int, bool]:
    """(rank announced by mpiexec, whether mpiexec started us at all: also for -n 1)."""
    found = [int(os.environ[v]) for v in RANK_VARIABLES if v in os.environ]
    return (found[0] if found else 0), bool(found)


def launched_by_open_mpi() -> bool:
    """Whether Open MPI's launcher started this process (it ends the whole job at the first
    rank's non-zero exit, and handles a signal to itself on its own)."""
    return OPEN_MPI_RANK in os.environ
