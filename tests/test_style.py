"""The repository stays ruff clean: lint rules and formatting (pyproject.toml [tool.ruff])."""

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
