"""Launch material: compose file structure, Dockerfile facts, scripts executable and bash-clean.

No Docker engine or Slurm is available where these tests run, so the container and cluster
paths are checked statically; the local launcher is run for real when dpnet.run exists.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch"
SCRIPTS = ["local.sh", "cluster.sh", "entrypoint.sh", "slurm.sbatch"]


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
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_compose_five_machines() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is needed to parse docker-compose.yml")
    spec = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = spec["services"]
    assert sorted(services) == ["launcher", "worker1", "worker2", "worker3", "worker4"]
    for name, svc in services.items():
        assert svc["build"] == {"context": ".", "dockerfile": "launch/Dockerfile"}
        assert svc["hostname"] == name and svc["networks"] == ["dpnet"]
        assert "./launch/hostfile.compose:/etc/dpnet/hostfile:ro" in svc["volumes"]
    launcher = services["launcher"]
    assert launcher["command"] == ["launcher"]
    assert launcher["environment"]["DPNET_OUTPUT"] == "/results/result.json"
    assert "./results:/results" in launcher["volumes"]
    assert set(launcher["depends_on"]) == set(services) - {"launcher"}
    # the shared hostfile names exactly the services, 5 slots in all, matching DPNET_NP
    slots = _slots(LAUNCH / "hostfile.compose")
    assert sorted(h for h, _ in slots) == sorted(services)
    assert sum(k for _, k in slots) == int(launcher["environment"]["DPNET_NP"]) == 5


def test_dockerfile_facts() -> None:
    text = (LAUNCH / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", text, re.M)
    assert "pip install --no-cache-dir ." in text
    assert "openssh-server" in text and "openssh-client" in text
    assert not re.search(r"apt-get install[^\n]*(mpich|openmpi|libmpi)", text)  # no system MPI
    for src in re.findall(r"^COPY ((?:\S+ )+)\S+$", text, re.M):
        for item in src.split():
            assert (REPO / item).exists(), f"Dockerfile copies missing {item}"
    assert 'ENTRYPOINT ["dpnet-entrypoint"]' in text


def test_entrypoint_launch_command() -> None:
    text = (LAUNCH / "entrypoint.sh").read_text()
    assert re.search(
        r'mpiexec -launcher ssh -f "\$hostfile" -n "\$np" \\\n\s+python -m mpi4py -m dpnet.run '
        r'--output "\$output"',
        text,
    )
    proc = subprocess.run(
        [str(LAUNCH / "entrypoint.sh"), "echo", "passed through"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout == "passed through\n"


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


@pytest.mark.mpi_launch
@pytest.mark.skipif(importlib.util.find_spec("dpnet.run") is None, reason="dpnet.run not written")
@pytest.mark.skipif(
    shutil.which("mpiexec", path=str(Path(sys.prefix) / "bin")) is None,
    reason="no mpiexec in the venv",
)
def _launcher_help(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)


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
