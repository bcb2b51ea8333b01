"""Five hosts from Linux network namespaces, driven through ``launch/netns-demo.sh``.

The script is the one source of truth for the topology (bridge in its own namespace, one
namespace + sshd per host of ``launch/hostfile.compose``, the launcher role of
``launch/entrypoint.sh``); this module only calls its subcommands and, should ``down`` fail,
removes whatever namespaces carry the run's prefix.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.launch import line_arrived, mpiexec_is_open_mpi

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "launch" / "netns-demo.sh"
HOSTFILE = REPO / "launch" / "hostfile.compose"
TOOLS = ["ip", "unshare", "nsenter", "setsid", "ssh", "ssh-keygen"]
SSHD = Path("/usr/sbin/sshd")


def host_names() -> list[str]:
    """The hosts of the compose hostfile, in rank order."""
    names = []
    for line in HOSTFILE.read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            names.append(fields[0].partition(":")[0])
    return names


def missing_requirement() -> str | None:
    """Why the namespace hosts cannot be built here, or None."""
    if sys.platform != "linux":
        return "needs Linux network namespaces"
    if os.geteuid() != 0:
        return "needs root (network namespaces, mounts)"
    packages = {
        "ip": "iproute2",
        "unshare": "util-linux",
        "nsenter": "util-linux",
        "setsid": "util-linux",
        "ssh": "openssh-client",
        "ssh-keygen": "openssh-client",
    }
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"needs {tool} (Debian package {packages[tool]})"
    if not SSHD.exists():
        return f"needs {SSHD} (Debian package openssh-server)"
    if not (Path(sys.prefix) / "bin" / "mpiexec").exists():
        return "needs mpiexec in the venv (the mpich wheel)"
    if mpiexec_is_open_mpi():
        return "the compose demo's hosts run MPICH's hydra (the image's MPI), not Open MPI"
    probe = f"dpnet-probe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def namespaces_with_prefix(prefix: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [
        line.split()[0] for line in listed.splitlines() if line.split()[0].startswith(prefix + "-")
    ]


def force_remove(prefix: str) -> None:
    """Last resort after a failed ``down``: kill, delete every PREFIX-* namespace."""
    for ns in namespaces_with_prefix(prefix):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
        for pid in pids.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)


@dataclass
class Job:
    """A ``netns-demo.sh run`` in the background; stderr lines collected with their times."""

    proc: subprocess.Popen[str]
    lines: list[tuple[float, str]] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stderr, True), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stdout, False), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream, is_err: bool) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            if is_err:
                self.lines.append((time.monotonic(), line))
            else:
                self.stdout.append(line)

    def wait_for_line(self, text: str, timeout: float) -> bool:
        return line_arrived(self.lines, self.proc, text, timeout)

    def wait(self, timeout: float) -> int | None:
        """Exit code, or None (and the launcher's process group killed) after ``timeout``."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None
        for reader in self._readers:
            reader.join(timeout=5)
        return code

    @property
    def stderr(self) -> str:
        return "".join(line for _, line in self.lines)


class Hosts:
    """The five hosts of one test run (state in ``state``, namespaces named ``prefix-*``)."""

    def __init__(self, state: Path, prefix: str) -> None:
        self.state, self.prefix = state, prefix
        self.names = host_names()
        self.env = {
            **os.environ,
            "DPNET_NETNS_STATE": str(state),
            "DPNET_NETNS_PREFIX": prefix,
            "DPNET_VENV": sys.prefix,
        }

    def _demo(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(DEMO), *args], capture_output=True, text=True, env=self.env, timeout=timeout
        )

    def up(self) -> None:
        done = self._demo("up")
        if done.returncode != 0:
            raise RuntimeError(f"netns-demo.sh up failed:\n{done.stderr}")

    def down(self) -> None:
        """``netns-demo.sh down``, then make sure: nothing of the prefix is left."""
        try:
            self._demo("down")
        finally:
            force_remove(self.prefix)

    def start(self, args: list[str], env: dict[str, str] | None = None) -> Job:
        proc = subprocess.Popen(
            [str(DEMO), "run", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, **(env or {})},
            start_new_session=True,
        )
        return Job(proc)

    def cut(self, host: str) -> None:
        self._demo("cut", host).check_returncode()

    def heal(self, host: str) -> None:
        self._demo("heal", host).check_returncode()

    def counters(self) -> dict[str, tuple[int, int]]:
        """host -> (tx_bytes, rx_bytes) of its eth0, the host's only link."""
        done = self._demo("counters")
        done.check_returncode()
        out = {}
        for line in done.stdout.splitlines():
            host, tx, rx = line.split()
            out[host] = (int(tx), int(rx))
        return out

    def processes(self) -> list[tuple[str, int, str]]:
        """(host, pid, command line) of every process in the hosts' namespaces."""
        done = self._demo("pids")
        done.check_returncode()
        out = []
        for line in done.stdout.splitlines():
            host, pid, *cmd = line.split(" ", 2)
            out.append((host, int(pid), " ".join(cmd).strip()))
        return out

    def job_processes(self) -> list[tuple[str, int, str]]:
        """The processes that are not a host's listening sshd (the hosts' own daemon)."""
        return [p for p in self.processes() if "[listener]" not in p[2]]
