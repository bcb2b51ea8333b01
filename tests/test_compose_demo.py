"""The docker-compose demo, built and run for real: ``launch/Dockerfile``, ``docker-compose.yml``.

A Docker engine is started for this module alone (root, Debian's ``docker.io``, compose v2;
``.ci/docker-deps`` installs them): a build daemon in the root network namespace that creates
no bridge, address or firewall rule builds the image (``--network host``, classic builder) on a
base chosen by the Dockerfile's ``DPNET_BASE`` build argument: ``$DPNET_COMPOSE_BASE`` if set
(e.g. the official ``python:3.11.11-slim-bookworm`` where Docker Hub can be reached), else a
stand-in made here by debootstrap with the host's CA certificates. That daemon is stopped and a
second one, on the same data directory, runs the containers inside a network namespace of its
own: no container address in the machine's namespace. The image is built once for all tests.
Everything (containers, networks, volumes, images, daemons, namespace, files) is removed at
the end, on failure too. Skipped with the reason where it cannot run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.figures import report
from tests.launch import line_arrived, run_job

pytestmark = [pytest.mark.slow, pytest.mark.mpi_launch, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[1]
IMAGE = "dpnet:demo"  # docker-compose.yml's image name
STANDIN = "dpnet-standin-base:bookworm"
SERVICES = ["launcher", "worker1", "worker2", "worker3", "worker4"]  # rank order
# docs/cli.md's example run: the containers must give what one host gives
ARGS = ["--seed", "1", "--epsilon", "1", "--progress-every", "150"]
ENDLESS = ["--tol", "1e-300", "--max-rounds", "1000000", "--progress-every", "100"]
PEER_TIMEOUT = 8  # the fault cases' DPNET_PEER_TIMEOUT (the compose default is 30)
ENDLESS_ENV = {"DPNET_PEER_TIMEOUT": str(PEER_TIMEOUT)}
LOST_HOST_GRACE = 3  # watched-mpiexec.sh's default
SIGNAL_SECONDS = 5.0  # "within seconds": a signalled job ends within this
NOBODY = 65534


def _run(cmd: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def missing_requirement() -> str | None:
    """Why no Docker engine can be started here, or None."""
    if sys.platform != "linux":
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (a Docker daemon, a network namespace)"
    hint = " (as root: bash .ci/docker-deps installs docker.io, debootstrap and compose v2)"
    for tool, package in [
        ("dockerd", "docker.io"),
        ("docker", "docker.io"),
        ("ip", "iproute2"),
        ("nsenter", "util-linux"),
    ]:
        if shutil.which(tool) is None:
            return f"needs {tool} (Debian package {package}){hint}"
    if not os.environ.get("DPNET_COMPOSE_BASE") and shutil.which("debootstrap") is None:
        return f"needs debootstrap for the stand-in base image{hint}"
    with tempfile.TemporaryDirectory() as config:
        said = _run(["docker", "compose", "version"], env={**os.environ, "DOCKER_CONFIG": config})
    if said.returncode != 0 or " v2." not in said.stdout:
        return f"needs the docker compose v2 plugin{hint}"
    if not (Path(sys.prefix) / "bin" / "mpiexec").exists():
        return "needs mpiexec in the venv (the mpich wheel) for the one-host comparison"
    probe = f"dpnet-dprobe{os.getpid()}"
    made = _run(["ip", "netns", "add", probe])
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _run(["ip", "netns", "del", probe])
    return None


def _root_namespace_addresses() -> set[str]:
    listed = _run(["ip", "-o", "addr"]).stdout
    return {" ".join(line.split()[1:4]) for line in listed.splitlines()}


def _processes_under(path: Path) -> list[int]:
    """Pids whose command line names ``path`` (the daemons, containerd, its shims)."""
    needle = str(path).encode()
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if needle in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid()]


class Engine:
    """Two dockerd, one after the other, on one data directory under ``state``."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.netns = f"dpnet-docker{os.getpid()}"
        self.data = state / "docker"
        self.sock = ""
        self.daemon: subprocess.Popen[bytes] | None = None
        self.config = state / "config"  # an empty DOCKER_CONFIG: nothing of the user's
        self.config.mkdir(parents=True)
        self.figures: dict[str, float] = {}
        self.driver = ""  # the storage driver dockerd chose (reported with the figures)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "DOCKER_HOST": f"unix://{self.sock}",
            "DOCKER_CONFIG": str(self.config),
            "DOCKER_BUILDKIT": "0",
            **extra,
        }

    def docker(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return _run(["docker", *args], timeout=timeout, env=self.env())

    def _start_daemon(self, name: str, netns: bool, flags: list[str]) -> None:
        self.sock = str(self.state / f"{name}.sock")
        # the storage driver is dockerd's own choice: overlay2 where the data root's file system
        # takes overlay mounts (this machine's ext4 does), else vfs, which copies the whole
        # image for every layer and every container (the run daemon finds what the build used)
        cmd = [
            "dockerd",
            f"--data-root={self.data}",
            f"--exec-root={self.state / ('exec-' + name)}",
            f"--pidfile={self.state / (name + '.pid')}",
            f"--host=unix://{self.sock}",
            *flags,
        ]
        if netns:
            cmd = ["nsenter", f"--net=/var/run/netns/{self.netns}", *cmd]
        log = open(self.state / f"{name}.log", "wb")  # noqa: SIM115 (the daemon keeps it)
        self.daemon = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        give_up = time.monotonic() + 60
        while self.docker("version").returncode != 0:
            if self.daemon.poll() is not None or time.monotonic() > give_up:
                tail = (self.state / f"{name}.log").read_text()[-2000:]
                raise RuntimeError(f"dockerd {name} did not start:\n{tail}")
            time.sleep(0.2)

    def _stop_daemon(self) -> None:
        if self.daemon is None:
            return
        self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
        self.daemon = None

    def _standin_base(self) -> None:
        """debootstrap a bookworm with Python and the host's CA certificates (this network
        re-signs TLS: pip inside the build needs them), imported as ``STANDIN``."""
        rootfs = self.state / "rootfs"
        mirror = os.environ.get("DPNET_DEBIAN_MIRROR", "http://deb.debian.org/debian")
        start = time.monotonic()
        made = _run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=python3,python3-venv,python-is-python3,ca-certificates",
                "bookworm",
                str(rootfs),
                mirror,
            ],
            timeout=900,
        )
        if made.returncode != 0:
            raise RuntimeError(f"debootstrap failed:\n{made.stdout[-2000:]}{made.stderr[-2000:]}")
        certs = rootfs / "usr/local/share/ca-certificates"
        certs.mkdir(parents=True, exist_ok=True)
        for cert in Path("/usr/local/share/ca-certificates").glob("**/*.crt"):
            shutil.copy(cert, certs / cert.name)
        _run(["chroot", str(rootfs), "update-ca-certificates"]).check_returncode()
        for deb in (rootfs / "var/cache/apt/archives").glob("*.deb"):
            deb.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["docker", "import", "-", STANDIN], stdin=tar.stdout, capture_output=True,
            text=True, env=self.env(), timeout=300,
        )  # fmt: skip
        tar.wait()
        if imported.returncode != 0:
            raise RuntimeError(f"docker import failed: {imported.stderr}")
        shutil.rmtree(rootfs)
        self.figures["base_seconds"] = time.monotonic() - start

    def up(self) -> None:
        # 1. the build daemon: root namespace, no bridge, no address, no firewall rule
        no_net = ["--bridge=none", "--iptables=false", "--ip-masq=false", "--ip6tables=false"]
        self._start_daemon("build", False, no_net)
        base = os.environ.get("DPNET_COMPOSE_BASE", "")
        if not base:
            self._standin_base()
            base = STANDIN
        start = time.monotonic()
        built = _run(
            ["docker", "build", "--network", "host", "-f", "launch/Dockerfile",
             "--build-arg", f"DPNET_BASE={base}", "-t", IMAGE, "."],
            timeout=1500, cwd=REPO, env=self.env(),
        )  # fmt: skip
        if built.returncode != 0:
            raise RuntimeError(f"docker build failed:\n{built.stdout[-3000:]}{built.stderr}")
        self.figures["image_seconds"] = time.monotonic() - start
        self.driver = self.docker("info", "-f", "{{.Driver}}").stdout.strip()
        size = self.docker("image", "inspect", "-f", "{{.Size}}", IMAGE).stdout.strip()
        self.figures["image_mb"] = int(size) / 1e6
        self._stop_daemon()
        # 2. the run daemon, same images, inside a network namespace of its own
        _run(["ip", "netns", "add", self.netns]).check_returncode()
        _run(["ip", "-n", self.netns, "link", "set", "lo", "up"]).check_returncode()
        self._start_daemon("run", True, [])
        assert self.docker("image", "inspect", IMAGE).returncode == 0

    def down(self) -> None:
        """Stop the daemon, kill what it left, unmount, delete the namespace and the files."""
        try:
            self._stop_daemon()
        finally:
            for pid in _processes_under(self.state):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            mounts = [
                line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            ]
            for mount in sorted((m for m in mounts if m.startswith(str(self.state))), reverse=True):
                _run(["umount", "-l", mount])
            _run(["ip", "netns", "del", self.netns])
            shutil.rmtree(self.state, ignore_errors=True)


@dataclass
class Up:
    """A ``docker compose up --exit-code-from launcher`` in the background, its output lines
    with their times, and every container's eth0 counters polled while it runs."""

    proc: subprocess.Popen[str]
    engine: Engine
    project: str
    lines: list[tuple[float, str]] = field(default_factory=list)
    counters: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line))

    def container(self, service: str) -> str:
        return f"{self.project}-{service}-1"

    def _poll(self) -> None:
        """(rx, tx) bytes of each container's eth0, read from /proc/PID/net/dev of its PID 1
        every 0.1 s until it ends: the last reading before the container stops."""
        pids: dict[str, int] = {}
        while self.proc.poll() is None:
            for service in SERVICES:
                if service not in pids:
                    said = self.engine.docker(
                        "inspect", "-f", "{{.State.Pid}}", self.container(service)
                    )
                    if said.returncode == 0 and said.stdout.strip() not in ("", "0"):
                        pids[service] = int(said.stdout)
                    continue
                try:
                    dev = Path(f"/proc/{pids[service]}/net/dev").read_text()
                except OSError:
                    continue
                for line in dev.splitlines():
                    name, _, numbers = line.partition(":")
                    if name.strip() == "eth0":
                        fields = numbers.split()
                        self.counters[service] = (int(fields[0]), int(fields[8]))
            time.sleep(0.1)

    def wait_for_line(self, text: str, timeout: float) -> bool:
        return line_arrived(self.lines, self.proc, text, timeout)

    def wait(self, timeout: float) -> int | None:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        self._reader.join(timeout=5)
        self._poller.join(timeout=5)
        return code

    @property
    def output(self) -> str:
        return "".join(line for _, line in self.lines)

    def launcher_exit_code(self) -> int:
        said = self.engine.docker(
            "inspect", "-f", "{{.State.ExitCode}}", self.container("launcher")
        )
        return int(said.stdout)


class Demo:
    """The project's docker-compose.yml on the engine, under one compose project name."""

    def __init__(self, engine: Engine, state: Path) -> None:
        self.engine = engine
        self.project = f"dpnetct{os.getpid()}"
        self.state = state
        # results where a non-root user may read them (umask 022 in the entrypoint)
        self.results = Path(tempfile.mkdtemp(prefix="dpnet-compose-results-"))
        self.results.chmod(0o755)

    def compose(self, *args: str, override: dict | None = None, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        files = ["-f", str(REPO / "docker-compose.yml")]
        if override is not None:
            path = self.state / f"override-{len(list(self.state.glob('override-*')))}.yml"
            path.write_text(json.dumps(override))  # JSON is YAML
            files += ["-f", str(path)]
        cmd = ["docker", "compose", "-p", self.project, *files, *args]
        return cmd, self.engine.env(DPNET_RESULTS_DIR=str(self.results), **(env or {}))

    def start(self, launcher_args: list[str], env: dict[str, str] | None = None,
              launcher_env: dict[str, str] | None = None) -> Up:  # fmt: skip
        override: dict = {"services": {"launcher": {"command": ["launcher", *launcher_args]}}}
        if launcher_env:
            override["services"]["launcher"]["environment"] = launcher_env
        for old in self.results.iterdir():
            old.unlink()
        cmd, full_env = self.compose("up", "--exit-code-from", "launcher", override=override,
                                     env=env)  # fmt: skip
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
            start_new_session=True,
        )  # fmt: skip
        return Up(proc, self.engine, self.project)

    def down(self) -> subprocess.CompletedProcess[str]:
        cmd, env = self.compose("down", "--volumes", "--remove-orphans", "--timeout", "5")
        return _run(cmd, env=env, timeout=180)

    def left(self) -> dict[str, list[str]]:
        label = f"label=com.docker.compose.project={self.project}"
        return {
            kind: self.engine.docker(*cmd, "--filter", label, "-q").stdout.split()
            for kind, cmd in [
                ("containers", ["ps", "-a"]),
                ("networks", ["network", "ls"]),
                ("volumes", ["volume", "ls"]),
            ]
        }


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    reason = missing_requirement()
    if reason is not None:
        print(f"skipping the docker-compose demo tests: {reason}")
        pytest.skip(reason)
    before = _root_namespace_addresses()
    state = Path(tempfile.mkdtemp(prefix="dpnet-docker-"))
    engine = Engine(state / "engine")
    made: Demo | None = None
    try:
        engine.up()
        base = engine.figures.get("base_seconds")
        report(
            "\ncompose demo engine: "
            + (f"stand-in base {base:.0f} s, " if base is not None else "")
            + f"image {engine.figures['image_seconds']:.0f} s, "
            + f"{engine.figures['image_mb']:.0f} MB, storage driver {engine.driver}"
        )
        made = Demo(engine, state)
        yield made
        assert _root_namespace_addresses() == before, "an address appeared in the root namespace"
    finally:
        try:
            if made is not None:
                made.down()
                shutil.rmtree(made.results, ignore_errors=True)
        finally:
            engine.down()
            shutil.rmtree(state, ignore_errors=True)
        namespaces = _run(["ip", "netns", "list"]).stdout
        assert engine.netns not in namespaces, "the engine's namespace was left"
        assert _processes_under(state) == [], "a daemon process was left"


def _seconds_to_exit(up: Up, since: float) -> float:
    ended = [t for t, line in up.lines if "launcher-1 exited with code" in line]
    return (ended[0] if ended else time.monotonic()) - since


def test_compose_up_matches_one_host_over_tcp(demo: Demo, tmp_path: Path) -> None:
    before = _root_namespace_addresses()
    start = time.monotonic()
    up = demo.start(ARGS)
    code = up.wait(timeout=300)
    seconds = time.monotonic() - start
    assert code == 0, up.output[-4000:]
    assert _root_namespace_addresses() == before, "a container address in the root namespace"
    local = run_job([*ARGS, "--output", str(tmp_path / "local.json")], n_ranks=5)
    assert local.returncode == 0, local.stderr

    result = demo.results / "result.json"
    # readable by a user who is not root (mode 0644 from the entrypoint's umask 022)
    read = _run(["cat", str(result)], user=NOBODY, group=NOBODY, extra_groups=[])
    assert read.returncode == 0, read.stderr
    five = json.loads(read.stdout)
    one = json.loads((tmp_path / "local.json").read_text())
    assert five["coef"] == one["coef"] and five["intercept"] == one["intercept"]
    assert five["rounds"] == one["rounds"] and five["n_machines"] == 5
    # what the launcher printed: progress and summary lines, released values only
    said = [line for _, line in up.lines if re.match(r"\S*launcher-1 +\| (round|dpnet:| )", line)]
    report(f"\ncompose up (5 containers created, then the job): {seconds:.1f} s, exit 0")
    print("".join(said), end="")
    # rank r ran in the r-th container; its link carried what it sent (tx) and what its
    # neighbours sent it (rx: the same buffers, one per neighbour), so MPI went over TCP
    for machine in five["machines"]:
        service = SERVICES[machine["rank"]]
        assert machine["host"] == service
        rx, tx = up.counters[service]
        payload = machine["bytes_sent"]
        report(f"  {service}: link tx {tx} B, rx {rx} B; MPI payload sent {payload} B")
        assert tx >= payload, f"{service}: {tx} B on the link < {payload} B sent: not TCP?"
        assert rx >= payload, f"{service}: {rx} B received on the link < {payload} B"


def _find_rank_pid(demo: Demo, up: Up, service: str) -> int:
    listed = demo.engine.docker("top", up.container(service), "-eo", "pid,args").stdout
    pids = [int(line.split()[0]) for line in listed.splitlines() if "-m dpnet.run" in line]
    assert len(pids) == 1, listed
    return pids[0]


@pytest.mark.parametrize("fault", ["kill rank 2", "pause worker2"])
def test_a_lost_rank_or_machine_ends_the_demo_with_its_code(demo: Demo, fault: str) -> None:
    up = demo.start(ENDLESS, launcher_env=ENDLESS_ENV)
    try:
        assert up.wait_for_line("round   300", timeout=180), up.output[-4000:]
        if fault.startswith("kill"):
            pid = _find_rank_pid(demo, up, "worker2")
            start = time.monotonic()
            os.kill(pid, signal.SIGKILL)
        else:
            start = time.monotonic()
            demo.engine.docker("pause", up.container("worker2")).check_returncode()
        code = up.wait(timeout=120)
        ended = _seconds_to_exit(up, start)
    finally:
        demo.engine.docker("unpause", up.container("worker2"))
        if up.proc.poll() is None:
            up.wait(timeout=0)
    launcher = up.launcher_exit_code()
    report(f"\n{fault}: launcher exit code {launcher} after {ended:.1f} s, compose {code}")
    assert not (demo.results / "result.json").exists()
    if fault.startswith("kill"):
        assert launcher == code == 255, up.output[-3000:]  # hydra aborts the job
        assert ended < 3, up.output[-3000:]
    else:
        # its neighbours wait the peer deadline, the others stop on their notes; mpiexec,
        # still waiting for the frozen rank, is stopped by watched-mpiexec.sh
        assert launcher == code == 5, up.output[-3000:]
        assert PEER_TIMEOUT - 0.5 < ended < PEER_TIMEOUT + 1 + LOST_HOST_GRACE + 6, up.output
        assert re.search(r"no message from neighbour 2 in round \d+", up.output), up.output


def _dpnet_lines(demo: Demo, up: Up) -> list[str]:
    logs = demo.engine.docker("logs", up.container("launcher")).stderr
    return [line for line in logs.splitlines() if line.startswith("dpnet: ")]


def _last_dpnet_line(demo: Demo, up: Up, after: int) -> str:
    """The launcher's last ``dpnet:`` line once there are more than ``after`` (the daemon
    copies a container's output to its log asynchronously: up to 5 s)."""
    give_up = time.monotonic() + 5
    while len(lines := _dpnet_lines(demo, up)) <= after and time.monotonic() < give_up:
        time.sleep(0.1)
    return lines[-1] if len(lines) > after else "(none)"


@pytest.mark.parametrize(
    "how", ["docker stop", "docker kill -s INT", "docker kill -s TERM", "Ctrl-C on up"]
)
def test_signals_reach_the_job(demo: Demo, how: str) -> None:
    up = demo.start(ENDLESS, launcher_env=ENDLESS_ENV)  # the same containers as above
    try:
        assert up.wait_for_line("round   300", timeout=180), up.output[-4000:]
        before = len(_dpnet_lines(demo, up))
        start = time.monotonic()
        if how == "Ctrl-C on up":
            up.proc.send_signal(signal.SIGINT)  # compose stops the launcher first (depends_on)
        else:
            demo.engine.docker(*how.split()[1:], up.container("launcher")).check_returncode()
        code = up.wait(timeout=60)
        ended = _seconds_to_exit(up, start)
    finally:
        if up.proc.poll() is None:
            up.wait(timeout=0)
    launcher = up.launcher_exit_code()
    last = _last_dpnet_line(demo, up, after=before)
    report(f"\n{how}: launcher exit code {launcher} after {ended:.2f} s, compose {code}: {last}")
    expected = {"docker stop": 143, "docker kill -s INT": 130}.get(how, 143)
    assert launcher == expected, up.output[-3000:]
    # Ctrl-C: compose stops the containers (SIGTERM) and exits with 130 itself
    assert code == (130 if how == "Ctrl-C on up" else expected)
    assert ended < SIGNAL_SECONDS, up.output[-3000:]
    word = "interrupted" if expected == 130 else "terminated (SIGTERM)"
    assert last == f"dpnet: {word}: every machine stopped", up.output[-3000:]
    assert not (demo.results / "result.json").exists()


def test_a_job_deadline_always_ends_with_124(demo: Demo) -> None:
    deadline = 10
    for attempt in range(2):
        start = time.monotonic()
        up = demo.start(ENDLESS, env={"DPNET_JOB_TIMEOUT": str(deadline)})
        code = up.wait(timeout=deadline + 120)
        seconds = time.monotonic() - start
        launcher = up.launcher_exit_code()
        report(f"\njob deadline {deadline} s ({attempt + 1}): exit code {launcher} after "
              f"{seconds:.1f} s from up, compose {code}")  # fmt: skip
        assert launcher == code == 124, up.output[-3000:]
        assert "still running at its deadline (MPIEXEC_TIMEOUT=10 s)" in up.output
        assert not (demo.results / "result.json").exists()
        # the deadline counts from mpiexec's start, after the launcher's ssh waits
        assert deadline <= seconds < deadline + 60


def test_compose_down_leaves_nothing(demo: Demo) -> None:
    done = demo.down()
    assert done.returncode == 0, done.stderr
    left = demo.left()
    report(f"\ncompose down: left {left}")
    assert left == {"containers": [], "networks": [], "volumes": []}
