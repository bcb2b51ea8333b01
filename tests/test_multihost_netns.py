"""Five hosts on one machine: the compose demo's topology from network namespaces.

``launch/netns-demo.sh`` builds the hosts of ``launch/hostfile.compose`` (launcher,
worker1..worker4): one network namespace each (own hostname, own /dev/shm, own /etc/hosts),
veths to a bridge in a namespace of its own (nothing in the root namespace, nothing leaves the
machine), a real sshd per worker, and ``launch/entrypoint.sh`` in the launcher role. MPI is
forced onto TCP (``UCX_TLS=tcp,self``): the link counters show every rank's payload on its
wire. Needs root, iproute2, util-linux and openssh-server; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.launch import load_factor, run_job
from tests.netns import Hosts, missing_requirement, namespaces_with_prefix

pytestmark = [pytest.mark.slow, pytest.mark.mpi_launch]

ARGS = ["--seed", "3", "--n-samples", "600", "--quiet"]
PEER_TIMEOUT = 4.0  # seconds on a quiet host; stretched by the load (tests.launch.load_factor)
CUT_HOST = "worker3"  # rank 3


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    reason = missing_requirement()
    if reason is not None:
        print(f"skipping the 5-host namespace tests: {reason}")
        pytest.skip(reason)
    prefix = f"dpt{os.getpid()}"
    net = Hosts(tmp_path_factory.mktemp("netns") / "state", prefix)
    try:
        net.up()
        yield net
    finally:
        net.down()
        assert namespaces_with_prefix(prefix) == [], "namespaces left behind"
        assert not list(Path("/etc/netns").glob(prefix + "-*")), "/etc/netns entries left"


def test_five_hosts_match_one_host_and_carry_the_payload_on_their_links(
    hosts: Hosts, tmp_path: Path
) -> None:
    before = hosts.counters()
    start = time.monotonic()
    job = hosts.start([*ARGS], env={"DPNET_OUTPUT": str(tmp_path / "hosts.json")})
    code = job.wait(timeout=120)
    seconds = time.monotonic() - start
    after = hosts.counters()
    assert code == 0, job.stderr
    local = run_job([*ARGS, "--output", str(tmp_path / "local.json")], n_ranks=5)
    assert local.returncode == 0, local.stderr

    five = json.loads((tmp_path / "hosts.json").read_text())
    one = json.loads((tmp_path / "local.json").read_text())
    # (a) the same numbers, bit for bit, as all 5 ranks on one host
    assert five["coef"] == one["coef"] and five["intercept"] == one["intercept"]
    assert five["rounds"] == one["rounds"] and five["n_machines"] == 5
    # (b) rank r runs on the r-th host of the hostfile; its link carried at least what it sent
    # (tx) and what its neighbours sent it (rx: the same buffers, one per neighbour)
    print(f"\n5-host run: {seconds:.1f} s wall, {five['rounds']} rounds")
    for machine in five["machines"]:
        host = hosts.names[machine["rank"]]
        tx = after[host][0] - before[host][0]
        rx = after[host][1] - before[host][1]
        payload = machine["bytes_sent"]
        print(f"  {host}: link tx {tx} B, rx {rx} B; MPI payload sent {payload} B")
        assert tx >= payload, f"{host}: {tx} B on the link < {payload} B sent: not over TCP?"
        assert rx >= payload, f"{host}: {rx} B received on the link < {payload} B"
    # results readable by others (umask 022 in the entrypoint)
    assert (tmp_path / "hosts.json").stat().st_mode & 0o777 == 0o644
    assert hosts.job_processes() == []


def test_a_cut_link_ends_the_job_within_the_peer_deadline(hosts: Hosts, tmp_path: Path) -> None:
    load = load_factor()  # a loaded host's set-up steps take longer than a quiet one's deadline
    peer_timeout = float(f"{PEER_TIMEOUT * load:.3g}")
    job = hosts.start(
        [*ARGS[:-1], "--tol", "1e-300", "--max-rounds", "1000000", "--progress-every", "100"],
        env={
            "DPNET_OUTPUT": str(tmp_path / "cut.json"),
            "DPNET_PEER_TIMEOUT": f"{peer_timeout:g}",
        },
    )
    try:
        assert job.wait_for_line("round   300", timeout=90 * load), job.stderr
        hosts.cut(CUT_HOST)
        cut_at = time.monotonic()
        code = job.wait(timeout=peer_timeout + 60 * load)
        ended = time.monotonic() - cut_at
        print(f"\ncut {CUT_HOST}: job ended {ended:.1f} s after the cut, exit code {code}")
        assert code is not None, f"still running {peer_timeout + 60 * load:g} s after the cut"
        assert ended < peer_timeout + 10 * load, job.stderr
        assert code == 5, job.stderr  # no estimate: a machine was lost
        # a neighbour of the cut host names it, the round and the deadline, also on a loaded
        # host where a machine further away may time out first: the neighbour it waits on
        # answers that it is waiting itself (comm.ANSWER_GRACE_SECONDS), so it waits on
        silent = re.findall(
            rf"machine \d+: no message from neighbour (\d+) in round \d+ within {peer_timeout:g} s",
            job.stderr,
        )
        assert silent and set(silent) == {"3"}, job.stderr
        assert not (tmp_path / "cut.json").exists()
        # no process of the job is left anywhere, beyond the cut included (sshd ends the
        # silent sessions after ClientAliveInterval x ClientAliveCountMax = 3 s)
        deadline = time.monotonic() + 15 * load
        while hosts.job_processes() and time.monotonic() < deadline:
            time.sleep(0.5)
        print(f"  processes gone {time.monotonic() - cut_at:.1f} s after the cut")
        assert hosts.job_processes() == []
    finally:
        if job.proc.poll() is None:
            job.wait(timeout=0)
        hosts.heal(CUT_HOST)
