"""Test hook: ``mpiexec -n 3 python -m tests.peer_chain SECONDS DELAY`` runs three machines on
the path 0 - 1 - 2 over :class:`~dpnet.network.mpi_comm.MPICommunicator` with peer deadline
SECONDS: machine 2 is silent from the second exchange on, machine 1 waits on it there and
notices its deadline DELAY seconds late (as a loaded host's scheduler may wake it), machine 0
waits on machine 1 in the third exchange. Each rank prints the line its fault gives
("machine 2: silent" for the silent one, which waits at the final barrier meanwhile), then
all meet at that barrier and end. Lives in tests/: the delay is no part of the product."""

from __future__ import annotations

import sys
import time

import networkx as nx
import numpy as np

from dpnet.network.comm import PeerFault
from dpnet.network.mpi_comm import MPICommunicator


def main() -> None:
    seconds, delay = float(sys.argv[1]), float(sys.argv[2])
    comm = MPICommunicator(nx.path_graph(3), peer_timeout=seconds)
    if comm.rank == 1:
        wait = comm._wait_within_deadline

        def woken_late(requests):  # noqa: ANN001, ANN202 - the scheduler's delay
            done = wait(requests)
            if not done:
                time.sleep(delay)
            return done

        comm._wait_within_deadline = woken_late  # type: ignore[method-assign]
    try:
        comm.neighbour_exchange(np.zeros(2))
        if comm.rank == 2:
            line = "machine 2: silent"
        else:
            comm.neighbour_exchange(np.zeros(2))
            comm.neighbour_exchange(np.zeros(2))  # machine 0 waits here on machine 1
            line = f"machine {comm.rank}: no fault"
    except PeerFault as fault:
        line = str(fault)
    print(line, flush=True)
    comm.free()
    everyone = comm.world.Ibarrier()  # machine 2 waits here, silent, without spinning
    while not everyone.Test():
        time.sleep(0.01)


if __name__ == "__main__":
    main()
