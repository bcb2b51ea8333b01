"""Topologies and communicators. Only mpi_comm.py imports mpi4py.

The supported names are listed in ``__all__`` and loaded lazily from their modules on first
access (mpi_comm, and with it mpi4py, only when one of its names is asked for), so importing
the package, or one module of it, costs no more than before. The modules' other names are
internals: tests may import them from the module itself.
"""

from __future__ import annotations

from dpnet._lazy import lazy_names

_LAZY = {
    "Communicator": "comm",
    "PeerFault": "comm",
    "PeerSilent": "comm",
    "TrafficStats": "comm",
    "World": "comm",
    "run_in_process": "inprocess",
    "run_threads": "inprocess",
    "RANK_VARIABLES": "launcher",
    "launched_by_open_mpi": "launcher",
    "launcher_rank": "launcher",
    "MPICommunicator": "mpi_comm",
    "MPISetup": "mpi_comm",
    "TOPOLOGY_NAMES": "topology",
    "build_topology": "topology",
    "describe_topology": "topology",
    "laplacian_extremes": "topology",
    "neighbours": "topology",
    "validate_topology": "topology",
}

__all__ = list(_LAZY)


__getattr__ = lazy_names(__name__, _LAZY)
