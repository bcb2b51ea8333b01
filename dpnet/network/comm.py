"""The communicator interface every backend implements, its traffic counters, and the
:class:`World` a process of the main job runs on.

A communicator is one machine's endpoint: it knows its rank, the number of machines and its
sorted graph neighbours, and it can exchange one contiguous float64 buffer with every
neighbour at once. Nothing in it is global: the ADMM round loop only ever calls
:meth:`Communicator.neighbour_exchange`. ``gather_to_root`` exists for reporting after the
algorithm has finished.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from dpnet.decentralized.block import Block

DEFAULT_PEER_TIMEOUT = 60.0
"""Seconds a machine waits for a neighbour's message before it stops (``--peer-timeout``):
rounds take milliseconds, so a minute means the neighbour (or the link to it) is gone."""
ANSWER_GRACE_SECONDS = 1.0
"""Once its deadline passes, how long (at most the deadline: :func:`answer_grace`) a machine
gives each late neighbour to show that it is waiting on an exchange itself. A neighbour that
is waiting is not silent: it is held up further along the graph and names the silent machine
at its own deadline, which passed first (it started waiting up to a round earlier) unless the
scheduler woke it late, and after its own grace. So it is waited for, once, up to another
deadline and grace (:func:`second_wait`), and the machine that names a silent one is its
neighbour, also where a loaded host's scheduler delays that neighbour's deadline past a
farther machine's."""


def answer_grace(peer_timeout: float) -> float:
    """Seconds a machine whose deadline passed gives its late neighbours to answer."""
    return min(ANSWER_GRACE_SECONDS, peer_timeout)


def second_wait(peer_timeout: float) -> float:
    """Seconds a machine waits on, once, for late neighbours that answered: another deadline
    and the grace the neighbour itself gives (:data:`ANSWER_GRACE_SECONDS`)."""
    return peer_timeout + answer_grace(peer_timeout)


SETUP_STAGE = "the same step of set-up"
END_STAGE = "the end of the run"  # the final gather
TICK_SECONDS = 0.1  # how often the awake clock's ticker looks at the time
MAX_TICK_GAP_SECONDS = 0.5
"""A gap between two ticks longer than this means the process did not run (the whole job was
stopped with Ctrl-Z or SIGSTOP, its host suspended): the excess is not awake time."""


class _AwakeClock:
    """Seconds this process has been running: ``time.monotonic()`` less the time it was
    stopped, which a daemon ticker thread (started on first use) sees as gaps between its
    ticks. A gap not ticked yet (the process was just continued) counts already."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._suspended = 0.0
        self._last_tick = time.monotonic()
        self._ticker: threading.Thread | None = None

    def _pending(self, now: float) -> float:
        return max(0.0, now - self._last_tick - MAX_TICK_GAP_SECONDS)

    def _tick(self) -> None:
        while True:
            time.sleep(TICK_SECONDS)
            with self._lock:
                now = time.monotonic()
                self._suspended += self._pending(now)
                self._last_tick = now

    def now(self) -> float:
        with self._lock:
            if self._ticker is None:
                self._last_tick = time.monotonic()
                self._ticker = threading.Thread(target=self._tick, name="awake-clock", daemon=True)
                self._ticker.start()
            now = time.monotonic()
            return now - self._suspended - self._pending(now)


AWAKE_CLOCK = _AwakeClock()


class Deadline:
    """``seconds`` of this process's running time from now (:data:`AWAKE_CLOCK`): a stalled
    neighbour is detected after ``seconds`` of waiting, a whole job stopped and continued is
    not blamed on one (the stop does not count). Waits may block until :meth:`remaining` is
    over and look again: nothing needs to poll."""

    def __init__(self, seconds: float) -> None:
        self._end = AWAKE_CLOCK.now() + float(seconds)

    def remaining(self) -> float:
        return max(0.0, self._end - AWAKE_CLOCK.now())

    def expired(self) -> bool:
        return self.remaining() <= 0.0


class PeerFault(Exception):
    """The job cannot go on: a neighbour went silent or stopped. No estimate (exit code 5)."""


class PeerSilent(PeerFault):
    """Machine ``rank`` heard nothing from ``neighbour`` within ``seconds`` of an exchange,
    and the neighbour did not show it was waiting itself (:data:`ANSWER_GRACE_SECONDS`)
    (``neighbour`` None: not every machine reached ``stage``, a step of set-up or the final
    gather, in time)."""

    def __init__(
        self, rank: int, neighbour: int | None, seconds: float, stage: str = END_STAGE
    ) -> None:
        super().__init__(rank, neighbour, seconds, stage)
        self.rank, self.neighbour, self.seconds, self.stage = rank, neighbour, seconds, stage
        self.round: int | None = None  # set by the round loop, which knows it

    def __str__(self) -> str:
        if self.neighbour is None:
            hint = (
                "; raise it if loading the data takes longer" if self.stage == SETUP_STAGE else ""
            )
            return (
                f"machine {self.rank}: not every machine reached {self.stage} "
                f"within {self.seconds:g} s (--peer-timeout{hint})"
            )
        when = "" if self.round is None else f" in round {self.round}"
        return (
            f"machine {self.rank}: no message from neighbour {self.neighbour}{when} "
            f"within {self.seconds:g} s (--peer-timeout)"
        )


class NeighbourStopped(PeerFault):
    """A neighbour told machine ``rank`` that the job stops: machine ``origin`` heard
    nothing from machine ``silent`` (forwarded neighbour to neighbour)."""

    def __init__(self, rank: int, neighbour: int, origin: int, silent: int) -> None:
        super().__init__(rank, neighbour, origin, silent)
        self.rank, self.neighbour, self.origin, self.silent = rank, neighbour, origin, silent

    def __str__(self) -> str:
        return (
            f"machine {self.rank}: stopping: neighbour {self.neighbour} stopped "
            f"(machine {self.origin} heard nothing from machine {self.silent})"
        )


@dataclass
class TrafficStats:
    """What one machine sent, and the wall and CPU time it spent in communication calls.

    CPU time is the process's (an MPI rank, BLAS threads included) or, with ``per_thread``,
    the calling thread's (a machine simulated as a thread). Compute time measured on it is
    what the machine would spend on a core of its own, also when more machines than cores share
    the host (their wall time then includes waiting for a core).
    """

    messages_sent: int = 0
    bytes_sent: int = 0
    exchanges: int = 0
    comm_seconds: float = 0.0
    comm_cpu_seconds: float = 0.0
    per_thread: bool = field(default=False, repr=False)
    _started: tuple[float, float] = field(default=(0.0, 0.0), repr=False)

    def cpu_clock(self) -> float:
        """This machine's CPU seconds so far."""
        return time.thread_time() if self.per_thread else time.process_time()

    def start(self) -> None:
        self._started = (time.perf_counter(), self.cpu_clock())

    def stop(self, degree: int, nbytes: int) -> None:
        self.comm_seconds += time.perf_counter() - self._started[0]
        self.comm_cpu_seconds += self.cpu_clock() - self._started[1]
        self.exchanges += 1
        self.messages_sent += degree
        self.bytes_sent += degree * nbytes

    def reset(self) -> None:
        """Counters and times back to zero (same clock)."""
        self.messages_sent = self.bytes_sent = self.exchanges = 0
        self.comm_seconds = self.comm_cpu_seconds = 0.0

    def restore(self, saved: dict[str, float | int]) -> None:
        """Continue counting messages from a checkpoint's counters (times stay this
        process's own)."""
        self.messages_sent = int(saved["messages_sent"])
        self.bytes_sent = int(saved["bytes_sent"])
        self.exchanges = int(saved["exchanges"])

    def as_dict(self) -> dict[str, float | int]:
        return {
            "messages_sent": self.messages_sent,
            "bytes_sent": self.bytes_sent,
            "exchanges": self.exchanges,
            "comm_seconds": self.comm_seconds,
            "comm_cpu_seconds": self.comm_cpu_seconds,
        }


class Communicator(Protocol):
    """One machine's view of the network."""

    rank: int
    size: int
    neighbours: list[int]
    stats: TrafficStats

    def neighbour_exchange(self, send: np.ndarray) -> np.ndarray:
        """Send ``send`` (1-D float64) to every neighbour; return the neighbours' buffers.

        The result has shape ``(len(neighbours), send.size)``, row k from ``neighbours[k]``.
        """
        ...

    def gather_to_root(self, obj: Any) -> list[Any] | None:
        """Reporting only (after the algorithm): rank 0 gets every rank's ``obj``, others None."""
        ...


class World(Protocol):
    """A process's view of a backend around the algorithm: the machines it runs, set-up
    agreement and delivery between the processes, then its block of the machine graph. The main
    job's pipeline (:mod:`dpnet.cli.pipeline`) is written against it once; MPI
    (:class:`~dpnet.network.mpi_comm.MPISetup`: a rank per machine), threads
    (:class:`~dpnet.network.inprocess.ThreadWorld`: a thread per machine) and the simulator
    (:class:`~dpnet.network.inprocess.SimulatedWorld`: every machine in one process) implement
    it. Set-up items are per machine: a process passes one for each of its ``machines``."""

    rank: int  # this process's (rank 0 checks and releases)
    size: int  # machines of the network
    machines: list[int]  # the machines this process runs, in increasing order
    backend: str  # the results' "backend"

    @property
    def launched_as(self) -> str | None:
        """How the machine count was fixed, for error messages (read only)."""
        ...

    def agree(self, error: str | None) -> str | None:
        """Every process learns the first error any process met (None if none)."""
        ...

    def allgather(self, items: list[Any]) -> list[Any]:
        """Every machine's item (``items``: this process's machines'), in machine order."""
        ...

    def scatter_from_root(self, items: list[Any] | None) -> list[Any]:
        """This process's machines' items of rank 0's list (others pass None)."""
        ...

    def broadcast_from_root(self, obj: Any) -> Any:
        """Every process gets rank 0's ``obj`` (others pass None)."""
        ...

    def block(self, graph: Any, peer_timeout: float) -> Block:
        """This process's machines on ``graph`` (every process calls it together)."""
        ...

    def gather_to_root(self, items: list[Any]) -> list[Any] | None:
        """After :meth:`block`: rank 0 gets every machine's item in machine order, others
        None."""
        ...

    def free(self) -> None:
        """Release what :meth:`block` took (every process together)."""
        ...


def flattened(parts: list[list[Any]]) -> list[Any]:
    """Every process's list of per-machine items, in rank order, as one list."""
    return [item for part in parts for item in part]
