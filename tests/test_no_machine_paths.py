"""No committed file carries an absolute path of a development machine (/work/..., /home/...,
/root/..., /Users/...): such a path says nothing on another machine and leaks the layout of the
one the file was written on. Every git-tracked text file is searched (``git ls-files``).

Paths inside the launch/ Docker image are the image's own, not a machine's: /root/.ssh in
launch/ (its Dockerfile makes it) is allowed; so are this file's examples (ALLOWED).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# An absolute path under a home or work folder: "/work/", "/home/", "/root/", "/Users/", or a
# session's job folder "/tmp/bash_jobs...". Not preceded by a word character, ".", "~" or "-",
# so "../work/x", "~/work", "github.com/home/x" and "--root/" do not count.
MACHINE_PATH = re.compile(r"(?<![\w.~-])(?:/(?:work|home|root|Users)/|/tmp/bash_jobs)\S*")

# (folder or file of the repository, path prefix allowed there, why)
ALLOWED = [
    ("launch/", "/root/.ssh", "the ssh folder of the launch/ Docker image's root user"),
    ("tests/test_no_machine_paths.py", "/", "this file: examples of what the test finds"),
]


def _allowed(file: str, path: str) -> bool:
    return any(file.startswith(where) and path.startswith(prefix) for where, prefix, _ in ALLOWED)


def machine_paths(file: str, text: str) -> list[str]:
    """``file:line: path`` for every machine path in ``text`` that ALLOWED does not cover."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in MACHINE_PATH.finditer(line):
            if not _allowed(file, match.group()):
                found.append(f"{file}:{number}: {match.group()}")
    return found


def tracked_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (git ls-files lists the committed files)")
    done = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    )
    return [name for name in done.stdout.decode().split("\0") if name]


def test_no_machine_paths_in_tracked_files() -> None:
    offenders = []
    for name in tracked_files():
        path = ROOT / name
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data:  # binary
            continue
        offenders += machine_paths(name, data.decode("utf-8", errors="replace"))
    assert not offenders, (
        f"{len(offenders)} absolute path(s) of a development machine in committed files; write "
        "them relative to the repository root (or name only the file):\n" + "\n".join(offenders)
    )


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("text in /work/shared/papers/000_*.txt", True),
        ("see `/home/alice/dpnet/docs`", True),
        ("python /root/venv/bin/python -m dpnet.run", True),
        ("/Users/bob/data.csv", True),
        ("output in /tmp/bash_jobs.0/12/stdout", True),
        ("text in ../shared/papers/000_*.txt", False),
        ("~/work/dpnet and ./home/x", False),
        ("https://github.com/home/x", False),
        ("/usr/bin/env python and /opt/venv", False),
    ],
)
def test_pattern(line: str, found: bool) -> None:
    assert bool(machine_paths("docs/x.md", line)) is found


def test_allowed_only_where_listed() -> None:
    line = "mkdir -p /root/.ssh"
    assert machine_paths("launch/Dockerfile", line) == []
    assert machine_paths("benchmarks/common.py", line) != []
