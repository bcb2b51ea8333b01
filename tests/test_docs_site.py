"""The documentation site (conf.py: Sphinx + MyST) builds with every warning an error: no link to
a missing page or file, no anchor that is no heading, no Markdown page outside the navigation.
And that check can fail: the same configuration on stub pages with one of each breakage. The sdist
carries every page and every file they link to (MANIFEST.in)."""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAV: dict[str, list[str]] = runpy.run_path(str(ROOT / "conf.py"))["NAV"]
PAGES = ["README"] + [page for pages in NAV.values() for page in pages]


def build(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """The site of ``source`` built by the repository's conf.py into ``out``, as CI builds it
    (docs/development.md): warnings are errors, all of them reported."""
    command = ["-W", "--keep-going", "-q", "-b", "html", "-c", str(ROOT), str(source), str(out)]
    return subprocess.run(
        [sys.executable, "-m", "sphinx", *command],
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.timeout(300)
def test_the_site_builds_with_no_warning(tmp_path: Path) -> None:
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr + done.stdout  # -W: any warning fails it
    for page in PAGES:
        assert (tmp_path / "site" / f"{page}.html").is_file(), page
    assert "README.html" in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    # a link into the source tree is a download of that file
    downloads = list((tmp_path / "site" / "_downloads").glob("*/termination.py"))
    assert len(downloads) == 1


def stub_pages(source: Path) -> None:
    """Every page of NAV as a stub with one section, and one source file to link to."""
    for page in PAGES:
        (source / f"{page}.md").parent.mkdir(parents=True, exist_ok=True)
        (source / f"{page}.md").write_text(f"# {page}\n\n## A section\n", encoding="utf-8")
    (source / "dpnet").mkdir()
    (source / "dpnet" / "here.py").write_text("x = 1\n", encoding="utf-8")


@pytest.mark.timeout(300)
def test_a_broken_link_anchor_or_orphan_fails_the_build(tmp_path: Path) -> None:
    stub_pages(tmp_path / "good")
    (tmp_path / "good" / "docs" / "index.md").write_text(
        "# Index\n\n[a](cli.md#a-section) [b](../README.md) [c](../dpnet/here.py) [d](#index)\n",
        encoding="utf-8",
    )
    done = build(tmp_path / "good", tmp_path / "good-site")
    assert done.returncode == 0, done.stderr + done.stdout

    stub_pages(tmp_path / "bad")
    (tmp_path / "bad" / "docs" / "index.md").write_text(
        "# Index\n\n[a](cli.md#no-such-heading) [b](no-such-page.md) [c](../dpnet/gone.py)\n"
        "[d](#nowhere)\n",
        encoding="utf-8",
    )
    (tmp_path / "bad" / "docs" / "orphan.md").write_text("# Not in NAV\n", encoding="utf-8")
    done = build(tmp_path / "bad", tmp_path / "bad-site")
    assert done.returncode != 0
    for message in [
        "local id not found in doc 'docs/cli': 'no-such-heading'",
        "target not found: 'no-such-page.md'",
        "target not found: '../dpnet/gone.py'",
        "target not found: 'nowhere'",
        "orphan.md: WARNING: document isn't included in any toctree",
    ]:
        assert message in done.stderr, done.stderr


def shipped_by_manifest(path: str) -> bool:
    """Whether MANIFEST.in's ``include`` / ``recursive-include`` lines (the only kinds it has)
    put the repository file ``path`` in the sdist."""
    for line in (ROOT / "MANIFEST.in").read_text(encoding="utf-8").splitlines():
        words = line.partition("#")[0].split()
        if not words:
            continue
        assert words[0] in {"include", "recursive-include"}, f"MANIFEST.in: {line}"
        if words[0] == "include" and path in words[1:]:
            return True
        if words[0] == "recursive-include" and path.startswith(words[1] + "/"):
            if any(Path(path).match(pattern) for pattern in words[2:]):
                return True
    return False


def test_the_sdist_carries_every_page_and_every_file_they_link_to() -> None:
    """README.md's links go to docs/ and the launch/ and topologies/ READMEs: in an unpacked
    sdist they resolve (on PyPI, with no project URL yet, they cannot: docs/development.md)."""
    linked = {f"{page}.md" for page in PAGES} | {"conf.py"}
    for page in PAGES:
        text = re.sub(
            r"^```.*?^```", "", (ROOT / f"{page}.md").read_text("utf-8"), flags=re.M | re.S
        )
        for target in re.findall(r"\]\(([^)\s#]+)", text):
            if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # not https: ...
                file = (ROOT / page).parent / target
                linked.add(file.resolve().relative_to(ROOT).as_posix())
    assert "launch/README.md" in linked and "docs/cli.md" in linked
    in_package = {path for path in linked if path.startswith("dpnet/")}  # the package ships
    missing = sorted(p for p in linked - in_package - {"README.md"} if not shipped_by_manifest(p))
    assert not missing, f"not in the sdist (MANIFEST.in): {missing}"


def test_the_manifest_reader_tells_shipped_from_not() -> None:
    assert shipped_by_manifest("docs/cli.md") and shipped_by_manifest("topologies/README.md")
    assert not shipped_by_manifest("docs/sub/x.txt") and not shipped_by_manifest("launch/local.sh")
