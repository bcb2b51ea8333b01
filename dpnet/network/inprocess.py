"""All J machines in one process: one thread per machine, one mailbox per directed edge.

The same round loop that runs over MPI runs here unchanged, so unit tests exercise the real
algorithm without launching ``mpiexec``. An exchange puts the machine's buffer into its
mailbox towards each neighbour and takes one buffer from each neighbour's mailbox towards it
(FIFO queues: exchanges pair up in order, as MPI's non-overtaking messages do). Waiting has the
same peer deadline as over MPI (:class:`~dpnet.network.comm.PeerSilent`). A failure on one
thread sets a stop flag, so the others stop at their next wait instead of waiting forever.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import networkx as nx
import numpy as np
from threadpoolctl import threadpool_limits

from dpnet.network.comm import DEFAULT_PEER_TIMEOUT, PeerSilent, TrafficStats

JOIN_POLL_SECONDS = 0.2
WAIT_SLICE_SECONDS = 0.2  # a waiting machine looks at the stop flag this often
INTERRUPT_GRACE_SECONDS = 5.0
FAILURE_GRACE_SECONDS = 1.0  # after a failure, how long the other machines get to stop


class Stopped(Exception):
    """Another machine of the in-process network failed; this one stops (not the cause)."""


class _SharedState:
    def __init__(self, graph: nx.Graph, peer_timeout: float) -> None:
        self.size = graph.number_of_nodes()
        self.peer_timeout = peer_timeout
        self.mailboxes: dict[tuple[int, int], queue.SimpleQueue[np.ndarray]] = {
            (u, v): queue.SimpleQueue() for a, b in graph.edges for u, v in ((a, b), (b, a))
        }
        self.gathered: list[Any] = [None] * self.size
        self.barrier = threading.Barrier(self.size)
        self.stop = threading.Event()

    def abort(self) -> None:
        self.stop.set()
        self.barrier.abort()


class InProcessCommunicator:
    """Endpoint of machine ``rank`` in a thread-based network (see :func:`run_in_process`)."""

    def __init__(self, rank: int, neighbours: Sequence[int], shared: _SharedState) -> None:
        self.rank = rank
        self.size = shared.size
        self.neighbours = sorted(int(v) for v in neighbours)
        self.stats = TrafficStats(per_thread=True)  # one thread per machine
        self._shared = shared

    def neighbour_exchange(self, send: np.ndarray) -> np.ndarray:
        buf = np.ascontiguousarray(send, dtype=np.float64).copy()
        self.stats.start()
        for v in self.neighbours:
            self._shared.mailboxes[(self.rank, v)].put(buf)
        out = np.empty((len(self.neighbours), buf.size))
        deadline = time.monotonic() + self._shared.peer_timeout
        for k, v in enumerate(self.neighbours):
            other = self._receive(v, deadline)
            if other.shape != buf.shape:
                raise RuntimeError(f"machine {v} sent a buffer of a different size to {self.rank}")
            out[k] = other
        self.stats.stop(len(self.neighbours), buf.nbytes)
        return out

    def _receive(self, neighbour: int, deadline: float) -> np.ndarray:
        box = self._shared.mailboxes[(neighbour, self.rank)]
        while True:
            if self._shared.stop.is_set():
                raise Stopped(f"machine {self.rank} stopped: another machine failed")
            left = deadline - time.monotonic()
            if left <= 0:
                raise PeerSilent(self.rank, neighbour, self._shared.peer_timeout)
            try:
                return box.get(timeout=min(left, WAIT_SLICE_SECONDS))
            except queue.Empty:
                continue

    def gather_to_root(self, obj: Any) -> list[Any] | None:
        self._shared.gathered[self.rank] = obj
        self._wait_all()
        result = list(self._shared.gathered) if self.rank == 0 else None
        self._wait_all()
        return result

    def _wait_all(self) -> None:
        try:
            self._shared.barrier.wait(timeout=self._shared.peer_timeout)
        except threading.BrokenBarrierError:
            if self._shared.stop.is_set():
                raise Stopped(f"machine {self.rank} stopped: another machine failed") from None
            raise PeerSilent(self.rank, None, self._shared.peer_timeout) from None


def run_in_process(
    graph: nx.Graph,
    target: Callable[[InProcessCommunicator], Any],
    *,
    peer_timeout: float = DEFAULT_PEER_TIMEOUT,
) -> list[Any]:
    """Run ``target(comm)`` for every node of ``graph`` in its own thread; return the results.

    The first exception raised on any machine is re-raised here (a :class:`PeerSilent` when a
    machine waited longer than ``peer_timeout`` seconds for a neighbour); the others stop at
    their next wait. A KeyboardInterrupt (Ctrl-C reaches the main thread only) stops every
    machine the same way and is re-raised. A machine that never returns (stalled) is left
    behind after a grace period: the threads are daemons. BLAS runs single-threaded meanwhile:
    the machines already are the parallelism, and BLAS worker threads spinning beside them
    slow every round down.
    """
    shared = _SharedState(graph, peer_timeout)
    size = shared.size
    results: list[Any] = [None] * size
    errors: list[tuple[int, BaseException]] = []

    def body(rank: int) -> None:
        comm = InProcessCommunicator(rank, list(graph.neighbors(rank)), shared)
        try:
            results[rank] = target(comm)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append((rank, exc))
            shared.abort()

    threads = [
        threading.Thread(target=body, args=(r,), name=f"machine-{r}", daemon=True)
        for r in range(size)
    ]
    with threadpool_limits(limits=1, user_api="blas"):
        for t in threads:
            t.start()
        try:
            _join(threads, shared)
        except KeyboardInterrupt:
            shared.abort()
            for t in threads:
                t.join(INTERRUPT_GRACE_SECONDS)
            raise
    if errors:
        real = [e for e in errors if not isinstance(e[1], Stopped)]
        rank, exc = (real or errors)[0]
        raise exc
    return results


def _join(threads: list[threading.Thread], shared: _SharedState) -> None:
    """Wait for every thread; once one failed, give the rest a grace period only."""
    give_up = None
    for t in threads:
        while t.is_alive():
            t.join(JOIN_POLL_SECONDS)  # a bare join() would not see Ctrl-C
            if shared.stop.is_set():
                give_up = give_up or time.monotonic() + FAILURE_GRACE_SECONDS
                if time.monotonic() > give_up:
                    return
