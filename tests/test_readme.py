"""The README's Python example runs as printed, and no relative link of README.md or
docs/index.md is stale (the file exists; an anchor into a Markdown file names one of its
headings, as GitHub spells it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINKING = ["README.md", "docs/index.md"]  # the pages whose links must all resolve

FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def python_example(readme: str) -> str:
    """The first ```python block of ``readme``."""
    match = re.search(r"^```python\n(.*?)^```", readme, re.M | re.S)
    assert match, "README.md has no ```python block"
    return match.group(1)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces -> '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    text = FENCE.sub("", markdown)  # a '# comment' in a code block is no heading
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def stale_links(page: Path) -> list[str]:
    """Each relative link of ``page`` whose file is missing or whose anchor is not a heading."""
    stale = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            stale.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text("utf-8")):
            stale.append(f"{target}: no heading #{anchor} in {file.name}")
    return stale


@pytest.mark.timeout(150)  # above the subprocess's 120 s
def test_readme_python_example_runs(tmp_path: Path) -> None:
    code = python_example((ROOT / "README.md").read_text(encoding="utf-8"))
    assert "DecentralizedGroupLassoLogistic" in code
    script = tmp_path / "readme_example.py"
    script.write_text(code, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip(), "the example printed nothing"


@pytest.mark.parametrize("name", LINKING)
def test_relative_links_resolve(name: str) -> None:
    page = ROOT / name
    links = LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8")))
    assert links, f"{name} links nowhere"
    assert not stale_links(page), f"stale links in {name}: " + "; ".join(stale_links(page))


def test_docs_index_lists_every_page() -> None:
    links = LINK.findall((ROOT / "docs/index.md").read_text(encoding="utf-8"))
    listed = {link.partition("#")[0] for link in links}
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    assert not pages - listed, f"docs pages missing from docs/index.md: {sorted(pages - listed)}"


def test_the_link_checker_finds_stale_links(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\n## Exit codes (`--x y`)\n", encoding="utf-8")
    page = tmp_path / "p.md"
    page.write_text(
        "[ok](a.md) [ok](a.md#exit-codes---x-y) [ok](#here) [web](https://x.org/b.md)\n"
        "## Here\n```\n# not-a-heading\n[skipped](gone.md)\n```\n"
        "[gone](gone.md) [bad](a.md#not-a-heading)\n",
        encoding="utf-8",
    )
    assert stale_links(page) == [
        "gone.md: no such file",
        "a.md#not-a-heading: no heading #not-a-heading in a.md",
    ]


def _exit_codes(path: Path) -> set[int]:
    """The codes of the table under a file's '## Exit codes' heading ('130 / 143' is two)."""
    text = path.read_text(encoding="utf-8").split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([0-9][0-9 /]*) \|", text, flags=re.MULTILINE)
    return {int(code) for row in rows for code in row.split("/")}


def test_the_exit_code_tables_agree_and_list_every_code() -> None:
    """The README's short table and docs/cli.md's full one list the same codes: every code of
    dpnet.errors, and 9, hydra's for a killed rank under mpiexec (missing from both before,
    issue 45 item 8)."""
    from dpnet import errors

    ours = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    readme, cli = _exit_codes(ROOT / "README.md"), _exit_codes(ROOT / "docs" / "cli.md")
    assert readme == cli
    assert ours | {0, 9} == readme
