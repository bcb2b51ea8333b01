"""Communication written once, run twice: inside an MPI world (pytest-mpi) and on the
in-process communicator.

    mpiexec -n 5 python -m pytest --with-mpi -m mpi tests/test_comm_world.py

runs the ``mpi``-marked tests on COMM_WORLD (5 ranks = the paper's 5-machine graph); the
plain ``python -m pytest`` runs the same checks on threads. Each check takes a communicator
and returns what it observed, so both backends are held to the same assertions.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from dpnet.data import make_group_logistic
from dpnet.decentralized import ADMMConfig, GroupStructure, LocalData, run_machine
from dpnet.network import build_topology, run_in_process
from dpnet.penalties import groups_from_labels

LAM = 0.1


def _graph(size: int) -> nx.Graph:
    return build_topology("paper5" if size == 5 else "ring", size)


def check_exchange(comm) -> None:
    """Every machine receives exactly its sorted neighbours' buffers, in order."""
    send = np.array([comm.rank, 10.0 * comm.rank, -1.0])
    received = comm.neighbour_exchange(send)
    expected = np.array([[v, 10.0 * v, -1.0] for v in comm.neighbours])
    np.testing.assert_array_equal(received, expected.reshape(len(comm.neighbours), 3))
    assert comm.stats.messages_sent == len(comm.neighbours)
    assert comm.stats.bytes_sent == len(comm.neighbours) * send.nbytes


def _machine_data(rank: int, size: int) -> tuple[LocalData, GroupStructure]:
    data = make_group_logistic(60 * size, rng=np.random.default_rng(9))
    idx = np.array_split(np.arange(data.n_samples), size)[rank]
    grp_ptr, grp_indices = groups_from_labels(data.groups)
    X_aug = np.hstack([data.X[idx], np.ones((len(idx), 1))])
    thresholds = LAM * np.ones(data.n_groups) / (2.0 * size)
    return (
        LocalData(X_aug, data.y[idx], data.n_samples),
        GroupStructure(grp_ptr, grp_indices, thresholds),
    )


def check_round_loop(comm, graph: nx.Graph) -> tuple[np.ndarray, int, str]:
    """The ADMM round loop: same stop round and reason on every machine."""
    data, groups = _machine_data(comm.rank, comm.size)
    result = run_machine(comm, data, groups, ADMMConfig(lam=LAM, tol=1e-8, max_rounds=2000), graph)
    return result.z, result.rounds, result.stop_reason


def _inprocess(size: int, check, *args):
    graph = _graph(size)
    return run_in_process(graph, lambda comm: check(comm, *args)), graph


# ------------------------------------------------------------------ in-process (plain pytest)


@pytest.mark.parametrize("size", [5, 8])
def test_exchange_inprocess(size):
    _inprocess(size, check_exchange)


def test_round_loop_inprocess():
    graph = _graph(5)
    results = run_in_process(graph, lambda comm: check_round_loop(comm, graph))
    assert {r[1] for r in results} == {results[0][1]} and results[0][2] == "converged"


# ------------------------------------------------------------------ MPI world (--with-mpi)


@pytest.mark.mpi(min_size=2)
def test_exchange_mpi():
    from mpi4py import MPI

    from dpnet.network import MPICommunicator

    comm = MPICommunicator(_graph(MPI.COMM_WORLD.Get_size()))
    try:
        check_exchange(comm)
    finally:
        comm.free()


@pytest.mark.mpi(min_size=2)
def test_round_loop_mpi_equals_inprocess_bitwise():
    from mpi4py import MPI

    from dpnet.network import MPICommunicator

    size = MPI.COMM_WORLD.Get_size()
    graph = _graph(size)
    comm = MPICommunicator(graph)
    # one BLAS thread, as every backend runs a machine (run_mpi_backend, run_in_process): LAPACK's
    # inverse of the kept Newton matrix (dpotri) rounds differently on two threads
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            z, rounds, reason = check_round_loop(comm, graph)
    finally:
        comm.free()
    everyone = MPI.COMM_WORLD.allgather((z, rounds, reason))
    reference = run_in_process(graph, lambda c: check_round_loop(c, graph))
    for (z_mpi, r_mpi, s_mpi), (z_ip, r_ip, s_ip) in zip(everyone, reference, strict=True):
        assert (r_mpi, s_mpi) == (r_ip, s_ip) == (rounds, "converged")
        np.testing.assert_array_equal(z_mpi, z_ip)


@pytest.mark.mpi(min_size=2)
def test_setup_agreement_on_comm_world():
    """An error met on one rank during set-up reaches every rank; ranks with different
    settings are named."""
    from mpi4py import MPI

    from dpnet.cli.pipeline import settings_mismatch
    from dpnet.network import MPISetup

    world = MPISetup()
    last = world.size - 1
    assert world.agree(None) is None
    assert (
        world.agree("broken on the last rank" if world.rank == last else None)
        == "broken on the last rank"
    )
    configs = world.allgather([{"lam": 0.2 if world.rank == last else 0.1, "tol": 1e-9}])
    assert settings_mismatch(configs) == (
        f"rank {last} was started with other settings than rank 0 (--lam: 0.2 vs 0.1); "
        "every rank needs the same options"
    )
    assert MPI.COMM_WORLD.allreduce(1) == world.size
