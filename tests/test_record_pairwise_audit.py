"""benchmarks/record_pairwise_audit.py builds every machine's view from the simulator's
per-round state; here those views are checked against the buffers the real round loop
(one thread per machine) receives, and the observers' reconstructions against the truth."""

from __future__ import annotations

import numpy as np

from devtools import record_pairwise_audit as audit
from dpnet.decentralized import RecordNoise, run_machine
from dpnet.network import run_in_process

ROUNDS = 8


class Recording:
    """A communicator that keeps every buffer its machine receives."""

    def __init__(self, comm) -> None:
        self._comm = comm
        self.received: list[np.ndarray] = []

    def __getattr__(self, name):
        return getattr(self._comm, name)

    def neighbour_exchange(self, send: np.ndarray) -> np.ndarray:
        out = self._comm.neighbour_exchange(send)
        self.received.append(out.copy())
        return out


def test_views_are_the_round_loops_messages_and_the_reconstructions_exact():
    shards = audit.shards_of(0)
    config = audit.admm_config(RecordNoise(4.0, audit.R, seed=5), ROUNDS)
    tr = audit.run_once(shards, config)
    views = audit.views(tr, audit.stop_messages(tr, shards, config))

    def machine(comm):
        rec = Recording(comm)
        result = run_machine(rec, shards[comm.rank], audit.GROUPS, config, audit.GRAPH)
        return rec.received, result

    loop = run_in_process(audit.GRAPH, machine)
    for k, (received, result) in enumerate(loop):
        assert len(received) == 2 * ROUNDS
        np.testing.assert_allclose(np.stack(received[0::2]), views[k]["z"], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(
            np.stack(received[1::2]), views[k]["theta_msg"], rtol=1e-7, atol=1e-9
        )
        np.testing.assert_allclose(
            np.concatenate([result.theta, result.z]), views[0]["gather"][k], rtol=1e-7, atol=1e-9
        )

    # machine 1 rebuilds u's thetas from Z_2; rank 0 rebuilds theta_2 from Z_1
    v1, v0 = views[1], views[0]
    d = audit.DIM + 1
    rebuilt_u = audit.rebuild_through(
        2, v1["z"][:, 1], v1["own"][:, :d] + v1["theta_msg"][:, 1, :d], tr.c
    )
    np.testing.assert_allclose(rebuilt_u, tr.theta[:-1, audit.U], atol=1e-9)
    rebuilt_2 = audit.rebuild_through(
        1, v0["z"][:, 0], v0["own"][:, :d] + v0["theta_msg"][:, 0, :d], tr.c
    )
    np.testing.assert_allclose(rebuilt_2, tr.theta[:-1, 2], atol=1e-9)
    np.testing.assert_array_equal(audit.replay_centers(tr.theta, tr.c), tr.center)
