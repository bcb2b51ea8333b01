"""All J machines of the network in one process: the simulator's entry to the round loop.

:func:`run_batched` runs :func:`~dpnet.decentralized.admm.run_block` on an
:class:`~dpnet.decentralized.block.ArrayBlock` (every machine's iterates as arrays, the
exchanges gathers) and reports what a real network would carry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import networkx as nx
import numpy as np

from dpnet.decentralized.admm import ADMMConfig, BlockResult, ProgressRecord, run_block
from dpnet.decentralized.block import ArrayBlock, BlockEdges, bytes_per_round
from dpnet.decentralized.stacked import StackedShards
from dpnet.decentralized.steps import GroupStructure, LocalData


@dataclass
class BatchedResult(BlockResult):
    """The block's result (:class:`~dpnet.decentralized.admm.BlockResult`: every machine's
    iterates, the common stop round and reason, the penalty path, the history, the times) and
    the traffic a real network would carry (bytes each machine sends per round, both
    exchanges)."""

    bytes_per_round: np.ndarray  # (J,)

    @property
    def c_final(self) -> float:
        return self.penalty.final

    @property
    def n_adapted(self) -> int:
        """How often c changed."""
        return len(self.penalty.changes)

    @property
    def consensus(self) -> np.ndarray:
        """The reported model: the mean of the machines' Z."""
        return self.z.mean(axis=0)


def run_batched(
    shards: Sequence[LocalData] | StackedShards,
    groups: GroupStructure,
    config: ADMMConfig,
    graph: nx.Graph,
    on_progress: Callable[[ProgressRecord], None] | None = None,
    stop_when: Callable[[ProgressRecord], bool] | None = None,
    *,
    edges: BlockEdges | None = None,
) -> BatchedResult:
    """The ADMM for all machines of ``graph`` at once (``shards[j]`` machine j's data, or all
    of them stacked once). ``config.fail_at`` = (j, t) raises in round t as machine j would
    (fault tests)."""
    n_mach = graph.number_of_nodes()
    data = shards if isinstance(shards, StackedShards) else StackedShards.stack(shards)
    if data.X.shape[0] != n_mach or set(graph.nodes) != set(range(n_mach)):
        raise ValueError(f"need one shard per node 0..{n_mach - 1}, got {data.X.shape[0]}")
    block = ArrayBlock(graph, edges)
    dim = data.X.shape[2]
    result = run_block(
        block,
        data,
        groups,
        config,
        graph,
        on_progress,
        stop_when=stop_when,
    )
    return BatchedResult(
        **{f.name: getattr(result, f.name) for f in fields(result)},
        bytes_per_round=bytes_per_round(block.edges.degree, dim),
    )
