"""Peer deadline: a silent neighbour stops the whole job, named, within the deadline.

A machine that goes silent (``DPNET_STALL_AT=rank:round`` makes it sleep for an hour there)
must not hang its neighbours: each waits at most ``--peer-timeout`` seconds, then every
machine stops with exit code 5, a line naming the silent neighbour and the round, nothing
written, and (under mpiexec) no process of the job left.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from dpnet.decentralized import ADMMConfig, GroupStructure, LocalData, run_machine
from dpnet.network import PeerSilent, run_in_process
from dpnet.network.comm import answer_grace
from dpnet.penalties import groups_from_labels
from tests.launch import finish_job, load_factor, run_job, session_processes, start_job

TIMEOUT = 2.0
SLACK = 6.0  # start-up and the stop itself, on 2 oversubscribed cores


def test_inprocess_exchange_names_the_silent_neighbour() -> None:
    graph = nx.path_graph(3)
    release = threading.Event()

    def machine(comm):  # noqa: ANN001, ANN202 - test body
        comm.neighbour_exchange(np.zeros(2))
        if comm.rank == 2:
            release.wait(30)  # silent in the second exchange
            return None
        return comm.neighbour_exchange(np.zeros(2))

    start = time.monotonic()
    with pytest.raises(PeerSilent) as caught:
        run_in_process(graph, machine, peer_timeout=0.5)
    release.set()
    assert caught.value.rank == 1 and caught.value.neighbour == 2
    assert "machine 1: no message from neighbour 2 within 0.5 s" in str(caught.value)
    assert time.monotonic() - start < 0.5 + SLACK


def test_inprocess_a_neighbour_that_waits_itself_is_not_named() -> None:
    """0 - 1 - 2, machine 2 silent in the second exchange, machine 1 waiting on it there,
    machine 0 on machine 1 in the third, and machine 1's wake-up at its deadline delayed (as
    a loaded host's scheduler does): machine 0's deadline passes first, on machine 1.
    Machine 1 is waiting, so it is not silent: machine 0 waits on, and machine 1 names
    machine 2."""
    graph = nx.path_graph(3)
    release = threading.Event()
    deadline = float(f"{2.0 * load_factor():.2g}")
    delay = answer_grace(deadline) / 2  # woken late, but within the grace

    def machine(comm):  # noqa: ANN001, ANN202 - test body
        comm.neighbour_exchange(np.zeros(2))
        if comm.rank == 2:
            release.wait(60)  # silent in the second exchange
            return None
        if comm.rank == 1:
            receive = comm._receive

            def woken_late(neighbour, deadline):  # noqa: ANN001, ANN202
                message = receive(neighbour, deadline)
                if message is None:
                    time.sleep(delay)
                return message

            comm._receive = woken_late
        comm.neighbour_exchange(np.zeros(2))
        return comm.neighbour_exchange(np.zeros(2))  # machine 0 waits here on machine 1

    start = time.monotonic()
    with pytest.raises(PeerSilent) as caught:
        run_in_process(graph, machine, peer_timeout=deadline)
    release.set()
    assert (caught.value.rank, caught.value.neighbour) == (1, 2), str(caught.value)
    assert time.monotonic() - start < deadline + delay + SLACK


@pytest.mark.mpi_launch
def test_mpi_a_neighbour_that_waits_itself_is_not_named() -> None:
    """The same over MPI (tests/peer_chain.py): machine 0's deadline passes first; it asks
    machine 1, which answers from its wait, so machine 0 waits on and stops on machine 1's
    note naming machine 2."""
    deadline = float(f"{2.0 * load_factor():.2g}")
    delay = answer_grace(deadline) / 2  # answered within the grace
    done = run_job([f"{deadline:g}", f"{delay:g}"], n_ranks=3, module="tests.peer_chain",
                   timeout=60 * load_factor())  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = [  # each rank's line (hydra may join two ranks' lines on one)
        "machine 0: stopping: neighbour 1 stopped (machine 1 heard nothing from machine 2)",
        f"machine 1: no message from neighbour 2 within {deadline:g} s (--peer-timeout)",
        "machine 2: silent",
    ]
    assert all(line in done.stdout for line in said), done.stdout
    assert len(re.findall(r"machine \d: ", done.stdout)) == 3, done.stdout


def test_round_loop_reports_the_round_of_the_silence() -> None:
    graph = nx.cycle_graph(4)
    rng = np.random.default_rng(0)
    ptr, idx = groups_from_labels(np.array([0, 0, 1]))
    groups = GroupStructure(ptr, idx, np.full(2, 0.01))
    shards = []
    for _ in range(4):
        X = rng.standard_normal((20, 3))
        y = np.where(rng.random(20) < 0.5, 1.0, -1.0)
        shards.append(LocalData(np.hstack([X, np.ones((20, 1))]), y, 80))
    config = ADMMConfig(max_rounds=50, stall_at=(2, 7))
    # a loaded host's rounds are slower: the deadline stretches, so only the silence trips it
    deadline = float(f"{0.5 * load_factor():.2g}")
    with pytest.raises(PeerSilent) as caught:
        run_in_process(
            graph,
            lambda comm: run_machine(comm, shards[comm.rank], groups, config, graph),
            peer_timeout=deadline,
        )
    assert caught.value.neighbour == 2 and caught.value.round == 7
    assert re.fullmatch(
        rf"machine [13]: no message from neighbour 2 in round 7 within {deadline:g} s "
        r"\(--peer-timeout\)",
        str(caught.value),
    )


def _stalled_job(tmp_path: Path, n_ranks: int | None):  # noqa: ANN202 - Completed
    out = tmp_path / "r.json"
    load = load_factor()  # a loaded host's set-up takes longer, and so does the whole job
    deadline = f"{TIMEOUT * load:.2g}"
    args = ["--n-samples", "400", "--seed", "1", "--peer-timeout", deadline]
    args += ["--quiet", "--output", str(out)]
    if n_ranks is None:
        args += ["--machines", "5"]
    start = time.monotonic()
    done = run_job(args, n_ranks=n_ranks, timeout=90 * load, env={"DPNET_STALL_AT": "2:5"})
    return done, (time.monotonic() - start) / load, out, deadline


def test_cli_inprocess_stops_with_exit_5(tmp_path: Path) -> None:
    done, wall, out, deadline = _stalled_job(tmp_path, None)
    assert done.returncode == 5, done.stderr
    assert f"no message from neighbour 2 in round 5 within {deadline} s" in done.stderr
    assert not out.exists()
    # set-up of 5 machines + the deadline, not the hour machine 2 sleeps (wall / load factor)
    assert wall < 30


@pytest.mark.mpi_launch
def test_mpi_every_rank_ends_and_none_is_left(tmp_path: Path) -> None:
    done, wall, out, _ = _stalled_job(tmp_path, 5)
    # every rank that stops says 5; mpiexec reports 9 instead when it had to SIGKILL the
    # stalled rank itself (which of the two it reports first is a race inside hydra)
    assert done.returncode in (5, 9), done.stderr
    # paper5's neighbours of machine 2 name it; machines further away stop, told or timed out
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("dpnet: machine")]
    assert any("no message from neighbour 2 in round 5" in ln for ln in lines), done.stderr
    assert not out.exists()
    assert session_processes(done.session) == []
    assert wall < 40, wall


def _wait_for(condition, seconds: float) -> None:  # noqa: ANN001
    give_up = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < give_up, "timed out waiting"
        time.sleep(0.02)


@pytest.mark.parametrize(
    "n_ranks",
    [
        pytest.param(None, marks=pytest.mark.slow),  # 6.5 s stopped (idle host), 500 rounds
        pytest.param(4, marks=pytest.mark.mpi_launch),
    ],
)
def test_a_whole_job_stopped_and_continued_finishes(tmp_path: Path, n_ranks) -> None:  # noqa: ANN001
    """Ctrl-Z, then fg, for twice the peer deadline, while the machines are in their rounds:
    no machine blames a neighbour for a stop of the whole job (the deadline counts this
    process's waiting, not the wall clock; it was exit 5 on continuing)."""
    out = tmp_path / "r.json"
    # 3 s: Open MPI's start-up alone took more than 1 s here; stretched with the host's load
    # (4 ranks on 2 busy cores can wait seconds for a neighbour that is merely not scheduled)
    deadline = 3.0 * load_factor()
    args = ["--n-samples", "400", "--seed", "1", "--peer-timeout", f"{deadline:.1f}"]
    args += ["--tol", "1e-14"]
    args += ["--max-rounds", "500", "--progress-every", "1", "--output", str(out)]
    if n_ranks is None:
        args += ["--machines", "4"]
    job = start_job(args, n_ranks=n_ranks)
    assert job.proc.stderr is not None
    for line in job.proc.stderr:  # the rounds have begun (progress lines go to stderr)
        if line.startswith("round"):
            break
    everyone = session_processes(job.marker)  # Ctrl-Z stops mpiexec and every rank
    for pid in everyone:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(2 * deadline + 0.5)
    for pid in everyone:
        os.kill(pid, signal.SIGCONT)
    done = finish_job(job, 120)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["rounds"] == 500
