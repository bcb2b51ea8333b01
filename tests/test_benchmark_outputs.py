"""The paper benchmarks (benchmarks/paper1.py, paper2.py, paper3.py) write their report under
benchmarks/out/ (git-ignored) by default; the committed docs/results-paperN.md only with
``--update-docs``, which is refused (exit 2, one line) when a data set the page reports on is
missing, so a page with real results is never replaced by "not testable" rows.

Nothing is run: ``main`` is stopped at the report path it asks for (or at the refusal, which
comes before any work)."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from devtools.results import DOCS_DIR, OUT_DIR, report_path

PAPERS = ("paper1", "paper2", "paper3")
NEEDS_DATA = ("paper2", "paper3")  # pages reporting on a real data set (Adult, MEMset)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class Stop(Exception):
    """Raised in place of the run once the report path is known."""


def paper(name: str) -> ModuleType:
    """benchmarks.<name>, imported without keeping the BLAS thread limits it sets for itself."""
    before = {var: os.environ.get(var) for var in THREAD_VARS}
    try:
        return importlib.import_module(f"benchmarks.{name}")
    finally:
        for var, value in before.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def asked_path(name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The report path ``python -m benchmarks.<name> ARGV`` would write, without running it."""
    module = paper(name)
    seen: list[Path] = []

    def stop(*args, **kwargs) -> Path:
        seen.append(report_path(*args, **kwargs))
        raise Stop

    monkeypatch.setattr(module, "report_path", stop)
    monkeypatch.setattr(sys, "argv", [name, *argv])
    with pytest.raises(Stop):
        module.main()
    return seen[0]


def test_report_path_default_is_the_out_folder(tmp_path: Path) -> None:
    assert report_path("results-x.md", out=tmp_path, update_docs=False) == tmp_path / "results-x.md"
    missing = tmp_path / "no-data"
    path = report_path(
        "results-x.md", out=OUT_DIR, update_docs=False, data_dir=missing, needs=("d/f.csv",)
    )
    assert path == OUT_DIR / "results-x.md"
    assert not path.is_relative_to(DOCS_DIR)


def test_update_docs_writes_the_committed_page_when_the_data_is_there(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.csv").write_text("x\n")
    path = report_path(
        "results-x.md", out=OUT_DIR, update_docs=True, data_dir=tmp_path, needs=("d/f.csv",)
    )
    assert path == DOCS_DIR / "results-x.md"


def test_update_docs_refuses_without_the_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        report_path(
            "results-x.md", out=OUT_DIR, update_docs=True, data_dir=tmp_path, needs=("d/f.csv",)
        )
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "--update-docs refused" in err and "d/f.csv" in err


@pytest.mark.parametrize("name", PAPERS)
def test_default_run_writes_nothing_under_docs(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # without data, as in the issue: the default report still goes to benchmarks/out/
    argv = ["--mode", "quick", "--data-dir", str(tmp_path / "absent")]
    path = asked_path(name, argv, monkeypatch)
    assert path.is_relative_to(OUT_DIR) and not path.is_relative_to(DOCS_DIR)
    assert path.name == f"results-{name}.md"
    assert asked_path(name, [*argv, "--out", str(tmp_path)], monkeypatch) == (
        tmp_path / f"results-{name}.md"
    )


@pytest.mark.parametrize("name", NEEDS_DATA)
def test_update_docs_without_data_refuses_and_keeps_the_page(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = DOCS_DIR / f"results-{name}.md"
    before = page.read_bytes()
    module = paper(name)
    argv = [name, "--mode", "quick", "--update-docs", "--data-dir", str(tmp_path / "absent")]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as stopped:
        module.main()
    assert stopped.value.code == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and f"docs/results-{name}.md" in err
    assert page.read_bytes() == before


def test_paper1_update_docs_needs_no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # synthetic data only: its page reports on no data set
    argv = ["--mode", "quick", "--update-docs", "--data-dir", str(tmp_path / "absent")]
    assert asked_path("paper1", argv, monkeypatch) == DOCS_DIR / "results-paper1.md"
