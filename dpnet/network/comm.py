"""The communicator interface every backend implements, and its traffic counters.

A communicator is one machine's endpoint: it knows its rank, the number of machines and its
sorted graph neighbours, and it can exchange one contiguous float64 buffer with every
neighbour at once. Nothing in it is global: the ADMM round loop only ever calls
:meth:`Communicator.neighbour_exchange`. ``gather_to_root`` exists for reporting after the
algorithm has finished.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass
class TrafficStats:
    """What one machine sent and how long it spent in communication calls."""

    messages_sent: int = 0
    bytes_sent: int = 0
    exchanges: int = 0
    comm_seconds: float = 0.0
    _started: float = field(default=0.0, repr=False)

    def start(self) -> None:
        self._started = time.perf_counter()

    def stop(self, degree: int, nbytes: int) -> None:
        self.comm_seconds += time.perf_counter() - self._started
        self.exchanges += 1
        self.messages_sent += degree
        self.bytes_sent += degree * nbytes

    def as_dict(self) -> dict[str, float | int]:
        return {
            "messages_sent": self.messages_sent,
            "bytes_sent": self.bytes_sent,
            "exchanges": self.exchanges,
            "comm_seconds": self.comm_seconds,
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
