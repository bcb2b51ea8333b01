"""Run ``python -m dpnet.run`` as a subprocess, under mpiexec or alone, with a hard timeout.

On timeout the whole process group (mpiexec and every rank) is killed, so a hanging job can
never outlive its test.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str
    session: int  # the job's session id: every process it started belongs to it


def session_processes(session: int) -> list[int]:
    """Pids of live processes in ``session`` (Linux /proc; zombies count as gone)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def mpiexec_path() -> str:
    """mpiexec next to this interpreter (the mpich wheel installs it into the venv)."""
    local = Path(sys.executable).with_name("mpiexec")
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if found is None:
        raise RuntimeError("mpiexec not found: install the package with its mpich dependency")
    return found


def run_job(
    args: list[str],
    *,
    n_ranks: int | None = None,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
    module: str = "dpnet.run",
    cwd: Path | None = None,
) -> Completed:
    """``[mpiexec -n N] python -m module args`` (in ``cwd``); AssertionError on timeout.

    The repository root is put on PYTHONPATH so that test hooks (``tests.*``) import from any
    working directory.
    """
    cmd = [sys.executable, "-m", module, *args]
    if n_ranks is not None:
        cmd = [mpiexec_path(), "-n", str(n_ranks), *cmd]
    root = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    full_env = {**os.environ, "PYTHONPATH": path, **(env or {})}
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        start_new_session=True,
        cwd=cwd,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"job timed out after {timeout}s: {' '.join(cmd)}\n{err}") from None
    return Completed(proc.returncode, out, err, proc.pid)
