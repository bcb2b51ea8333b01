"""Where and how a run ran, for its results file: the command line, the time the results
were written (UTC), the versions of Python and of dpnet's numerical and MPI libraries, the MPI
library itself, and each machine's host name. All of it is public (what the user typed and
what the machines run); none of it depends on the data."""

from __future__ import annotations

import platform
import shlex
import socket
import sys
import time
from datetime import datetime, timezone
from importlib import metadata

# dpnet's own version is the results' dpnet_version
PACKAGES = ("numpy", "scipy", "networkx", "scikit-learn", "dp-accounting", "mpi4py")


def host_name() -> str:
    """This machine's host name (a results file's ``machines[j].host``)."""
    return socket.gethostname()


def mpi_library() -> str | None:
    """The first line of the running MPI library's version string (``MPI_Get_library_version``:
    vendor and version), or None if this process runs no MPI."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized():
        return None
    return " ".join(mpi.Get_library_version().strip().splitlines()[0].split())


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def run_provenance() -> dict[str, object]:
    """The results file's ``provenance`` block (the hosts are in ``machines``)."""
    return {
        "command": shlex.join(getattr(sys, "orig_argv", sys.argv)),
        "written_utc": datetime.fromtimestamp(time.time(), timezone.utc).isoformat(
            timespec="seconds"
        ),
        "python": platform.python_version(),
        "versions": {package: _version(package) for package in PACKAGES},
        "mpi_library": mpi_library(),
    }
