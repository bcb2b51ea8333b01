"""Shared pytest hooks: the measured figures of tests.figures in the summary."""

from __future__ import annotations

import pytest

from tests.figures import LINES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if LINES:
        terminalreporter.section("figures")
        for line in LINES:
            terminalreporter.write_line(line)
