"""The repository stays ruff clean (lint rules and formatting, pyproject.toml [tool.ruff]) and
dpnet/ type-checks under mypy (pyproject.toml [tool.mypy])."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args", [("check", "."), ("format", "--check", ".")], ids=str)
def test_ruff_is_clean(args: tuple[str, ...]) -> None:
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (the test extra installs it)")
    cmd = [sys.executable, "-m", "ruff", *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.timeout(360)  # above the subprocess's 300 s, so a slow mypy reports as such
def test_mypy_is_clean() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (the test extra installs it)")
    cmd = [sys.executable, "-m", "mypy"]  # files and settings: pyproject.toml [tool.mypy]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
