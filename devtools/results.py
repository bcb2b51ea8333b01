"""Where the benchmarks write their reports (benchmarks/out/, git-ignored; the committed docs/
pages only with ``--update-docs``): shared by the benchmark scripts and the tests that pin
this policy (tests/test_benchmark_outputs.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "benchmarks" / "out"
DOCS_DIR = REPO / "docs"
DATA_DIR = Path(os.environ.get("DPNET_DATA_DIR", REPO.parent / "shared" / "data"))


def report_path(
    page: str,
    *,
    out: Path,
    update_docs: bool,
    data_dir: Path | None = None,
    needs: tuple[str, ...] = (),
) -> Path:
    """Where a paper report is written: ``out / page`` (under benchmarks/out/, git-ignored) by
    default; the committed ``docs/page`` only with ``--update-docs``.

    With ``--update-docs`` every file of ``needs`` (relative to the data folder: ``data_dir``
    as given by ``--data-dir``, else :data:`DATA_DIR`) must exist: otherwise the run is refused
    with one line on stderr and exit code 2, so a page with real results is never replaced by
    "not testable" rows. Call it before the run, so a refusal costs nothing.
    """
    if not update_docs:
        return Path(out) / page
    folder = Path(data_dir) if data_dir is not None else DATA_DIR
    missing = [name for name in needs if not (folder / name).is_file()]
    if missing:
        print(
            f"--update-docs refused: docs/{page} reports on {', '.join(missing)}, not found "
            f"under {folder} (pass --data-dir PATH, or drop --update-docs to write {page} "
            "under --out)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return DOCS_DIR / page
