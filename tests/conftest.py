"""Shared pytest hooks and fixtures: the measured figures of tests.figures in the summary, and
the fixtures more than one test file uses (one definition each)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.figures import LINES

if TYPE_CHECKING:  # imported by the fixture: collecting the tests loads no accounting
    from tests.privacy_work import PrivacyWork


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if LINES:
        terminalreporter.section("figures")
        for line in LINES:
            terminalreporter.write_line(line)


@pytest.fixture
def privacy_work(monkeypatch: pytest.MonkeyPatch) -> PrivacyWork:
    """The privacy accountant's expensive steps, counted (tests/privacy_work.py)."""
    from tests.privacy_work import install

    return install(monkeypatch)
