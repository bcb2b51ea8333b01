"""Ctrl-C (SIGINT) and SIGTERM at every moment of a run, imports and MPI start-up included:
exit 130 / 143, one line (from rank 0), no traceback, no process left.

Before the first ~30 ms the Python interpreter itself is starting (its ``site`` module, before
any dpnet code): a signal there is Python's own (docs/cli.md, "Exit codes"); the moments below start
after it. They cover the imports (numpy, scipy, networkx: ~0.1-1 s), MPI_Init, set-up, rounds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.launch import (
    after_signal_to_mpiexec,
    finish_job,
    job_lines,
    load_factor,
    processes_left,
    rank_pids,
    start_job,
)

# a job that runs until the signal however loaded the host (a missed signal: finish_job's
# timeout): c fixed and small, so no residual reaches the tolerance
LONG_RUN = ["--max-rounds", "1000000", "--tol", "1e-300", "--no-adapt-c", "--c", "1e-6"]
LONG_RUN += ["--epsilon", "inf", "--quiet"]
EXPECTED = {
    signal.SIGINT: (130, "dpnet: interrupted: every machine stopped"),
    signal.SIGTERM: (143, "dpnet: terminated (SIGTERM): every machine stopped"),
}


def _interrupted(tmp_path, n_ranks, signum, after):  # noqa: ANN001, ANN202
    out = tmp_path / "r.json"
    job = start_job([*LONG_RUN, "--output", str(out)], n_ranks=n_ranks)
    time.sleep(after * load_factor())  # the same phase of the job on a loaded host
    job.proc.send_signal(signum)  # to python, or to mpiexec, which forwards it to every rank
    done = finish_job(job, 60)
    return done, out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
@pytest.mark.parametrize(
    "after", [0.1, 0.4, 1.0, pytest.param(2.0, marks=pytest.mark.slow)]
)  # the job runs until the signal: 2 s of rounds each, the latest moment in the full suite
def test_inprocess_signal_at_any_moment(tmp_path, signum, after) -> None:  # noqa: ANN001
    done, out = _interrupted(tmp_path, None, signum, after)
    code, line = EXPECTED[signum]
    assert (done.returncode, done.stderr.strip()) == (code, line), done.stderr
    assert not out.exists()


@pytest.mark.mpi_launch
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
@pytest.mark.parametrize("after", [0.3, 0.6, 1.5, 2.5])  # 4 interpreters on 2 cores start slower
def test_mpi_signal_at_any_moment(tmp_path, signum, after) -> None:  # noqa: ANN001
    """Under mpiexec a SIGINT at 0.1-1 s gave rc 11 with tracebacks and 'Segmentation fault'
    (19 of 26 tries) and once a hang (a rank swallowed the interrupt inside importlib and
    waited alone in MPI_Init)."""
    done, out = _interrupted(tmp_path, 4, signum, after)
    expected = after_signal_to_mpiexec(*EXPECTED[signum])
    assert (done.returncode, job_lines(done.stderr)) == expected, done.stderr
    assert not out.exists() and processes_left(done.session) == []


def test_an_unexpected_exception_outside_the_machines_is_one_line(monkeypatch, capsys) -> None:  # noqa: ANN001
    """Outside the machines (whose faults are MachineFailure lines) a bug in the job's own code
    was a traceback; the entry point turns it into the one line of a failed machine, exit 1."""
    import dpnet.cli.command
    from dpnet.run import entry

    def broken(**_: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(dpnet.cli.command, "main", broken)
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as ended:
            entry()
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])
    assert ended.value.code == 1
    assert capsys.readouterr().err == "dpnet: rank 0 failed: RuntimeError: a bug\n"


@pytest.mark.mpi_launch
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
@pytest.mark.parametrize("ranks", [(2,), (0, 1, 2, 3)], ids=["rank-2", "every-rank"])
def test_mpi_signal_to_ranks_in_rounds(tmp_path, signum, ranks) -> None:  # noqa: ANN001
    """A rank that left a started world by exiting was taken for a crash by hydra, which
    killed the others: mpiexec said exit 9 and rank 0 printed nothing (CI: 1 in ~10 Ctrl-Cs of
    the whole job, when one rank ended before the others). Signalled alone, a rank ends the
    job through MPI_Abort with the signal's code and the line. Every rank signalled (a
    scheduler that signals every task; what docs/mpi.md tells an Open MPI user to do instead of
    signalling its mpiexec, which ends the job on its own): the same."""
    out = tmp_path / "r.json"
    job = start_job([*LONG_RUN[:-1], "--progress-every", "1", "--output", str(out)], n_ranks=4)
    assert job.proc.stderr is not None
    for progress in job.proc.stderr:
        if progress.startswith("round    10"):
            break
    pids = rank_pids(job)
    for rank in ranks:
        os.kill(pids[rank], signum)
    done = finish_job(job, 60)
    said = [line for line in job_lines(done.stderr) if not line.startswith("round ")]
    code, line = EXPECTED[signum]
    assert (done.returncode, said) == (code, [line]), done.stderr[-2000:]
    assert done.stdout == "" and not out.exists() and processes_left(done.session) == []


# The stand-in libmpi of the scripts below (mpi_comm loads libmpi through ctypes.CDLL): its
# MPI_Init_thread is signalled (SIGTERM) as it starts and returns INIT_TAKES s later.
_STAND_IN_MPI = """
class Library:
    def __init__(self, path):
        pass

    @staticmethod
    def MPI_Init_thread(*args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(INIT_TAKES)
        return 0

mpi_comm.ctypes.CDLL = Library
"""


# A stand-in MPI_Init_thread, in a process of its own: SIGTERM arrives while it waits, and the
# signal handler entry() installs raises Terminated when the call returns (here: from inside
# the wait, as Python runs handlers after an interrupted sleep). The watchdog must then stand
# down: the rank ends through end_after_signal (MPI_Abort in a started world), not by the
# watchdog's plain exit a grace later, which hydra takes for a crash (it killed the others and
# mpiexec said exit 9: seen once in tests/test_chaos.py's terminate-in-start-up case).
_INIT_RETURNS_SIGNALLED = (
    """
import os, signal, time
from dpnet.errors import Terminated
from dpnet.network import mpi_comm
from dpnet.run import _raise_signal

INIT_TAKES = 0.3
"""
    + _STAND_IN_MPI
    + """
signal.signal(signal.SIGTERM, _raise_signal)
try:
    mpi_comm.start_within(60.0, rank=0)
except Terminated:
    time.sleep(2 * mpi_comm.SIGNAL_GRACE_SECONDS)
    print("the rank's own exit is still to come")
"""
)


def test_a_signal_raised_as_mpi_init_returns_leaves_the_rank_to_its_own_ending() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INIT_RETURNS_SIGNALLED], capture_output=True, text=True, timeout=300
    )
    assert (done.returncode, done.stdout) == (0, "the rank's own exit is still to come\n"), (
        done.stderr
    )


# A stand-in MPI_Init_thread that takes ``sys.argv[2]`` s (forever: "inf") after the SIGTERM
# that arrives as it starts, in a rank whose start-up had taken ``sys.argv[1]`` s. The signal's
# Python handler does nothing here (a rank inside the C call of MPI_Init runs no handler before
# the call returns; a raising handler would end this Python stand-in early, whenever the
# watchdog thread took the signal first): what the rank learns, it learns from the watchdog.
_SLOW_INIT = (
    """
import os, signal, sys, time
import dpnet
from dpnet.errors import Terminated
from dpnet.network import mpi_comm

started_for, init_takes, peer_timeout = (float(a) for a in sys.argv[1:4])
dpnet.IMPORTED_AT = time.perf_counter() - started_for
INIT_TAKES = init_takes if init_takes < 1e9 else 3600
"""
    + _STAND_IN_MPI
    + """
signal.signal(signal.SIGTERM, lambda signum, frame: None)
try:
    mpi_comm.start_within(peer_timeout, rank=0)
except Terminated:
    print("MPI_Init returned")
"""
)


def _slow_init(cwd, started_for: float, init_takes: float, peer_timeout: float = 600.0):  # noqa: ANN001, ANN202
    """Run _SLOW_INIT in ``cwd`` (away from any checkout; dpnet from PYTHONPATH)."""
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    began = time.monotonic()
    args = [str(started_for), str(init_takes), str(peer_timeout)]
    done = subprocess.run(
        [sys.executable, "-c", _SLOW_INIT, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )
    return done, time.monotonic() - began


def test_a_signalled_rank_waits_for_an_mpi_init_as_slow_as_its_start_up(tmp_path) -> None:  # noqa: ANN001
    """Under eight CPU hogs a rank's MPI_Init outlasted the fixed 2 s grace: rank 0 exited
    plainly, hydra killed the others and mpiexec said 9 instead of 130. The grace is as long
    again as the rank's start-up (20 s here): an MPI_Init that returns 4 s after the signal
    (twice the old grace) is waited for, and the rank ends through end_after_signal."""
    done, _ = _slow_init(tmp_path, started_for=20.0, init_takes=4.0)
    assert (done.returncode, done.stdout, done.stderr) == (0, "MPI_Init returned\n", "")


def test_a_signalled_rank_whose_mpi_init_never_returns_ends_after_its_grace(tmp_path) -> None:  # noqa: ANN001
    """A peer gone (it left during its imports): the grace still ends the rank, with the
    signal's code and line, after at least its start-up's length again."""
    done, took = _slow_init(tmp_path, started_for=3.0, init_takes=float("inf"))
    code, line = EXPECTED[signal.SIGTERM]
    assert (done.returncode, done.stdout, done.stderr.strip()) == (code, "", line)
    assert took >= 3.0


def test_the_grace_ends_at_the_start_up_deadline_with_the_signals_code(tmp_path) -> None:  # noqa: ANN001
    """The grace never outlasts --peer-timeout's deadline on MPI's start-up, and a rank
    signalled before it ends with the signal's code and line, not 5."""
    done, took = _slow_init(tmp_path, started_for=300.0, init_takes=float("inf"), peer_timeout=1.0)
    code, line = EXPECTED[signal.SIGTERM]
    assert (done.returncode, done.stdout, done.stderr.strip()) == (code, "", line)
    assert took < 60.0  # the 300 s grace did not run


# A module whose initialization, like a pybind11 extension's (scipy's, loaded on first use in
# the job), turns an exception raised inside it into ImportError: a signal arriving there ends
# the job at once, as during the imports, not as a machine failure.
_SIGNAL_DURING_AN_IMPORT = """
import signal, sys, time
from dpnet.run import _raise_signal

sys.path.insert(0, sys.argv[1])
signal.signal(signal.SIGINT, _raise_signal)
import wraps_errors
print("the job went on")
"""

_WRAPS_ERRORS = """
import signal
try:
    signal.raise_signal(signal.SIGINT)
    done = sum(range(100_000))
except BaseException as exc:
    raise ImportError("initialization failed") from exc
"""


def test_a_signal_during_an_import_ends_the_job_at_once(tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "wraps_errors.py").write_text(_WRAPS_ERRORS)
    done = subprocess.run(
        [sys.executable, "-c", _SIGNAL_DURING_AN_IMPORT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = (done.returncode, done.stdout, done.stderr.strip())
    assert said == (130, "", EXPECTED[signal.SIGINT][1])


def test_a_signal_inside_a_compiled_kernel_is_the_interrupt() -> None:
    """numba's code calls back into Python (to box the arrays a kernel returns), where the
    handler's Terminated became ``SystemError: ... returned a result with an exception set``
    (CI: an mpiexec job signalled in its rounds ended exit 1, "rank 3 failed: SystemError");
    about half of these 40 signals landed there before the fix."""
    import threading
    from collections import Counter

    import numpy as np

    from dpnet.decentralized import _edges, compile_kernels
    from dpnet.errors import Terminated
    from dpnet.run import _raise_signal

    compile_kernels()  # as the job does before its handlers raise (a signal in LLVM's loading
    # of the cached code was "ignored on calling ctypes callback": lost)
    rng = np.random.default_rng(0)
    theta_nbhd, v_out, ptr = rng.random((4, 49)), rng.random((4, 49)), np.array([0, 4])
    theta_group, thresholds = np.append(np.repeat(np.arange(16), 3), 16), np.full(16, 0.1)
    saved = signal.signal(signal.SIGTERM, _raise_signal)
    ended: Counter[str] = Counter()
    try:
        for _ in range(40):
            timer = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGTERM))
            try:  # started inside: on a loaded host the signal can come before start returns
                timer.start()
                while True:
                    _edges.z_step(theta_nbhd, v_out, ptr, 2.0, theta_group, thresholds)
            except (Terminated, SystemError) as exc:
                ended[type(exc).__name__] += 1
            timer.join()
    finally:
        signal.signal(signal.SIGTERM, saved)
    assert ended == Counter({"Terminated": 40})


def test_a_kernel_error_that_is_no_interrupt_stays_itself() -> None:
    from dpnet.decentralized._compiled import entry

    class Dispatcher:
        def __init__(self, cause: BaseException) -> None:
            self.cause = cause

        def py_func(self) -> None:
            """The function compiled."""

        def __call__(self) -> None:
            try:
                try:
                    raise self.cause
                except BaseException as inner:
                    raise SystemError("returned a result with an exception set") from inner
            except SystemError as outer:
                raise SystemError("returned a result with an exception set") from outer

    with pytest.raises(KeyboardInterrupt):
        entry(Dispatcher(KeyboardInterrupt()))()
    with pytest.raises(SystemError) as raised:
        entry(Dispatcher(ValueError("x")))()
    assert isinstance(raised.value.__cause__.__cause__, ValueError)
