"""The documentation site: Sphinx with MyST Markdown, built from the repository root.

The pages are the repository's own Markdown files, read where they are, so every relative link
means on the site what it means on GitHub: ``docs/cli.md`` from README.md, ``../README.md`` from
docs/, ``cli.md#exit-codes`` (headings get GitHub's anchors, ``myst_heading_anchors``). A link
to a file that is not a page (``../dpnet/decentralized/termination.py``) becomes a download of
that file. Built with ``-W``, the build fails on a link to a missing page or file, an anchor
that is no heading, and a page left out of ``NAV`` (Sphinx's "document isn't included in any
toctree"). Build and serve: docs/development.md; CI builds it: tests/test_docs_site.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphinx.application import Sphinx

_ROOT = Path(__file__).resolve().parent

project = "dpnet"
_VERSION = re.search(r'^__version__ = "([^"]+)"', (_ROOT / "dpnet/__init__.py").read_text(), re.M)
assert _VERSION, "dpnet/__init__.py has no __version__ line"
release = _VERSION.group(1)  # read, not imported: the site builds without dpnet's dependencies

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
myst_heading_anchors = 6  # every heading level gets GitHub's slug: [x](cli.md#exit-codes)

# The landing page is the README, as on GitHub and PyPI; docs/index.md lists every page.
root_doc = "README"
# Every page of the site, by section (the sidebar's order). All Markdown the site reads is
# here: a page not listed fails the build, a listed page that does not exist fails it too.
NAV: dict[str, list[str]] = {
    "": ["docs/index"],
    "Using dpnet": [
        "docs/cli",
        "docs/results-file",
        "docs/library",
        "docs/cross-validation",
        "docs/mpi",
        "launch/README",
        "topologies/README",
        "docs/development",
    ],
    "Privacy": [
        "docs/privacy",
        "docs/privacy-median-regression",
        "docs/privacy-rdp-admm",
    ],
    "Algorithms": [
        "docs/algorithms",
        "docs/large-networks",
        "docs/algorithms-median",
        "docs/algorithms-rdp-admm",
    ],
    "Measured results": [
        "docs/benchmarks",
        "docs/benchmarks-main",
        "docs/record-privacy-results",
        "docs/median-regression-results",
        "docs/rdp-admm-results",
        "docs/results-paper1",
        "docs/results-paper2",
        "docs/results-paper3",
    ],
}
# The Markdown files that are pages (the rest of the repository is not read: CHANGELOG.md
# is a release record, not documentation, and benchmarks/out/ holds generated reports; the
# excluded folders are skipped).
include_patterns = ["README.md", "docs/*.md", "launch/README.md", "topologies/README.md"]
exclude_patterns = [".git", ".venv", "venv", "build", "dist", "site", "benchmarks/out"]

html_theme = "alabaster"  # Sphinx's own theme: no dependency beyond Sphinx
html_title = f"dpnet {release}"
html_copy_source = False  # the sources are the repository's Markdown files


def _toctrees() -> str:
    """NAV as hidden toctrees: the sidebar's navigation, not shown in the page's text."""
    blocks = []
    for caption, pages in NAV.items():
        options = ":hidden:\n" + (f":caption: {caption}\n" if caption else "")
        blocks.append("```{toctree}\n" + options + "\n" + "\n".join(f"/{p}" for p in pages))
    return "\n\n" + "\n```\n\n".join(blocks) + "\n```\n"


def _add_nav(app: Sphinx, docname: str, source: list[str]) -> None:
    # Appended to the root page as read, not written into README.md, which GitHub and PyPI
    # render as it is.
    if docname == app.config.root_doc:
        source[0] += _toctrees()


def _redirect_index(app: Sphinx, exception: Exception | None) -> None:
    # The landing page is README.html; a plain index.html there sends a browser to it.
    if exception is None and app.builder.format == "html":
        target = f"{app.config.root_doc}.html"
        (Path(app.outdir) / "index.html").write_text(
            f'<!DOCTYPE html><meta charset="utf-8"><title>{project}</title>'
            f'<meta http-equiv="refresh" content="0; url={target}">'
            f'<a href="{target}">{project}</a>\n',
            encoding="utf-8",
        )


def setup(app: Sphinx) -> dict[str, bool]:
    app.connect("source-read", _add_nav)
    app.connect("build-finished", _redirect_index)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
