"""Progress lines say how long the run has taken and, against --max-rounds, how long it may
still take (they had neither)."""

from __future__ import annotations

import math

from dpnet.cli import ProgressPrinter
from dpnet.decentralized import ProgressRecord


def _record(round_: int, objective: float = 0.5) -> ProgressRecord:
    return ProgressRecord(
        round=round_, objective=objective, primal_residual=1e-3, dual_residual=2e-4
    )


def test_elapsed_time_and_time_left_at_the_pace_since_the_first_line(monkeypatch, capsys):
    clock = iter([10.0, 12.0, 14.0, 1010.0])  # set-up began at 10; lines at 12, 14, 1010 s
    monkeypatch.setattr("dpnet.cli.report.time.perf_counter", lambda: next(clock))
    show = ProgressPrinter(max_rounds=1000)
    for round_ in (100, 200, 950):
        show(_record(round_))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "round   100  objective 0.50000000  primal 1.00e-03  dual 2.00e-04  2.0 s"
    # 100 rounds in 2 s: the 800 left take 16 s
    assert lines[1].endswith("  4.0 s, at most 16.0 s left")
    # 850 rounds in 998 s: the 50 left take 58.7 s; 1000 s since set-up is 16 min 40 s
    assert lines[2].endswith(f"  16 min 40 s, at most {50 * 998 / 850:.1f} s left")


def test_no_objective_under_record_privacy(capsys):
    ProgressPrinter(max_rounds=10)(_record(1, objective=math.nan))
    assert "objective" not in capsys.readouterr().err


class _Writes:
    """A stderr that keeps each write call apart."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_each_line_is_one_write_with_its_newline(monkeypatch):
    """A signal is handled between two write calls, and the job's last line then follows
    whatever was written: with the text and its newline in two calls (print), the line
    "dpnet: interrupted: every machine stopped" was glued to a progress line's text (CI)."""
    stderr = _Writes()
    monkeypatch.setattr("dpnet.cli.report.sys.stderr", stderr)
    show = ProgressPrinter(max_rounds=100)
    for round_ in (1, 2, 3):
        show(_record(round_))
    assert len(stderr.calls) == 3
    assert all(
        call.startswith("round ") and call.endswith("left\n" if i else " s\n")
        for i, call in enumerate(stderr.calls)
    )
    assert all(call.count("\n") == 1 for call in stderr.calls)
