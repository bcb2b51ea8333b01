"""All J machines in one process: one thread per machine, one mailbox per directed edge; or
every machine as arrays (:class:`SimulatedWorld`).

The same round loop that runs over MPI runs here unchanged, so unit tests exercise the real
algorithm without launching ``mpiexec``; :func:`run_threads` runs the main job's whole
pipeline (set-up included) on every thread against a :class:`ThreadWorld`, as ``mpiexec`` runs
it on every rank against :class:`~dpnet.network.mpi_comm.MPISetup` and the simulated backend
once against a :class:`SimulatedWorld`.

An exchange puts the machine's buffer into its mailbox towards each neighbour and takes one
buffer from each neighbour's mailbox towards it (FIFO queues: exchanges pair up in order, as
MPI's non-overtaking messages do). Waiting has the same peer deadline as over MPI
(:class:`~dpnet.network.comm.PeerSilent`). A failure on one thread sets a stop flag, so the
others stop at their next wait instead of waiting forever.
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

from dpnet.decentralized.block import ArrayBlock, CommBlock
from dpnet.network.comm import (
    DEFAULT_PEER_TIMEOUT,
    END_STAGE,
    SETUP_STAGE,
    Deadline,
    PeerSilent,
    TrafficStats,
    answer_grace,
    flattened,
    second_wait,
)

JOIN_POLL_SECONDS = 0.2
ANSWER_POLL_SECONDS = 0.01  # how often a machine whose deadline passed looks at a late neighbour
STOP = np.empty(0)  # put in every mailbox by abort(): the receiver stops
INTERRUPT_GRACE_SECONDS = 5.0
FAILURE_GRACE_SECONDS = 1.0  # after a failure, how long the other machines get to stop


class Stopped(Exception):
    """Another machine of the in-process network failed; this one stops (not the cause)."""


class _SharedState:
    def __init__(self, size: int) -> None:
        self.size = size
        self.peer_timeout = DEFAULT_PEER_TIMEOUT
        self.mailboxes: dict[tuple[int, int], queue.SimpleQueue[np.ndarray]] = {}
        self.gathered: list[Any] = [None] * self.size
        self.scattered: list[Any] | None = None
        self.stop = threading.Event()
        self.waiting = [False] * size  # machine r is waiting on an exchange's messages
        self._arrived = 0
        self._generation = 0
        self._changed = threading.Condition()

    def connect(self, graph: nx.Graph, peer_timeout: float) -> None:
        """One mailbox per directed edge of ``graph``; exchanges wait ``peer_timeout`` s."""
        self.peer_timeout = peer_timeout
        self.mailboxes = {
            (u, v): queue.SimpleQueue() for a, b in graph.edges for u, v in ((a, b), (b, a))
        }

    def abort(self) -> None:
        """Every waiting machine wakes and raises Stopped: rendezvous are notified, and each
        mailbox gets :data:`STOP` (a receiver never waits on a deadline it cannot meet)."""
        self.stop.set()
        with self._changed:
            self._changed.notify_all()
        for box in self.mailboxes.values():
            box.put(STOP)

    def wait_all(self, rank: int, stage: str) -> None:
        """Every machine's thread reaches this point: Stopped if another failed meanwhile,
        PeerSilent after ``peer_timeout`` seconds of waiting (a :class:`Deadline`: a stopped and
        continued process does not count its stop)."""
        deadline = Deadline(self.peer_timeout)
        with self._changed:
            generation = self._generation
            self._arrived += 1
            if self._arrived == self.size:
                self._arrived, self._generation = 0, generation + 1
                self._changed.notify_all()
                return
            while self._generation == generation:
                if self.stop.is_set():
                    raise Stopped(f"machine {rank} stopped: another machine failed")
                if deadline.expired():
                    raise PeerSilent(rank, None, self.peer_timeout, stage)
                self._changed.wait(deadline.remaining())  # woken by the last arrival or abort


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
        seconds = self._shared.peer_timeout
        deadline, extended = Deadline(seconds), False
        self._shared.waiting[self.rank] = True
        try:
            for k, v in enumerate(self.neighbours):
                other = self._receive(v, deadline)
                if other is None and not extended and self._shows_waiting(v):
                    deadline, extended = Deadline(second_wait(seconds)), True
                    other = self._receive(v, deadline)
                if other is None:
                    raise PeerSilent(self.rank, v, seconds)
                if other.shape != buf.shape:
                    raise RuntimeError(
                        f"machine {v} sent a buffer of a different size to {self.rank}"
                    )
                out[k] = other
        finally:
            self._shared.waiting[self.rank] = False
        self.stats.stop(len(self.neighbours), buf.nbytes)
        return out

    def _receive(self, neighbour: int, deadline: Deadline) -> np.ndarray | None:
        """The neighbour's next message; None if ``deadline`` passes first."""
        box = self._shared.mailboxes[(neighbour, self.rank)]
        while True:
            if self._shared.stop.is_set():
                raise Stopped(f"machine {self.rank} stopped: another machine failed")
            if deadline.expired():
                return None
            try:
                message = box.get(timeout=deadline.remaining())
            except queue.Empty:
                continue  # the deadline, unless the process was stopped meanwhile
            if message is STOP:
                raise Stopped(f"machine {self.rank} stopped: another machine failed")
            return message

    def _shows_waiting(self, neighbour: int) -> bool:
        """Whether the late ``neighbour`` is found waiting on an exchange itself, or its
        message comes, within the grace: then it is not silent, only held up further along
        (:data:`~dpnet.network.comm.ANSWER_GRACE_SECONDS`)."""
        shared = self._shared
        give_up = Deadline(answer_grace(shared.peer_timeout))
        box = shared.mailboxes[(neighbour, self.rank)]
        while not (shared.waiting[neighbour] or not box.empty() or shared.stop.is_set()):
            if give_up.expired():
                return False
            shared.stop.wait(ANSWER_POLL_SECONDS)
        return True

    def gather_to_root(self, obj: Any) -> list[Any] | None:
        gathered = _allgather(self._shared, self.rank, obj, END_STAGE)
        return gathered if self.rank == 0 else None


def _allgather(shared: _SharedState, rank: int, obj: Any, stage: str) -> list[Any]:
    shared.gathered[rank] = obj
    shared.wait_all(rank, stage)
    result = list(shared.gathered)
    shared.wait_all(rank, stage)
    return result


class ThreadWorld:
    """Machine ``rank``'s view of the thread backend's set-up (the :class:`~dpnet.network.
    comm.World` of :func:`run_threads`): agreement and delivery between the machines' threads,
    then its block of the machine graph. Set-up waits have the peer deadline, as over MPI."""

    backend = "threads"
    launched_as = None  # the machine count is the job's own (--machines or the graph file)

    def __init__(self, rank: int, shared: _SharedState) -> None:
        self.rank = rank
        self.size = shared.size
        self.machines = [rank]
        self._shared = shared
        self._comm: InProcessCommunicator | None = None

    def allgather(self, items: list[Any]) -> list[Any]:
        return flattened(_allgather(self._shared, self.rank, items, SETUP_STAGE))

    def agree(self, error: str | None) -> str | None:
        errors = _allgather(self._shared, self.rank, error, SETUP_STAGE)
        return next((e for e in errors if e is not None), None)

    def scatter_from_root(self, items: list[Any] | None) -> list[Any]:
        if self.rank == 0:
            self._shared.scattered = items
        self._shared.wait_all(self.rank, SETUP_STAGE)
        assert self._shared.scattered is not None
        item = self._shared.scattered[self.rank]
        self._shared.wait_all(self.rank, SETUP_STAGE)
        return [item]

    def broadcast_from_root(self, obj: Any) -> Any:
        # every thread holds the same object: nothing is copied
        return _allgather(self._shared, self.rank, obj, SETUP_STAGE)[0]

    def block(self, graph: nx.Graph, peer_timeout: float) -> CommBlock:
        if self.rank == 0:
            self._shared.connect(graph, peer_timeout)
        self._shared.wait_all(self.rank, SETUP_STAGE)
        self._comm = InProcessCommunicator(
            self.rank, list(graph.neighbors(self.rank)), self._shared
        )
        return CommBlock(self._comm, graph)

    def gather_to_root(self, items: list[Any]) -> list[Any] | None:
        assert self._comm is not None  # after block()
        gathered = self._comm.gather_to_root(items)
        return None if gathered is None else flattened(gathered)

    def free(self) -> None:
        """Nothing to release (MPI frees its graph communicator here)."""


class SimulatedWorld:
    """Every machine of the network in this process, as arrays (the simulated backend's
    :class:`~dpnet.network.comm.World`): rank 0 of a world of one process, which has nothing to
    agree on or deliver; its block is the :class:`~dpnet.decentralized.block.ArrayBlock`."""

    rank = 0
    backend = "simulated"
    launched_as = None  # the machine count is the job's own (--machines or the graph file)

    def __init__(self, size: int) -> None:
        self.size = size
        self.machines = list(range(size))

    def agree(self, error: str | None) -> str | None:
        return error

    def allgather(self, items: list[Any]) -> list[Any]:
        return items

    def scatter_from_root(self, items: list[Any] | None) -> list[Any]:
        assert items is not None  # this process is rank 0
        return items

    def broadcast_from_root(self, obj: Any) -> Any:
        return obj

    def block(self, graph: nx.Graph, peer_timeout: float) -> ArrayBlock:
        return ArrayBlock(graph)

    def gather_to_root(self, items: list[Any]) -> list[Any]:
        return items

    def free(self) -> None:
        """Nothing to release."""


def run_in_process(
    graph: nx.Graph,
    target: Callable[[InProcessCommunicator], Any],
    *,
    peer_timeout: float = DEFAULT_PEER_TIMEOUT,
) -> list[Any]:
    """Run ``target(comm)`` for every node of ``graph`` in its own thread; return the results
    (see :func:`run_threads`; a :class:`PeerSilent` when a machine waited longer than
    ``peer_timeout`` seconds for a neighbour)."""
    shared = _SharedState(graph.number_of_nodes())
    shared.connect(graph, peer_timeout)
    return _run(
        shared,
        lambda rank: target(InProcessCommunicator(rank, list(graph.neighbors(rank)), shared)),
    )


def run_threads(
    size: int, target: Callable[[ThreadWorld], Any], peer_timeout: float = DEFAULT_PEER_TIMEOUT
) -> list[Any]:
    """Run ``target(world)`` for machines 0..size-1, each in its own thread; return the
    results.

    The first exception raised on any machine is re-raised here; the others stop at their
    next wait. A KeyboardInterrupt (Ctrl-C reaches the main thread only) stops every machine
    the same way and is re-raised. A machine that never returns (stalled) is left behind after
    a grace period: the threads are daemons. BLAS runs single-threaded meanwhile: the machines
    already are the parallelism, and BLAS worker threads spinning beside them slow every round
    down.
    """
    shared = _SharedState(size)
    shared.peer_timeout = peer_timeout  # set-up's deadline, until connect() sets the rounds'
    return _run(shared, lambda rank: target(ThreadWorld(rank, shared)))


def _run(shared: _SharedState, target: Callable[[int], Any]) -> list[Any]:
    size = shared.size
    results: list[Any] = [None] * size
    errors: list[tuple[int, BaseException]] = []

    def body(rank: int) -> None:
        try:
            results[rank] = target(rank)
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
