"""A full disk while writing: one line, the documented code, and every earlier output intact
(writes are atomic: a temporary file, then a rename). Uses a real, small tmpfs (root only: the
``small_disk`` fixture of conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.disks import fill_disk
from tests.launch import run_job

pytestmark = pytest.mark.slow  # end-to-end: whole runs as subprocesses onto a mounted tmpfs

RUN = ["--n-samples", "300", "--n-test", "100", "--max-rounds", "30", "--quiet"]


def test_results_on_a_full_disk(small_disk: Path, tmp_path: Path) -> None:
    out, plot = small_disk / "r.json", small_disk / "p.png"
    first = run_job([*RUN, "--output", str(out), "--plot", str(plot)])
    assert first.returncode == 0, first.stderr
    before = out.read_bytes(), plot.read_bytes()
    fill_disk(small_disk)
    again = run_job([*RUN, "--seed", "3", "--output", str(out), "--plot", str(plot)])
    lines = [ln for ln in again.stderr.splitlines() if not ln.startswith("dpnet: warning")]
    assert again.returncode == 1 and len(lines) == 1, again.stderr
    assert "No space left on device" in lines[0] and "Traceback" not in again.stderr
    assert (out.read_bytes(), plot.read_bytes()) == before  # the previous run's files
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "p.png", "r.json"]


def test_a_plot_on_a_full_disk_keeps_the_previous_plot(small_disk: Path, tmp_path: Path) -> None:
    """--plot truncated a previous good plot on a full disk (savefig wrote in place)."""
    plot = small_disk / "p.png"
    first = run_job([*RUN, "--plot", str(plot)])
    assert first.returncode == 0, first.stderr
    before = plot.read_bytes()
    fill_disk(small_disk)
    out = tmp_path / "r.json"
    again = run_job([*RUN, "--seed", "3", "--output", str(out), "--plot", str(plot)])
    assert again.returncode == 4, again.stderr
    lines = [ln for ln in again.stderr.splitlines() if not ln.startswith("dpnet: warning")]
    assert len(lines) == 1 and "could not be written" in lines[0], again.stderr
    assert plot.read_bytes() == before and out.exists()
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "p.png"]
