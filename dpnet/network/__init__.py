"""Topologies and communicators. Only mpi_comm.py imports mpi4py."""
