"""Figures a test measured (times, exit codes, bytes), repeated in pytest's summary under
"figures": the captured output of a passing test is not shown, and CI's log should show them."""

from __future__ import annotations

LINES: list[str] = []


def report(text: str) -> None:
    """Print ``text`` (seen with ``-s``) and keep it for the summary."""
    print(text)
    LINES.extend(line for line in text.splitlines() if line.strip())
