"""Shared pytest hooks and fixtures: the measured figures of tests.figures in the summary, every
test that launches mpiexec marked slow, and the fixtures more than one test file uses (one
definition each).

``python -m pytest -m "not slow"`` is the developer's fast loop; ``python -m pytest`` (and CI)
runs everything, ``-m mpi_launch`` the tests that launch mpiexec."""

from __future__ import annotations

import copy
import json
import signal
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.disks import mounted_tmpfs
from tests.figures import LINES
from tests.launch import run_job

FIGURES: list[str] = []  # every test's figures, as their reports arrive (in order)

if TYPE_CHECKING:  # imported by the fixture: collecting the tests loads no accounting
    from tests.privacy_work import PrivacyWork


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a non-interactive shell inherits SIGINT ignored,
    and so would every job it starts (dpnet keeps an inherited SIG_IGN, as ``nohup`` asks):
    the Ctrl-C tests would then see jobs run to their end. Python's own handler here makes
    the jobs start with SIGINT's default disposition, as from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that launches an mpiexec job (marker ``mpi_launch``) is an end-to-end run of
    several processes on shared cores: slow, outside the fast loop (the full suite and CI run
    them; ``-m mpi_launch`` runs just them)."""
    for item in items:
        if item.get_closest_marker("mpi_launch") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """The figures a test reported ride on its report (a worker's under pytest-xdist: the
    controller prints the summary); a test process keeps each line once."""
    report = yield
    report.user_properties.extend(("figure", line) for line in LINES)
    LINES.clear()
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    FIGURES.extend(text for name, text in report.user_properties if name == "figure")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs mounted for this test, unmounted after it (root only: skipped else)."""
    yield from mounted_tmpfs(tmp_path)


@pytest.fixture
def privacy_work(monkeypatch: pytest.MonkeyPatch) -> PrivacyWork:
    """The privacy accountant's expensive steps, counted (tests/privacy_work.py)."""
    from tests.privacy_work import install

    return install(monkeypatch)


@pytest.fixture(scope="session")
def job_report(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., dict]:
    """``job_report(*options)``: the results file of ``python -m dpnet.run *options --output
    FILE`` (exit 0 required), run once per session and option list; each call gets its own
    copy. The uninterrupted reference of the checkpoint and chaos tests."""
    reports: dict[tuple[str, ...], dict] = {}

    def report(*options: str) -> dict:
        if options not in reports:
            out = tmp_path_factory.mktemp("job") / "report.json"
            done = run_job([*options, "--output", str(out)], timeout=120)
            assert done.returncode == 0, done.stderr
            reports[options] = json.loads(out.read_text())
        return copy.deepcopy(reports[options])

    return report
