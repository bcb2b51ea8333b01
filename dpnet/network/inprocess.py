"""All J machines in one process: one thread per machine, barrier-synchronised mailboxes.

The same round loop that runs over MPI runs here unchanged, so unit tests exercise the real
algorithm without launching ``mpiexec``. Each exchange is two barrier phases: every machine
posts its buffer, then every machine reads its neighbours' buffers. A failure on one thread
breaks the barrier so that the others stop instead of waiting forever.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import networkx as nx
import numpy as np
from threadpoolctl import threadpool_limits

from dpnet.network.comm import TrafficStats

JOIN_POLL_SECONDS = 0.2
INTERRUPT_GRACE_SECONDS = 5.0


class _SharedState:
    def __init__(self, size: int, timeout: float) -> None:
        self.size = size
        self.mailbox: list[np.ndarray | None] = [None] * size
        self.gathered: list[Any] = [None] * size
        self.barrier = threading.Barrier(size, timeout=timeout)


class InProcessCommunicator:
    """Endpoint of machine ``rank`` in a thread-based network (see :func:`run_in_process`)."""

    def __init__(self, rank: int, neighbours: Sequence[int], shared: _SharedState) -> None:
        self.rank = rank
        self.size = shared.size
        self.neighbours = sorted(int(v) for v in neighbours)
        self.stats = TrafficStats()
        self._shared = shared

    def neighbour_exchange(self, send: np.ndarray) -> np.ndarray:
        buf = np.ascontiguousarray(send, dtype=np.float64).copy()
        self.stats.start()
        self._shared.mailbox[self.rank] = buf
        self._shared.barrier.wait()
        out = np.empty((len(self.neighbours), buf.size))
        for k, v in enumerate(self.neighbours):
            other = self._shared.mailbox[v]
            if other is None or other.shape != buf.shape:
                raise RuntimeError(f"machine {v} sent a buffer of a different size to {self.rank}")
            out[k] = other
        self._shared.barrier.wait()
        self.stats.stop(len(self.neighbours), buf.nbytes)
        return out

    def gather_to_root(self, obj: Any) -> list[Any] | None:
        self._shared.gathered[self.rank] = obj
        self._shared.barrier.wait()
        result = list(self._shared.gathered) if self.rank == 0 else None
        self._shared.barrier.wait()
        return result


def run_in_process(
    graph: nx.Graph, target: Callable[[InProcessCommunicator], Any], *, timeout: float = 600.0
) -> list[Any]:
    """Run ``target(comm)`` for every node of ``graph`` in its own thread; return the results.

    The first exception raised on any machine is re-raised here after all threads stopped.
    A KeyboardInterrupt (Ctrl-C reaches the main thread only) breaks the barrier, so every
    machine stops at its next exchange, and is re-raised once they have. BLAS runs
    single-threaded meanwhile: the machines already are the parallelism, and BLAS worker
    threads spinning beside them slow every round down.
    """
    size = graph.number_of_nodes()
    shared = _SharedState(size, timeout)
    results: list[Any] = [None] * size
    errors: list[tuple[int, BaseException]] = []

    def body(rank: int) -> None:
        comm = InProcessCommunicator(rank, list(graph.neighbors(rank)), shared)
        try:
            results[rank] = target(comm)
        except threading.BrokenBarrierError as exc:
            errors.append((rank, exc))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append((rank, exc))
            shared.barrier.abort()

    threads = [
        threading.Thread(target=body, args=(r,), name=f"machine-{r}", daemon=True)
        for r in range(size)
    ]
    with threadpool_limits(limits=1, user_api="blas"):
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(JOIN_POLL_SECONDS)  # a bare join() would not see Ctrl-C
        except KeyboardInterrupt:
            shared.barrier.abort()
            for t in threads:
                t.join(INTERRUPT_GRACE_SECONDS)
            raise
    if errors:
        real = [e for e in errors if not isinstance(e[1], threading.BrokenBarrierError)]
        rank, exc = (real or errors)[0]
        raise exc
    return results
