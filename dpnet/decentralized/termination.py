r"""Network-wide statistics for the stop decision, with messages of constant size.

Every machine needs the same network-wide numbers (sum of the objective parts, largest
residual, largest ||theta||) in the same round, to stop (and to change c) together, using
neighbour messages only. A breadth-first spanning tree T of the graph, rooted at machine 0
(the graph is public, so every machine builds the same T; height H = eccentricity of 0 <= D),
pipelines one wave per round:

- **up**: machine v at depth d has aggregation height h_v = H - d. The message it sends in
  round r carries U_v(r) = its own statistics of round r - 1 - h_v combined with its children's
  U received in round r - 1, which cover the same round (children have height h_v - 1). So
  U_v(r) aggregates v's subtree for round r - 1 - h_v, and at the end of round r the root
  combines its children's U(r) with its own statistics into G(r - H), the whole network's.
- **down**: the root sends (s, G(s)) in the next round; every machine forwards what its
  parent sent, one round later per level. At the end of round r machine v at depth d knows
  G(r - H - d), hence G(r - 2H) everywhere: every machine acts on G(r - 2H) at the end of
  round r, the same numbers in the same round (for H = 0, G(r) at once).

Each message adds 2K + 1 floats (K statistics up, the round index and K statistics down) to
theta, independent of the number of machines and of the diameter. Combining: sums for the
objective, maxima (NaN-propagating) for the others; rounds before the first are neutral.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import networkx as nx
import numpy as np

from dpnet.decentralized._compiled import compiled, entry

STAT_NAMES = ("objective_part", "scaled_residual", "primal_residual", "dual_residual", "coef_norm")
N_STATS = len(STAT_NAMES)
_IS_SUM = np.array([True, False, False, False, False])
NEUTRAL = np.where(_IS_SUM, 0.0, -np.inf)
MESSAGE_SIZE = 2 * N_STATS + 1


def combine(own: np.ndarray, children: np.ndarray) -> np.ndarray:
    """Aggregate a statistics vector with the rows of ``children`` (k x K, k >= 0): sums for
    the objective, added in row order after ``own``; maxima (NaN wins) otherwise."""
    if not len(children):
        return own
    return _combine(own, np.ascontiguousarray(children), _IS_SUM)


@entry
@compiled
def _combine(own: np.ndarray, children: np.ndarray, is_sum: np.ndarray) -> np.ndarray:
    """:func:`combine`, compiled (a round's statistics on every machine)."""
    total = own.copy()
    for i in range(children.shape[0]):
        for a in range(len(own)):
            value, kept = children[i, a], total[a]
            if is_sum[a]:
                total[a] = kept + value
            elif value != value or kept != kept:
                total[a] = value + kept  # NaN
            elif value > kept:
                total[a] = value
    return total


@dataclass(frozen=True)
class TreePlan:
    """Machine ``rank``'s place in the BFS tree of the graph rooted at machine 0."""

    rank: int
    parent: int | None
    children: tuple[int, ...]
    depth: int
    height: int  # H: the tree's height (eccentricity of machine 0)

    @property
    def drift(self) -> int:
        """A bound on how many rounds two machines can be apart: their distance, at most the
        diameter D <= 2H."""
        return 2 * self.height

    @property
    def lag(self) -> int:
        """Rounds between a round's statistics and the common decision on them: 2H."""
        return 2 * self.height


def bfs_tree(graph: nx.Graph) -> tuple[list[int], dict[int, int | None], dict[int, int]]:
    """(visit order, parent, depth) of the BFS tree from node 0, neighbours in sorted order:
    a node's children are visited in increasing order, right after one another."""
    depth = {0: 0}
    parent: dict[int, int | None] = {0: None}
    order = [0]
    adjacency, n_nodes = graph.adj, graph.number_of_nodes()
    for u in order:
        if len(order) == n_nodes:  # every node placed: the rest of the walk adds none
            break
        for v in sorted(adjacency[u]):
            if v not in depth:
                depth[v], parent[v] = depth[u] + 1, u
                order.append(v)
    return order, parent, depth


def tree_plan(graph: nx.Graph, rank: int) -> TreePlan:
    """The same BFS tree on every machine (:func:`bfs_tree`)."""
    _, parent, depth = bfs_tree(graph)
    children = tuple(v for v in sorted(graph.neighbors(rank)) if parent.get(v) == rank)
    return TreePlan(rank, parent[rank], children, depth[rank], max(depth.values()))


class TreeAggregator:
    """One machine's part of the pipelined up/down waves (see the module docstring)."""

    def __init__(self, plan: TreePlan, neighbours: list[int]) -> None:
        self.plan = plan
        slot = {v: k for k, v in enumerate(neighbours)}
        self._child_slots = np.array([slot[c] for c in plan.children], dtype=np.intp)
        self._parent_slot = None if plan.parent is None else slot[plan.parent]
        self._own: deque[np.ndarray] = deque(maxlen=plan.height - plan.depth + 1)
        # the children's U, one row each in the order of plan.children
        self._children_up = np.tile(NEUTRAL, (len(plan.children), 1))
        self._down = (0.0, NEUTRAL.copy())  # (round index, G) to forward
        self._known: dict[int, np.ndarray] = {}
        self._next_up: np.ndarray | None = None  # the root's next U, known from receive

    def outgoing(self, out: np.ndarray | None = None) -> np.ndarray:
        """The statistics part of this round's message: [U (K), down index, down G (K)],
        written into ``out`` (of size :data:`MESSAGE_SIZE`) if given."""
        up = self._next_up
        if up is None:
            h = self.plan.height - self.plan.depth
            # own statistics of round r - 1 - h: the oldest kept once the deque is full
            own = self._own[0] if len(self._own) == h + 1 else NEUTRAL
            up = combine(own, self._children_up)
        if out is None:
            out = np.empty(MESSAGE_SIZE)
        index, down = self._down
        out[:N_STATS] = up
        out[N_STATS] = index
        out[N_STATS + 1 :] = down
        return out

    def receive(self, round_: int, own_stats: np.ndarray, received: np.ndarray) -> None:
        """End of round ``round_``: this machine's statistics and the neighbours' parts."""
        self._own.append(own_stats)
        if len(self._child_slots):  # a leaf keeps its empty (0, K) rows
            self._children_up = received[self._child_slots, :N_STATS]
        if self._parent_slot is None:  # the root completes the wave of round r - H
            total = combine(self._own[0], self._children_up)  # own of round r - H
            s = round_ - self.plan.height
            self._down = (float(s), total)
            self._known[s] = total
            # once the deque is full, the next outgoing combines the same two: its U
            self._next_up = total if len(self._own) == self._own.maxlen else None
        else:
            part = received[self._parent_slot, N_STATS:]
            index = int(part[0])
            self._down = (float(index), part[1:])
            self._known[index] = part[1:]
        self._known.pop(round_ - self.plan.lag - 1, None)

    def state(self) -> dict[str, np.ndarray]:
        """Everything the waves carry between rounds, as arrays (for checkpoints)."""
        known = sorted(self._known)
        return {
            "own": np.array(list(self._own)).reshape(-1, N_STATS),
            "children_up": self._children_up.copy(),
            "down": np.concatenate([[self._down[0]], self._down[1]]),
            "known_rounds": np.array(known, dtype=np.int64),
            "known": np.array([self._known[r] for r in known]).reshape(-1, N_STATS),
        }

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Continue from :meth:`state` (of the same machine in the same graph)."""
        self._own.clear()
        self._own.extend(np.array(row) for row in state["own"])
        children_up = np.array(state["children_up"], dtype=float).reshape(-1, N_STATS)
        if len(children_up) != len(self.plan.children):
            raise ValueError("the stored statistics are not of this machine's tree")
        self._children_up = children_up
        self._down = (float(state["down"][0]), np.array(state["down"][1:]))
        self._known = {
            int(r): np.array(row)
            for r, row in zip(state["known_rounds"], state["known"], strict=True)
        }
        self._next_up = None

    def network_stats(self, round_: int) -> np.ndarray | None:
        """G(s) for s = round_ - 2H, identical on every machine; None before round 1."""
        s = round_ - self.plan.lag
        return self._known.get(s) if s >= 1 else None


def warm_up() -> None:
    """Compile :func:`combine`'s kernel (or load it from numba's on-disk cache)."""
    combine(NEUTRAL, NEUTRAL[None, :])
