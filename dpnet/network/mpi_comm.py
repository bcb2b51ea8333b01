"""The only module that imports mpi4py: a distributed-graph communicator over the machine graph.

Every rank builds ``Create_dist_graph_adjacent`` with its sorted neighbour list as both
sources and destinations (``reorder=False``, so MPI ranks equal graph nodes), and exchanges
buffers with a non-blocking neighbour allgather. While waiting it sleeps between ``Test``
calls instead of spinning: with more ranks than cores a spinning rank steals the core its
neighbour needs.
"""

from __future__ import annotations

import time
from typing import Any

import networkx as nx
import numpy as np
from mpi4py import MPI

from dpnet.network.comm import TrafficStats

POLL_SECONDS = 1e-4


def wait_politely(request: MPI.Request, poll: float = POLL_SECONDS) -> None:
    """Complete ``request`` without burning a core: Test, then sleep ``poll`` seconds."""
    while not request.Test():
        time.sleep(poll)


class MPICommunicator:
    """One rank's endpoint on the machine graph (rank == node id)."""

    def __init__(self, graph: nx.Graph, world: MPI.Intracomm | None = None) -> None:
        self.world = MPI.COMM_WORLD if world is None else world
        self.rank = self.world.Get_rank()
        self.size = self.world.Get_size()
        self.neighbours = sorted(int(v) for v in graph.neighbors(self.rank))
        self.graph_comm = self.world.Create_dist_graph_adjacent(
            self.neighbours, self.neighbours, reorder=False
        )
        self.stats = TrafficStats()

    def neighbour_exchange(self, send: np.ndarray) -> np.ndarray:
        buf = np.ascontiguousarray(send, dtype=np.float64)
        out = np.empty((len(self.neighbours), buf.size), dtype=np.float64)
        self.stats.start()
        request = self.graph_comm.Ineighbor_allgather(buf, out)
        wait_politely(request)
        self.stats.stop(len(self.neighbours), buf.nbytes)
        return out

    def gather_to_root(self, obj: Any) -> list[Any] | None:
        request = self.world.Ibarrier()
        wait_politely(request)
        return self.world.gather(obj, root=0)

    def free(self) -> None:
        self.graph_comm.Free()


class MPISetup:
    """Set-up and reporting traffic on COMM_WORLD (outside the algorithm's rounds)."""

    def __init__(self) -> None:
        self.world = MPI.COMM_WORLD
        self.rank = self.world.Get_rank()
        self.size = self.world.Get_size()

    def agree(self, error: str | None) -> str | None:
        """Every rank learns the first error any rank met during set-up (None if none)."""
        request = self.world.Ibarrier()
        wait_politely(request)
        errors = self.world.allgather(error)
        return next((e for e in errors if e is not None), None)

    def allgather(self, obj: Any) -> list[Any]:
        request = self.world.Ibarrier()
        wait_politely(request)
        return self.world.allgather(obj)

    def scatter_from_root(self, items: list[Any] | None) -> Any:
        request = self.world.Ibarrier()
        wait_politely(request)
        return self.world.scatter(items, root=0)

    def abort(self, code: int = 1) -> None:
        self.world.Abort(code)


def install_abort_hook() -> None:
    """An uncaught exception on any rank prints one line and aborts every rank."""
    import sys

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        rank = MPI.COMM_WORLD.Get_rank()
        print(f"dpnet: rank {rank} failed: {exc_type.__name__}: {exc}", file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook
