"""A real, small, full file system for tests (root only): a tmpfs mounted for one test."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def mounted_tmpfs(tmp_path: Path, size: str = "256k") -> Iterator[Path]:
    """A ``size`` tmpfs mounted at ``tmp_path/disk`` while the generator is alive (skips the
    test where mounting is not allowed): the body of conftest's ``small_disk`` fixture."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill_disk(disk: Path) -> None:
    """Fill the file system of ``disk`` to the last page (a file ``filler``)."""
    with (disk / "filler").open("wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
