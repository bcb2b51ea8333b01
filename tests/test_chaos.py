"""Chaos: kills, stalls and signals at chosen moments of a run (start-up, rounds, writing), on
both MPI and in-process, then ``--resume``. Every outcome must be a documented exit code with
no process left and no half-written file, and every resumed run bitwise equal to the
uninterrupted one.

The case list below is the sweep (it is rerun by CI with the suite). A moment is either a time
after launch (``after``: the imports, MPI's start-up and set-up take ~0.5-2 s) or the round
whose progress line rank 0 has printed (``at_round``, rounds 1..60); ``written`` is just after
the line saying the results were written. Documented exit codes (docs/cli.md, "Exit codes"): 1 a
machine failed, 5 a silent neighbour, 130 SIGINT, 143 SIGTERM; 0 when the run had already
finished; under mpiexec also the launcher's own code (:func:`_allowed_codes`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.launch import (
    OPEN_MPI_SIGNALLED_EXIT,
    Completed,
    Job,
    after_signal_to_mpiexec,
    finish_job,
    killed_rank_exit,
    load_factor,
    mpiexec_is_open_mpi,
    processes_left,
    rank_pids,
    run_job,
    start_job,
)

COMMON = ["--seed", "7", "--n-samples", "600", "--n-test", "200", "--tol", "1e-14"]
ROUNDS = ["--max-rounds", "60"]
PEER_TIMEOUT = 2.0  # seconds on a quiet host; stretched by the load (tests.launch.load_factor)
EVERY = ["--checkpoint-every", "5", "--progress-every", "1"]
SAME = ("coef", "intercept", "rounds", "stop_reason", "objective", "history", "test_accuracy")
MPI_RANKS = 5


@dataclass(frozen=True)
class Case:
    name: str
    mpi: bool
    action: str  # SIGKILL / SIGSTOP of one rank; SIGINT / SIGTERM of the job; "fail" injected
    rank: int | None = None  # the rank acted on (None: the job's first process)
    after: float | None = None
    at_round: int | None = None
    written: bool = False
    codes: tuple[int, ...] = ()


CASES = [
    Case("mpi-kill-rank-in-start-up", True, "SIGKILL", rank=2, after=0.8, codes=(5,)),
    Case("mpi-kill-rank-in-rounds", True, "SIGKILL", rank=3, at_round=12, codes=(5,)),
    Case("mpi-kill-rank-0-late", True, "SIGKILL", rank=0, at_round=47, codes=(5,)),
    Case("mpi-stop-rank-in-rounds", True, "SIGSTOP", rank=1, at_round=21, codes=(5,)),
    Case("mpi-stop-rank-in-start-up", True, "SIGSTOP", rank=4, after=0.5, codes=(5,)),
    Case("mpi-interrupt-in-rounds", True, "SIGINT", at_round=30, codes=(130,)),
    Case("mpi-terminate-in-start-up", True, "SIGTERM", after=1.2, codes=(143,)),
    Case("mpi-interrupt-after-writing", True, "SIGINT", written=True, codes=(0, 130)),
    Case("threads-interrupt-in-rounds", False, "SIGINT", at_round=25, codes=(130,)),
    Case("threads-terminate-in-start-up", False, "SIGTERM", after=0.4, codes=(143,)),
    Case("threads-machine-fails", False, "fail", rank=3, at_round=33, codes=(1,)),
    Case("threads-terminate-after-writing", False, "SIGTERM", written=True, codes=(0, 143)),
]


def _allowed_codes(case: Case) -> tuple[int, ...]:
    """The case's codes, or what mpiexec reports instead: for a rank it had to kill (stopped
    or killed), the killed rank's code (hydra 9, Open MPI 137); Open MPI's own exit for a
    signal to mpiexec."""
    if not case.mpi:
        return case.codes
    if case.action in ("SIGINT", "SIGTERM"):
        return (*case.codes, after_signal_to_mpiexec(case.codes[-1], "")[0])
    return (*case.codes, killed_rank_exit())


def launcher_signalled(case: Case, done: Completed) -> bool:
    """Whether Open MPI's mpiexec ended the case on a signal to itself (its own exit code)."""
    return (
        case.mpi
        and case.rank is None
        and mpiexec_is_open_mpi()
        and done.returncode == OPEN_MPI_SIGNALLED_EXIT
    )


def _args(tmp_path: Path, name: str, *extra: str, mpi: bool) -> tuple[list[str], Path]:
    out = tmp_path / f"{name}.json"
    deadline = ["--peer-timeout", f"{PEER_TIMEOUT * load_factor():.3g}"]
    args = [*COMMON, *ROUNDS, *deadline, *extra, "--output", str(out)]
    return (args if mpi else [*args, "--machines", str(MPI_RANKS)]), out


@pytest.fixture
def uninterrupted(job_report: Callable[..., dict]) -> dict:  # tests/conftest.py
    """The reference: the same run, not interrupted (in-process; the backends agree bitwise)."""
    return job_report(*COMMON, *ROUNDS, "--quiet", "--machines", str(MPI_RANKS))


def _wait_for_moment(job: Job, case: Case) -> None:
    if case.after is not None:
        # not stretched with the load: the 60-round job may end first; a loaded host's
        # start-up is slower, so the moment falls no later in it
        time.sleep(case.after)
        return
    assert job.proc.stderr is not None
    for line in job.proc.stderr:
        if case.at_round is not None and line.startswith(f"round {case.at_round:5d}"):
            return
    # stderr closed: the run ended (the results line goes to stdout; see _act_after_writing)


def _rank_pid(job: Job, rank: int) -> int:
    """The pid of MPI rank ``rank`` of ``job``, once it has started (within 20 s)."""
    pids: dict[int, int] = {}
    give_up = time.monotonic() + 20
    while rank not in pids and time.monotonic() < give_up:
        pids = rank_pids(job)
        time.sleep(0.02)
    return pids[rank]


def _act(job: Job, case: Case, pid: int | None = None) -> None:
    """Do ``case.action``: to the job, or to its rank ``case.rank`` (``pid`` if already found:
    a loaded host may take longer to find it than the job takes to end)."""
    if case.action in ("SIGINT", "SIGTERM") and case.rank is None:
        job.proc.send_signal(getattr(signal, case.action))  # python, or mpiexec (it forwards)
        return
    assert case.rank is not None
    os.kill(_rank_pid(job, case.rank) if pid is None else pid, getattr(signal, case.action))


def _act_after_writing(job: Job, case: Case) -> None:
    assert job.proc.stdout is not None
    for line in job.proc.stdout:
        if "results written to" in line:
            break
    job.proc.send_signal(getattr(signal, case.action))


def _same_run(a: dict, b: dict) -> None:
    for key in SAME:
        assert a[key] == b[key], key


@pytest.mark.mpi_launch
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_chaos_then_resume(tmp_path: Path, uninterrupted: dict, case: Case) -> None:
    ck = tmp_path / "ck"
    extra = [*EVERY, "--checkpoint", str(ck)]
    env = {"DPNET_FAIL_AT": f"{case.rank}:{case.at_round}"} if case.action == "fail" else None
    args, out = _args(tmp_path, "chaos", *extra, mpi=case.mpi)
    job = start_job(args, n_ranks=MPI_RANKS if case.mpi else None, env=env)
    if case.written:
        _act_after_writing(job, case)
    elif case.action != "fail":
        # a rank acted on in the rounds is found before the moment: the signal then follows the
        # progress line at once, not after a scan of the processes the rounds may outrun
        pid = _rank_pid(job, case.rank) if case.rank is not None and case.at_round else None
        _wait_for_moment(job, case)
        _act(job, case, pid)
    done = finish_job(job, 90)
    assert done.returncode in _allowed_codes(case), (done.returncode, done.stderr[-2000:])
    if case.action == "SIGSTOP":  # the others' deadline, naming what they waited for
        assert re.search(
            r"no message from neighbour \d+|not every machine (started MPI|reached)", done.stderr
        ), done.stderr
    assert "Traceback" not in done.stderr and "Segmentation" not in done.stderr, done.stderr
    assert processes_left(done.session) == []
    assert not list(tmp_path.glob(".*.tmp"))  # (a rank killed while checkpointing may leave one)
    # it had written the results: the whole of them (Open MPI's mpiexec, signalled, may exit
    # before its teardown reached ranks that were finishing: exit 1, the results written)
    if done.returncode == 0 or case.written or (launcher_signalled(case, done) and out.exists()):
        _same_run(json.loads(out.read_text()), uninterrupted)
        return
    assert not out.exists()  # nothing half-written
    resume_args, resumed_out = _args(
        tmp_path, "resumed", "--quiet", "--checkpoint", str(ck), "--resume", str(ck), mpi=case.mpi
    )
    # the resume is not about deadlines: 5 ranks starting on a loaded 2-core host can take
    # longer than the chaos run's deadline (the last --peer-timeout given counts)
    resume_args += ["--peer-timeout", "30"]
    again = run_job(resume_args, n_ranks=MPI_RANKS if case.mpi else None, timeout=120)
    if again.returncode == 2:  # stopped before every machine had written a checkpoint
        assert "has no checkpoint" in again.stderr, again.stderr
        return
    assert again.returncode == 0, again.stderr
    assert not list(ck.glob("machine-*/.*.tmp"))  # the resumed machines swept them
    resumed = json.loads(resumed_out.read_text())
    assert resumed["resumed_from_round"] % 5 == 0
    _same_run(resumed, uninterrupted)
