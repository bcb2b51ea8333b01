"""The only module that imports mpi4py: a distributed-graph communicator over the machine graph.

Every rank builds ``Create_dist_graph_adjacent`` with its sorted neighbour list as both
sources and destinations (``reorder=False``, so MPI ranks equal graph nodes). An exchange is
one non-blocking send and receive per neighbour, so a machine knows which neighbour is late.
While waiting it sleeps between ``Test`` calls instead of spinning: with more ranks than cores
a spinning rank steals the core its neighbour needs.

Peer deadline: a machine that hears nothing from a neighbour within ``peer_timeout`` seconds
raises :class:`PeerSilent` and first tells its other neighbours (a small message on a second
tag, posted once at start); a machine told so forwards it and raises
:class:`NeighbourStopped`. So both sides of a cut link stop by themselves: the machines next
to the cut by their deadline, the others within one message per hop.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time
from typing import Any

import mpi4py
import networkx as nx
import numpy as np

from dpnet.decentralized.block import CommBlock
from dpnet.errors import (
    EXIT_MACHINE_FAILED,
    EXIT_PEER_FAULT,
    failure_line,
    interrupted_exit,
    signal_exception,
)
from dpnet.network.comm import (
    DEFAULT_PEER_TIMEOUT,
    SETUP_STAGE,
    Deadline,
    NeighbourStopped,
    PeerSilent,
    TrafficStats,
    answer_grace,
    flattened,
    second_wait,
)
from dpnet.network.launcher import launched_by_open_mpi

mpi4py.rc.initialize = False  # started by start_within(): a deadline on MPI_Init too
mpi4py.rc.finalize = True
from mpi4py import MPI  # noqa: E402 - after the rc settings it reads

POLL_SECONDS = 1e-4
DATA_TAG = 1
STOP_TAG = 2
QUERY_TAG = 3  # "are you waiting too?", from a neighbour whose deadline passed
ANSWER_TAG = 4  # "yes": sent only from inside a wait
NOTHING = np.empty(0, dtype=np.int64)  # a query's and an answer's content
STOP_GRACE_SECONDS = 1.0  # how long a stopping machine waits for its stop notes to leave


WATCH_SECONDS = 0.1  # how often the start-up watchdog looks at its deadline
SIGNAL_GRACE_SECONDS = 2.0  # the least a signalled rank waits for MPI_Init; for rank 0's abort
LINE_DRAIN_SECONDS = 0.3  # how long the line is given to reach the launcher before the abort


def start_within(seconds: float, rank: int) -> None:
    """MPI_Init_thread, ended by exit 5 and one line if it has not returned within ``seconds``
    (a :class:`Deadline`) of this rank's waiting. MPI_Init waits for every rank of the world;
    a rank stopped, hung or interrupted before it kept the others there for as long (mpi4py
    calls it holding the interpreter, so nothing could end it). Called through ctypes, which
    lets go of the interpreter, so a watchdog thread can; signals reach it through the
    interpreter's wakeup file descriptor (Python runs signal handlers only once the main thread
    returns). On SIGINT / SIGTERM the rank waits up to :func:`signal_grace` for MPI_Init to
    return, and the signal's exception is raised after it, by the watchdog's note or by the
    signal's own handler as the call returns (either way the rank ends through
    :func:`end_after_signal`); if it does not return, exit 130 / 143 and one line. Nothing to
    do if MPI runs already (a test process under pytest-mpi). Call from the main thread."""
    if MPI.Is_initialized():
        return
    started = threading.Event()
    signalled: list[KeyboardInterrupt] = []
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    previous = signal.set_wakeup_fd(wake_write)

    def end(code: int, line: str) -> None:
        if rank == 0 or code == EXIT_PEER_FAULT:
            print(line, file=sys.stderr, flush=True)
        os._exit(code)

    def watchdog() -> None:
        deadline = Deadline(seconds)
        grace: Deadline | None = None  # from the signal on
        while not started.is_set():
            readable, _, _ = select.select([wake_read], [], [], WATCH_SECONDS)
            if readable and not started.is_set():
                signum = os.read(wake_read, 1)[0]
                if not signalled:  # a second signal changes nothing
                    signalled.append(signal_exception(signum))
                    grace = Deadline(signal_grace(rank))
            if started.is_set():
                return
            if grace is not None and (grace.expired() or deadline.expired()):
                end(*interrupted_exit(signalled[0]))  # the signal, not the peer deadline
            if deadline.expired():
                end(
                    EXIT_PEER_FAULT,
                    f"dpnet: machine {rank}: not every machine started MPI within {seconds:g} s "
                    "(--peer-timeout); nothing written",
                )

    guard = threading.Thread(target=watchdog, name="mpi-start-watchdog", daemon=True)
    guard.start()
    provided = ctypes.c_int()
    init = ctypes.CDLL(MPI.__file__).MPI_Init_thread  # the library mpi4py is linked to
    try:
        code = init(None, None, ctypes.c_int(MPI.THREAD_MULTIPLE), ctypes.byref(provided))
    finally:
        # the signal's own handler may raise as the call returns: the watchdog stands down
        # then too (its plain exit would end a rank of a started world without MPI_Abort)
        started.set()
        guard.join()
        signal.set_wakeup_fd(previous)
        os.close(wake_read)
        os.close(wake_write)
    if code != 0:
        raise RuntimeError(f"MPI_Init_thread failed with error code {code}")
    if signalled:
        raise signalled[0]


def signal_grace(rank: int) -> float:
    """How long a rank signalled inside MPI_Init waits for it to return: as long again as its
    start-up had taken when the signal came (since dpnet was imported: the process's own
    start-up under ``python -m dpnet.run``), at least ``SIGNAL_GRACE_SECONDS``; ranks other
    than 0 twice that, so that rank 0 ends first, with the line.

    What the wait is for: mpiexec signals every rank, and a rank still importing ends at once,
    plainly (it has no MPI to abort); MPI_Init on the others can then never return, and
    without the grace they would wait for the whole start-up deadline (``--peer-timeout``) and
    exit 5. What the grace must not do is end a rank whose MPI_Init was still going to
    return: a rank that exits plainly once MPI_Init has begun is taken for a crash by hydra,
    which kills the others (mpiexec says 9). A live peer was started with this rank and is
    doing the same work, so it reaches the end of MPI_Init within about as long as this rank
    has taken so far however loaded the host is (the rest of its MPI_Init if it was signalled
    there; its imports too if it was not signalled at all). A fixed 2 s was not: under eight CPU
    hogs on two cores one rank's MPI_Init outlasted it by seconds while the host gave each
    process a tenth of a core. The price is paid only when a peer is really gone: the job then
    ends after the start-up's length again (rank 0; twice that for the others), never after
    the start-up deadline, with the signal's exit code and line."""
    import dpnet  # the package's import time, set before anything else loads

    started_for = max(0.0, time.perf_counter() - dpnet.IMPORTED_AT)
    return max(SIGNAL_GRACE_SECONDS, started_for) * (1 if rank == 0 else 2)


def end_after_signal(code: int, line: str, rank: int) -> None:
    """End every rank of a started world after SIGINT / SIGTERM (mpiexec signals them all):
    ``line`` on stderr once, then MPI_Abort with ``code``, which ends every rank and makes the
    launcher's exit code ``code``. A rank of a started world that just exited was taken for a
    crash by the launcher (hydra), which killed the others: mpiexec then said exit 9, and a
    rank 0 killed before it printed said nothing. Rank 0 aborts at once; another rank waits
    ``SIGNAL_GRACE_SECONDS`` for rank 0's abort to end it, and aborts itself with the line if
    rank 0 was not signalled. The line has ``LINE_DRAIN_SECONDS`` to reach the launcher before
    the abort (hydra's proxy dropped it in 2 of 12 jobs whose every rank was signalled at
    once, measured; none in 20 with the wait). The rest of this rank's output (MPICH's own
    abort note) is dropped (not under Open MPI: closing the pipes its launcher reads made it
    warn). Returns (does nothing) if MPI is not running."""
    if not MPI.Is_initialized() or MPI.Is_finalized():
        return
    if rank != 0:
        time.sleep(SIGNAL_GRACE_SECONDS)
    abort_with_line(code, line)


def abort_with_line(code: int, line: str) -> None:
    """``line`` on stderr, ``LINE_DRAIN_SECONDS`` for it to reach the launcher, then
    MPI_Abort with ``code`` (this rank's later output, MPICH's own abort note, dropped)."""
    print(line, file=sys.stderr, flush=True)
    if not launched_by_open_mpi():  # Open MPI's launcher reads these pipes until the end
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, sys.stdout.fileno())
        os.dup2(quiet, sys.stderr.fileno())
    time.sleep(LINE_DRAIN_SECONDS)
    MPI.COMM_WORLD.Abort(code)


def wait_politely(request: MPI.Request, deadline: Deadline) -> bool:
    """Complete ``request`` without burning a core (Test, then sleep); False if ``deadline``
    expires first."""
    while not request.Test():
        if deadline.expired():
            return False
        time.sleep(POLL_SECONDS)
    return True


class MPICommunicator:
    """One rank's endpoint on the machine graph (rank == node id)."""

    def __init__(
        self,
        graph: nx.Graph,
        world: MPI.Intracomm | None = None,
        peer_timeout: float = DEFAULT_PEER_TIMEOUT,
    ) -> None:
        start_within(peer_timeout, 0)
        self.world = MPI.COMM_WORLD if world is None else world
        self.rank = self.world.Get_rank()
        self.size = self.world.Get_size()
        self.neighbours = sorted(int(v) for v in graph.neighbors(self.rank))
        self.graph_comm = self.world.Create_dist_graph_adjacent(
            self.neighbours, self.neighbours, reorder=False
        )
        self.peer_timeout = float(peer_timeout)
        self.stats = TrafficStats()
        self._stop_in = np.zeros((len(self.neighbours), 2), dtype=np.int64)
        self._stop_requests = [
            self.graph_comm.Irecv(self._stop_in[k], source=v, tag=STOP_TAG)
            for k, v in enumerate(self.neighbours)
        ]
        self._query_requests = [self._listen_for_query(v) for v in self.neighbours]
        self._notes_out: list[MPI.Request] = []  # queries and answers on their way

    def neighbour_exchange(self, send: np.ndarray) -> np.ndarray:
        buf = np.ascontiguousarray(send, dtype=np.float64)
        out = np.empty((len(self.neighbours), buf.size), dtype=np.float64)
        self.stats.start()
        receives = [
            self.graph_comm.Irecv(out[k], source=v, tag=DATA_TAG)
            for k, v in enumerate(self.neighbours)
        ]
        sends = [self.graph_comm.Isend(buf, dest=v, tag=DATA_TAG) for v in self.neighbours]
        requests = receives + sends
        if not self._wait_within_deadline(requests) and not (
            self._late_are_waiting(receives, requests)
            and self._wait_within_deadline(requests, second_wait(self.peer_timeout))
        ):
            late = self._late(receives)
            silent = late[0] if late else self.neighbours[0]
            self._send_stop_notes(origin=self.rank, silent=silent, skip=None)
            raise PeerSilent(self.rank, silent, self.peer_timeout)
        self.stats.stop(len(self.neighbours), buf.nbytes)
        return out

    def _wait_within_deadline(
        self, requests: list[MPI.Request], seconds: float | None = None
    ) -> bool:
        """Complete ``requests`` politely (sleeping between Tests), watching for stop notes and
        answering queries; False if ``seconds`` (default ``peer_timeout``) pass first."""
        deadline = Deadline(self.peer_timeout if seconds is None else seconds)
        while not MPI.Request.Testall(requests):
            self._check_stop_notes()
            self._answer_queries()
            if deadline.expired():
                return False
            time.sleep(POLL_SECONDS)
        return True

    def _late_are_waiting(self, receives: list[MPI.Request], requests: list[MPI.Request]) -> bool:
        """Ask each neighbour whose message is late whether it is waiting itself: True if
        every one answers, or ``requests`` complete, within the grace; a late neighbour that
        answers is not silent (:data:`~dpnet.network.comm.ANSWER_GRACE_SECONDS`)."""
        late = self._late(receives)
        heard = [self.graph_comm.Irecv(NOTHING, source=v, tag=ANSWER_TAG) for v in late]
        self._notes_out += [self.graph_comm.Isend(NOTHING, dest=v, tag=QUERY_TAG) for v in late]
        give_up = Deadline(answer_grace(self.peer_timeout))
        while not (answered := MPI.Request.Testall(heard) or MPI.Request.Testall(requests)):
            self._check_stop_notes()
            self._answer_queries()
            if give_up.expired():
                break
            time.sleep(POLL_SECONDS)
        for request in heard:  # an answer that comes later is never taken for a later one
            if not request.Test():
                request.Cancel()
                request.Wait()
        return answered

    def _late(self, receives: list[MPI.Request]) -> list[int]:
        """The neighbours whose message of ``receives`` has not come."""
        return [v for v, r in zip(self.neighbours, receives, strict=True) if not r.Test()]

    def _listen_for_query(self, neighbour: int) -> MPI.Request:
        return self.graph_comm.Irecv(NOTHING, source=neighbour, tag=QUERY_TAG)

    def _answer_queries(self) -> None:
        """Answer each neighbour that asked whether this machine is waiting (it is: only
        waits call this)."""
        for k in MPI.Request.Testsome(self._query_requests) or ():  # one call for all
            v = self.neighbours[k]
            self._notes_out.append(self.graph_comm.Isend(NOTHING, dest=v, tag=ANSWER_TAG))
            self._query_requests[k] = self._listen_for_query(v)
        if self._notes_out:
            self._notes_out = [r for r in self._notes_out if not r.Test()]

    def _check_stop_notes(self) -> None:
        for k, request in enumerate(self._stop_requests):
            if request.Test():
                origin, silent = (int(x) for x in self._stop_in[k])
                neighbour = self.neighbours[k]
                self._send_stop_notes(origin=origin, silent=silent, skip=neighbour)
                raise NeighbourStopped(self.rank, neighbour, origin, silent)

    def _send_stop_notes(self, *, origin: int, silent: int, skip: int | None) -> None:
        """Tell every neighbour but ``skip`` that the job stops; wait at most a moment."""
        note = np.array([origin, silent], dtype=np.int64)
        requests = [
            self.graph_comm.Isend(note, dest=v, tag=STOP_TAG) for v in self.neighbours if v != skip
        ]
        give_up = time.monotonic() + STOP_GRACE_SECONDS
        while not MPI.Request.Testall(requests) and time.monotonic() < give_up:
            time.sleep(POLL_SECONDS)

    def gather_to_root(self, obj: Any) -> list[Any] | None:
        if not self._wait_within_deadline([self.world.Ibarrier()]):
            raise PeerSilent(self.rank, None, self.peer_timeout)
        return self.world.gather(obj, root=0)

    def free(self) -> None:
        for request in self._stop_requests + self._query_requests:
            if request != MPI.REQUEST_NULL:
                request.Cancel()
                request.Wait()
        self.graph_comm.Free()


class MPISetup:
    """Set-up and reporting traffic on COMM_WORLD (outside the algorithm's rounds): the
    :class:`~dpnet.network.comm.World` of the MPI backend, a machine per rank."""

    backend = "mpi"

    def __init__(self, peer_timeout: float = DEFAULT_PEER_TIMEOUT, rank: int = 0) -> None:
        start_within(peer_timeout, rank)
        self.world = MPI.COMM_WORLD
        self.rank = self.world.Get_rank()
        self.size = self.world.Get_size()
        self.machines = [self.rank]
        self.launched_as = f"mpiexec started {self.size} ranks, one per machine"
        self.peer_timeout = peer_timeout
        self._comm: MPICommunicator | None = None

    def _all_here(self) -> None:
        """Every rank reaches this step of set-up, within ``peer_timeout`` seconds of this
        one's waiting (PeerSilent otherwise): the blocking collective that follows then
        completes at once, and a rank stopped or hung before it ends the job (exit 5)."""
        if not wait_politely(self.world.Ibarrier(), Deadline(self.peer_timeout)):
            raise PeerSilent(self.rank, None, self.peer_timeout, SETUP_STAGE)

    def block(self, graph: nx.Graph, peer_timeout: float) -> CommBlock:
        self._comm = MPICommunicator(graph, self.world, peer_timeout=peer_timeout)
        return CommBlock(self._comm, graph)

    def gather_to_root(self, items: list[Any]) -> list[Any] | None:
        assert self._comm is not None  # after block()
        gathered = self._comm.gather_to_root(items)
        return None if gathered is None else flattened(gathered)

    def free(self) -> None:
        assert self._comm is not None  # after block()
        self._comm.free()

    def agree(self, error: str | None) -> str | None:
        """Every rank learns the first error any rank met during set-up (None if none)."""
        self._all_here()
        errors = self.world.allgather(error)
        return next((e for e in errors if e is not None), None)

    def allgather(self, items: list[Any]) -> list[Any]:
        self._all_here()
        return flattened(self.world.allgather(items))

    def scatter_from_root(self, items: list[Any] | None) -> list[Any]:
        self._all_here()
        return [self.world.scatter(items, root=0)]

    def broadcast_from_root(self, obj: Any) -> Any:
        self._all_here()
        return self.world.bcast(obj, root=0)


def install_abort_hook() -> None:
    """An uncaught exception on any rank prints one line and aborts every rank (exit 1).
    The line gets the drain of :func:`abort_with_line`: aborting at once lost it in CI."""

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        abort_with_line(EXIT_MACHINE_FAILED, failure_line(MPI.COMM_WORLD.Get_rank(), exc))

    sys.excepthook = hook
