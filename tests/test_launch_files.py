"""Launch material: compose file structure, Dockerfile facts, scripts executable and bash-clean.

Static checks of the container and cluster files (no Slurm here); the image and the compose
demo are built and run for real in tests/test_compose_demo.py (root, a Docker engine), the
local launcher here when dpnet.run exists, and the compose topology with the same entrypoint
and hostfile on 5 network-namespace hosts in tests/test_multihost_netns.py (root only).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch"
SCRIPTS = [
    "local.sh",
    "cluster.sh",
    "entrypoint.sh",
    "watched-mpiexec.sh",
    "slurm.sbatch",
    "netns-demo.sh",
]


def _slots(path: Path) -> list[tuple[str, int]]:
    out = []
    for line in path.read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            host, _, k = fields[0].partition(":")
            out.append((host, int(k) if k else 1))
    return out


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_executable_and_bash_clean(name: str) -> None:
    path = LAUNCH / name
    assert os.access(path, os.X_OK), f"{name} is not executable"
    assert path.read_text().startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in path.read_text()
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    if shutil.which("shellcheck") is not None:
        proc = subprocess.run(["shellcheck", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout


def test_compose_five_machines() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is needed to parse docker-compose.yml")
    spec = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = spec["services"]
    assert sorted(services) == ["launcher", "worker1", "worker2", "worker3", "worker4"]
    # one image, built once (by the launcher's service), run by every service
    assert services["launcher"]["build"] == {"context": ".", "dockerfile": "launch/Dockerfile"}
    for name, svc in services.items():
        assert svc["image"] == "dpnet:demo"
        assert name == "launcher" or ("build" not in svc and svc["pull_policy"] == "never")
        assert svc["hostname"] == name and svc["networks"] == ["dpnet"]
        # every host mount lies inside the repository unless the user names one
        for volume in svc["volumes"]:
            source = re.match(r"(\$\{[^}]*\}|[^:]+):", volume).group(1)
            default = re.fullmatch(r"\$\{\w+:-([^}]*)\}", source)
            path = default.group(1) if default else source
            assert path == "." or path.startswith("./"), f"{name} mounts {source}"
            assert (REPO / path).exists() or path == "./results", f"{name}: {path} missing"
        assert "${DPNET_DATA_DIR:-.}:/data:ro" in svc["volumes"]
    launcher = services["launcher"]
    env = launcher["environment"]
    assert launcher["command"] == ["launcher"]
    assert env["DPNET_OUTPUT"] == "/results/result.json"
    assert "${DPNET_RESULTS_DIR:-./results}:/results" in launcher["volumes"]
    assert "./launch/hostfile.compose:/etc/dpnet/hostfile:ro" in launcher["volumes"]
    assert set(launcher["depends_on"]) == set(services) - {"launcher"}
    # deadlines on by default: the peer deadline of dpnet.run and hydra's job deadline
    assert float(env["DPNET_PEER_TIMEOUT"]) > 0
    assert re.fullmatch(r"\$\{DPNET_JOB_TIMEOUT:-\d+\}", env["MPIEXEC_TIMEOUT"])
    assert int(env["DPNET_WAIT_SECONDS"]) > 0
    # MPI over TCP (hydra forwards the launcher's environment to every rank)
    assert env["UCX_TLS"] == "tcp,self" and env["FI_PROVIDER"] == "tcp"
    assert env["DPNET_RESULTS_UID"] == "${DPNET_UID:-}"
    # the shared hostfile names exactly the services, 5 slots in all, matching DPNET_NP
    slots = _slots(LAUNCH / "hostfile.compose")
    assert sorted(h for h, _ in slots) == sorted(services)
    assert sum(k for _, k in slots) == int(env["DPNET_NP"]) == 5


def test_dockerfile_facts() -> None:
    text = (LAUNCH / "Dockerfile").read_text()
    # a pinned base by default: a patch release on a named Debian release (optionally
    # @sha256 digest), another one by build argument (tests/test_compose_demo.py's stand-in)
    pinned = r"python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?"
    base = rf"^ARG DPNET_BASE={pinned}\nFROM \$\{{DPNET_BASE\}}$"
    assert re.search(base, text, re.M)
    assert "imagetools inspect" in text  # how to pin the digest
    assert 'pip install --no-cache-dir ".[mpich]"' in text  # MPI comes from an extra now
    assert "openssh-server" in text and "openssh-client" in text
    assert not re.search(r"apt-get install[^\n]*(mpich|openmpi|libmpi)", text)  # no system MPI
    for src in re.findall(r"^COPY ((?:\S+ )+)\S+$", text, re.M):
        for item in src.split():
            assert (REPO / item).exists(), f"Dockerfile copies missing {item}"
    # the context is an allowlist: the install's sources and every launch file it installs
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignore  # everything else stays out (the checkout's data and results too)
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    installed = set(re.findall(r"\binstall [^\n]*?(launch/\S+)", text))
    assert installed and {"pyproject.toml", "README.md", "LICENSE", "dpnet"} | installed <= allowed
    assert all((REPO / item).exists() for item in allowed)
    # few layers: the vfs storage driver (dockerd's fallback) copies the image at each one
    assert len(re.findall(r"^(?:RUN|COPY|ADD) ", text, re.M)) == 3
    assert 'ENTRYPOINT ["dpnet-entrypoint"]' in text
    # both ends of an ssh session notice a silent peer (cut link)
    assert "ServerAliveInterval" in text and "ClientAliveInterval" in text
    assert "EXPOSE" not in text and "SetEnv" not in text  # not needed on a compose network


def test_entrypoint_launch_command() -> None:
    text = (LAUNCH / "entrypoint.sh").read_text()
    assert re.search(
        r'"\$watched_mpiexec" -launcher ssh -launcher-exec "\$ssh_cmd" \\\n'
        r'\s+-f "\$hostfile" -n "\$np" \\\n'
        r'\s+python -m mpi4py -m dpnet.run --output "\$output" "\$\{peer\[@\]\}" "\$@" &',
        text,
    )
    assert 'peer=(--peer-timeout "$DPNET_PEER_TIMEOUT")' in text
    assert "umask 022" in text
    proc = subprocess.run(
        [str(LAUNCH / "entrypoint.sh"), "echo", "passed through"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout == "passed through\n"


def test_entrypoint_waits_seconds_not_attempts(tmp_path: Path) -> None:
    """DPNET_WAIT_SECONDS is a deadline for all hosts together, whatever one probe costs."""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("nosuchhost-a\nnosuchhost-b\nnosuchhost-c\n")
    probes = tmp_path / "probes"
    ssh = tmp_path / "ssh"  # a host that never answers: each probe fails after 0.7 s
    ssh.write_text(f'#!/bin/sh\necho "$@" >> {probes}\nsleep 0.7\nexit 255\n')
    ssh.chmod(0o755)
    env = dict(os.environ, DPNET_HOSTFILE=str(hostfile), DPNET_SSH=str(ssh), DPNET_WAIT_SECONDS="3")
    start = time.monotonic()
    proc = subprocess.run(
        [str(LAUNCH / "entrypoint.sh"), "launcher"], capture_output=True, text=True, env=env
    )
    waited = time.monotonic() - start
    assert proc.returncode == 1
    assert "host nosuchhost-a accepts no ssh after 3s" in proc.stderr
    assert 2.5 <= waited < 5.5, waited
    # no probe's ConnectTimeout reaches beyond the deadline
    timeouts = [int(m) for m in re.findall(r"ConnectTimeout=(\d+)", probes.read_text())]
    assert timeouts and all(1 <= t <= 2 for t in timeouts)


def test_hostfile_example_has_five_slots() -> None:
    assert sum(k for _, k in _slots(LAUNCH / "hostfile.example")) == 5


def test_scripts_refuse_missing_venv_and_hostfile(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "DPNET_VENV")}
    proc = subprocess.run([str(LAUNCH / "local.sh")], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "set DPNET_VENV" in proc.stderr
    proc = subprocess.run(
        [str(LAUNCH / "cluster.sh"), str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    empty = tmp_path / "hosts"
    empty.write_text("# nothing\n")
    env["DPNET_VENV"] = sys.prefix
    proc = subprocess.run(
        [str(LAUNCH / "cluster.sh"), str(empty)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 2 and "lists no hosts" in proc.stderr


def _launcher_help(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.mpi_launch
@pytest.mark.skipif(importlib.util.find_spec("dpnet.run") is None, reason="dpnet.run not written")
@pytest.mark.skipif(
    shutil.which("mpiexec", path=str(Path(sys.prefix) / "bin")) is None,
    reason="no mpiexec in the venv",
)
def test_local_and_cluster_launchers_start_ranks(tmp_path: Path) -> None:
    env = dict(os.environ, DPNET_VENV=sys.prefix)
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2\n")  # hydra starts local hosts without ssh
    for args in (
        [str(LAUNCH / "local.sh"), "-n", "2", "--help"],
        [str(LAUNCH / "cluster.sh"), str(hosts), "--help"],
    ):
        proc = _launcher_help(args, env)
        assert proc.returncode == 0, proc.stderr
        assert "usage" in proc.stdout.lower()


def test_netns_demo_help_and_refusals(tmp_path: Path) -> None:
    demo = LAUNCH / "netns-demo.sh"
    proc = subprocess.run([str(demo), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "netns-demo.sh up" in proc.stdout
    for sub in ("up", "run", "cut", "counters", "pids", "down", "heal", "on"):
        assert f"netns-demo.sh {sub}" in proc.stdout
    # nothing is up in an empty state directory: `down` is a no-op, the others refuse
    env = dict(os.environ, DPNET_NETNS_STATE=str(tmp_path / "state"))
    assert subprocess.run([str(demo), "down"], env=env).returncode == 0
    proc = subprocess.run([str(demo), "counters"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "no hosts are up" in proc.stderr
    text = demo.read_text()
    # the hosts use the compose hostfile and the image's entrypoint, MPI is forced onto TCP
    assert "hostfile.compose" in text and "entrypoint.sh" in text
    assert "UCX_TLS=tcp,self" in text


def _fake_mpiexec(tmp_path: Path, body: str) -> dict[str, str]:
    """PATH with an `mpiexec` that runs ``body`` (bash) instead of starting any rank."""
    fake = tmp_path / "bin" / "mpiexec"
    fake.parent.mkdir()
    fake.write_text(f"#!/usr/bin/env bash\n{body}\n")
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}


def test_watched_mpiexec_passes_mpiexecs_exit_code(tmp_path: Path) -> None:
    env = _fake_mpiexec(tmp_path, 'echo "args: $*"; exit 3')
    proc = subprocess.run(
        [str(LAUNCH / "watched-mpiexec.sh"), "-n", "5", "x"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 3 and proc.stdout == "args: -n 5 x\n"


@pytest.mark.parametrize(("said", "code"), [(9, 255), (255, 255), (137, 137)])
def test_watched_mpiexec_says_255_for_a_killed_rank(tmp_path: Path, said: int, code: int) -> None:
    """hydra's exit code for a killed rank is 255 or, when it ends before its ssh sessions, 9:
    the launchers say 255 for both (launch/README.md); other codes pass as they are."""
    env = _fake_mpiexec(tmp_path, f"exit {said}")
    proc = subprocess.run([str(LAUNCH / "watched-mpiexec.sh")], capture_output=True, env=env)
    assert proc.returncode == code


def test_watched_mpiexec_stops_an_mpiexec_left_waiting_for_a_lost_host(tmp_path: Path) -> None:
    """An mpiexec with no child left (its ssh clients gave up on a cut link) that does not end
    by itself is stopped after DPNET_LOST_HOST_GRACE seconds, exit code 5."""
    env = {**_fake_mpiexec(tmp_path, "exec sleep 600"), "DPNET_LOST_HOST_GRACE": "1"}
    start = time.monotonic()
    proc = subprocess.run(
        [str(LAUNCH / "watched-mpiexec.sh")], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 5, proc.stderr
    assert "waits for a lost host or rank" in proc.stderr
    assert time.monotonic() - start < 1 + 8  # the grace, then at most 2 s to stop it
