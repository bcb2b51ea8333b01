r"""A block of machines run by one process, and how it talks to the rest of the network.

The round loop (:func:`dpnet.decentralized.admm.run_block`) is written once, over a block: the
machines an MPI rank or a thread runs (a block of one, :class:`CommBlock`) or every machine of
the simulator (:class:`ArrayBlock`). A block holds, for each of its machines j and every i in
its closed neighbourhood Nbar_j = N_j + {j} (sorted), one directed edge (j, i), in CSR order
(:class:`BlockEdges`). What differs between backends is only:

- ``exchange(values)``: every block machine's row (k, w) in, for every edge (j, i) of the
  block the row of machine i out (E, w): a neighbour exchange over the communicator for a
  block of one, a gather for the whole network;
- the stop statistics (:class:`TreeStatistics` piggybacked on the exchange, or
  :class:`DirectStatistics` of the whole network), and ``network_sum`` (the same tree sums);
- a fault: what ``fail_at`` raises, and the clock the round's steps are timed with.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

import networkx as nx
import numpy as np

from dpnet.decentralized.termination import (
    MESSAGE_SIZE,
    N_STATS,
    NEUTRAL,
    TreeAggregator,
    bfs_tree,
    combine,
    tree_plan,
)
from dpnet.errors import MachineFailure
from dpnet.network.comm import Communicator

FLOAT_BYTES = 8
STALL_SECONDS = 3600.0  # an injected stall (fault tests): longer than any peer deadline


@dataclass(frozen=True)
class BlockEdges:
    """The directed edges (j, i), i in Nbar_j, of a block's k machines, in CSR order.

    Row r (the block's r-th machine, global id ``ids[r]``) holds ``col[ptr[r]:ptr[r+1]]`` =
    Nbar_j in increasing order; ``row[e]`` is the block row of edge e, ``degree[r]`` = d_j.
    ``rev`` (the whole network only): ``rev[e]`` is the edge (i, j) of e = (j, i).
    """

    ids: np.ndarray
    ptr: np.ndarray
    row: np.ndarray
    col: np.ndarray
    degree: np.ndarray
    rev: np.ndarray | None = None

    @classmethod
    def of(cls, graph: nx.Graph, ids: list[int] | None = None) -> BlockEdges:
        """The edges of machines ``ids`` (every machine of ``graph`` if None)."""
        n = graph.number_of_nodes()
        everyone = ids is None
        block = list(range(n)) if ids is None else ids
        cols = [sorted({int(v) for v in graph.neighbors(j)} | {j}) for j in block]
        degree = np.array([len(c) for c in cols], dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(degree)]).astype(np.int64)
        row = np.repeat(np.arange(len(block), dtype=np.int64), degree)
        col = np.concatenate(cols).astype(np.int64)
        rev = None
        if everyone:
            keys = row * n + col  # increasing: rows in order, columns sorted within a row
            rev = np.searchsorted(keys, col * n + row)
        return cls(np.array(block, dtype=np.int64), ptr, row, col, degree, rev)


class Statistics(Protocol):
    """The network-wide stop statistics of a block (termination.py has the math)."""

    width: int  # floats each machine appends to its theta message

    def outgoing(self, out: np.ndarray) -> None:
        """The statistics part of this round's messages, one row per block machine."""

    def receive(self, round_: int, own: np.ndarray, received: np.ndarray) -> None:
        """End of round ``round_``: the block's statistics (k, N_STATS), the received parts."""

    def network_stats(self, round_: int) -> np.ndarray | None:
        """G(round_ - 2H), the same on every machine; None before round 1."""

    def state(self) -> dict[str, np.ndarray]: ...

    def restore(self, state: dict[str, np.ndarray]) -> None: ...

    @property
    def lag(self) -> int: ...


@dataclass
class ExchangeCount:
    """Neighbour exchanges every machine of an :class:`ArrayBlock` made, and the floats each
    of its messages carried in total: what a real network would carry (every machine
    exchanges buffers of the same sizes in the same exchanges)."""

    exchanges: int = 0
    floats: int = 0

    def add(self, exchanges: int, floats_each: int) -> None:
        self.exchanges += exchanges
        self.floats += exchanges * floats_each

    def traffic(self, degree: int) -> dict[str, float | int]:
        """A machine's counters as :meth:`~dpnet.network.comm.TrafficStats.as_dict` (no time
        spent communicating: there is no network)."""
        return {
            "messages_sent": degree * self.exchanges,
            "bytes_sent": degree * FLOAT_BYTES * self.floats,
            "exchanges": self.exchanges,
            "comm_seconds": 0.0,
            "comm_cpu_seconds": 0.0,
        }


class Block(Protocol):
    """The machines one process runs, and their exchanges with the network."""

    edges: BlockEdges
    stats: Statistics
    clock: Callable[[], float]

    def traffic(self) -> list[dict[str, float | int]]:
        """Every block machine's traffic counters so far."""

    def reset_traffic(self) -> None:
        """Counters from zero (the final fit's, after cross-validation)."""

    def exchange(self, values: np.ndarray) -> np.ndarray:
        """(k, w) rows of the block's machines -> (E, w): for edge (j, i) machine i's row."""

    def network_sum(self, values: np.ndarray) -> np.ndarray:
        """sum over all machines of the network of their values (k, ...) -> (...)."""

    def fault(self, rank: int, round_: int) -> Exception:
        """What an injected fault of machine ``rank`` in ``round_`` raises."""

    def stall(self) -> None:
        """An injected stall: a hung machine, which its neighbours' deadlines end."""


class TreeStatistics:
    """:class:`~dpnet.decentralized.termination.TreeAggregator` of a block of one: its part of
    the spanning tree's waves, read from the neighbours' messages."""

    width = MESSAGE_SIZE

    def __init__(self, graph: nx.Graph, rank: int) -> None:
        closed = sorted({int(v) for v in graph.neighbors(rank)} | {rank})
        self._tree = TreeAggregator(tree_plan(graph, rank), closed)

    def outgoing(self, out: np.ndarray) -> None:
        self._tree.outgoing(out=out[0])

    def receive(self, round_: int, own: np.ndarray, received: np.ndarray) -> None:
        self._tree.receive(round_, own[0], received)

    def network_stats(self, round_: int) -> np.ndarray | None:
        return self._tree.network_stats(round_)

    def state(self) -> dict[str, np.ndarray]:
        return self._tree.state()

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self._tree.restore(state)

    @property
    def lag(self) -> int:
        return self._tree.plan.lag


class DirectStatistics:
    """The whole network's statistics, combined at once and applied 2H rounds later: the
    round in which the tree's waves deliver them to every machine, so the stop round and the
    reason are the waves' (the objective's sum may differ in rounding)."""

    width = 0

    def __init__(self, graph: nx.Graph, count: ExchangeCount) -> None:
        self._lag = tree_plan(graph, 0).lag
        self._pending: dict[int, np.ndarray] = {}
        self._count = count

    def outgoing(self, out: np.ndarray) -> None:
        pass

    def receive(self, round_: int, own: np.ndarray, received: np.ndarray) -> None:
        self._pending[round_] = combine(NEUTRAL, own)
        self._count.floats += MESSAGE_SIZE  # what the waves add to this round's theta message

    def network_stats(self, round_: int) -> np.ndarray | None:
        return self._pending.pop(round_ - self._lag, None)

    def state(self) -> dict[str, np.ndarray]:
        rounds = sorted(self._pending)
        return {
            "known_rounds": np.array(rounds, dtype=np.int64),
            "known": np.array([self._pending[r] for r in rounds]).reshape(-1, N_STATS),
        }

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self._pending = {
            int(r): np.array(row)
            for r, row in zip(state["known_rounds"], state["known"], strict=True)
        }

    @property
    def lag(self) -> int:
        return self._lag


class CommBlock:
    """One machine (an MPI rank's or a thread's) over its communicator."""

    def __init__(self, comm: Communicator, graph: nx.Graph) -> None:
        self.comm = comm
        self.graph = graph
        self.edges = BlockEdges.of(graph, [comm.rank])
        self.stats: Statistics = TreeStatistics(graph, comm.rank)
        self.clock = comm.stats.cpu_clock
        self._own = int(np.searchsorted(self.edges.col, comm.rank))

    def exchange(self, values: np.ndarray) -> np.ndarray:
        received = self.comm.neighbour_exchange(values[0])
        rows = np.empty((received.shape[0] + 1, values.shape[1]))
        own = self._own
        rows[:own] = received[:own]
        rows[own] = values[0]
        rows[own + 1 :] = received[own:]
        return rows

    def network_sum(self, values: np.ndarray) -> np.ndarray:
        return network_sum(self.comm, self.graph, values[0])

    def traffic(self) -> list[dict[str, float | int]]:
        return [self.comm.stats.as_dict()]

    def reset_traffic(self) -> None:
        self.comm.stats.reset()

    def fault(self, rank: int, round_: int) -> Exception:
        return RuntimeError(f"injected fault on machine {rank} in round {round_}")

    def stall(self) -> None:
        time.sleep(STALL_SECONDS)


class ArrayBlock:
    """Every machine of the network in one process, as arrays (the simulator)."""

    def __init__(self, graph: nx.Graph, edges: BlockEdges | None = None) -> None:
        if set(graph.nodes) != set(range(graph.number_of_nodes())):
            raise ValueError("the machines must be the nodes 0..J-1")
        self.graph = graph
        self.edges = BlockEdges.of(graph) if edges is None else edges
        self.count = ExchangeCount()
        self.stats: Statistics = DirectStatistics(graph, self.count)
        self.clock = time.process_time
        self._height = tree_plan(graph, 0).height

    def exchange(self, values: np.ndarray) -> np.ndarray:
        self.count.add(1, values.shape[1])
        return values[self.edges.col]

    def network_sum(self, values: np.ndarray) -> np.ndarray:
        """:func:`tree_sum`, counted as :func:`network_sum`'s 2H
        exchanges of twice the values."""
        self.count.add(2 * self._height, 2 * values[0].size)
        return tree_sum(self.graph, values)

    def traffic(self) -> list[dict[str, float | int]]:
        return [self.count.traffic(int(d) - 1) for d in self.edges.degree]

    def reset_traffic(self) -> None:
        self.count.exchanges = self.count.floats = 0

    def fault(self, rank: int, round_: int) -> Exception:
        return MachineFailure(
            rank, RuntimeError(f"injected fault on machine {rank} in round {round_}")
        )

    def stall(self) -> None:
        """Nothing: no machine waits on another's messages in one process."""


def network_sum(comm: Communicator, graph: nx.Graph, values: np.ndarray) -> np.ndarray:
    """sum_j values_j on every machine, bitwise equal everywhere, in 2H neighbour exchanges of
    2m floats (m = values.size, H = height of the BFS tree of
    :func:`~dpnet.decentralized.termination.tree_plan`).

    Each exchange carries [U, T]. U_v = own + sum of the children's U: after r exchanges it
    covers v's subtree to depth depth(v) + r, so the root's is complete after H. T is the
    root's U, passed down one level per exchange: after 2H every machine holds it.
    """
    plan = tree_plan(graph, comm.rank)
    own = np.asarray(values, dtype=float).ravel()
    m = own.size
    slot = {v: i for i, v in enumerate(comm.neighbours)}
    up, total = own.copy(), np.zeros(m)
    for _ in range(2 * plan.height):
        received = comm.neighbour_exchange(np.concatenate([up, total]))
        up = own.copy()
        for c in plan.children:
            up += received[slot[c], :m]
        total = up if plan.parent is None else received[slot[plan.parent], m:].copy()
    return (up if plan.parent is None else total).reshape(np.shape(values))


def tree_sum(graph: nx.Graph, values: np.ndarray) -> np.ndarray:
    """sum_j values[j] (values: (J, ...)) as :func:`network_sum` forms
    it on the BFS tree: every node adds its children's subtree sums to its own in increasing
    order, so the total is bitwise the one every machine of the round loop holds."""
    order, parent, _ = bfs_tree(graph)
    subtree = {v: np.asarray(values[v], dtype=float).copy() for v in order}
    children: dict[int, list[int]] = {v: [] for v in order}
    for v in order[1:]:
        children[cast(int, parent[v])].append(v)  # not the root: it has a parent
    for v in reversed(order):
        for child in children[v]:
            subtree[v] += subtree[child]
    return subtree[0]


def bytes_per_round(degree: np.ndarray, dim: int) -> np.ndarray:
    """Bytes machine j sends per round: to each of its neighbours Z (dim floats) and theta with
    the stop statistics (dim + MESSAGE_SIZE floats)."""
    return (degree - 1) * FLOAT_BYTES * (2 * dim + MESSAGE_SIZE)
