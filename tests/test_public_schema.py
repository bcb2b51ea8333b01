"""The public schema (docs/privacy.md, "The public schema"): no private row shapes the release.

Neighbouring data sets D and D' differ in one record. For every input format (npz, CSV,
LIBSVM, one file per machine in each, always with a public ``--test-data`` file), the record
of D' is changed to use a column no other row uses (in LIBSVM also an index above the
declared width and the index 0), to carry the label value no other row has (all rows ``2``,
one ``4``, with ``--labels 2,4``) or an extreme in-domain value (1e50). Under ``--privacy
record`` with the released thetas held fixed (:func:`tests.varied_randomness.fixed_theta`)
and the clocks stopped, D and D' must then give the same exit code and byte-identical
stdout, stderr and results file: widths, groups, message sizes (the results' traffic
fields), refusals and everything else structural come from the declared schema. The width
was the largest LIBSVM index of the private rows, and one index 0 shifted every column.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from dpnet.data import load_dataset, split_rows
from dpnet.decentralized import boundary
from dpnet.errors import ConfigError, DataError
from dpnet.run import main
from tests.launch import run_job
from tests.varied_randomness import (
    FIXED_THETAS_VARIABLE,
    KEY_VARIABLE,
    MESSAGES_VARIABLE,
    fixed_theta,
)

N, J, P, USED, CHANGED = 24, 3, 6, 4, 13  # rows, machines, declared width, columns D uses
EXT = {"npz": "npz", "csv": "csv", "libsvm": "libsvm"}
FORMATS = [*EXT, *(f"{kind} {{rank}}" for kind in EXT)]
SCHEMA = ["--n-features", str(P), "--groups", "size:4", "--labels", "2,4"]
RECORD = ["--privacy", "record", "--epsilon", "1", "--row-bound", "3", "--machines", str(J)]
RUN = [*SCHEMA, *RECORD, "--max-rounds", "3", "--progress-every", "1", "--output", "r.json"]

Record = tuple[str, dict[int, float]]  # (label, {one-based index: value})


def _records(seed: int, n: int, width: int, labels: tuple[str, ...]) -> list[Record]:
    rng = np.random.default_rng(seed)
    return [
        (str(rng.choice(labels)), {k + 1: round(float(rng.normal()), 4) for k in range(width)})
        for _ in range(n)
    ]


def _set(index: int, value: float) -> Callable[[Record], Record]:
    return lambda record: (record[0], {**record[1], index: value})


CHANGES: dict[str, tuple[Callable[[Record], Record], bool]] = {
    # (the change of one record, whether only LIBSVM can hold it)
    "a column no other row uses": (_set(P, 1.5), False),
    "a LIBSVM index above the declared width": (_set(P + 3, 1.5), True),
    "the LIBSVM index 0": (_set(0, 1.5), True),
    "the label value no other row has": (lambda record: ("4", record[1]), False),
    "an extreme in-domain value": (_set(1, 1e50), False),
}


def _write(path: Path, records: list[Record]) -> None:
    """``records`` as ``path``'s format; a dense format holds columns 1..P."""
    if path.suffix == ".libsvm":
        lines = [f"{y} " + " ".join(f"{k}:{v!r}" for k, v in sorted(x.items())) for y, x in records]
        path.write_text("\n".join(lines) + "\n")
        return
    X = np.zeros((len(records), P))
    for row, (_, x) in enumerate(records):
        for k, v in x.items():
            X[row, k - 1] = v
    labels = np.array([float(y) for y, _ in records])
    if path.suffix == ".npz":
        np.savez(path, X=X, y=labels)
        return
    header = ",".join([*(f"x{k}" for k in range(1, P + 1)), "y"])
    rows = [",".join([*map(repr, x.tolist()), y]) for x, (y, _) in zip(X, records, strict=True)]
    path.write_text("\n".join([header, *rows]) + "\n")


def _data_set(workdir: Path, layout: str, change: str | None) -> list[str]:
    """Write D (``change`` None) or D' into ``workdir``; the job's --data and --test-data."""
    kind = layout.split()[0]
    records = _records(0, N, USED, ("2",))
    if change is not None:
        records[CHANGED] = CHANGES[change][0](records[CHANGED])
    workdir.mkdir()
    _write(workdir / f"t.{EXT[kind]}", _records(1, 10, P, ("2", "4")))  # public, all P columns
    if "{rank}" not in layout:
        _write(workdir / f"d.{EXT[kind]}", records)
        return ["--data", f"d.{EXT[kind]}", "--test-data", f"t.{EXT[kind]}"]
    for j, rows in enumerate(split_rows(N, J)):
        _write(workdir / f"part-{j}.{EXT[kind]}", [records[i] for i in rows])
    return ["--data", f"part-{{rank}}.{EXT[kind]}", "--test-data", f"t.{EXT[kind]}"]


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    results: bytes | None

    def report(self) -> dict:
        assert self.results is not None, self.stderr
        return json.loads(self.results)


@pytest.fixture
def clocks_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every clock dpnet reads reads 0 in this process (restored after the test), as in
    tests/stopped_clocks.py: timings and the time stamp are not part of the comparison."""
    for clock in ("perf_counter", "process_time", "thread_time", "time"):
        monkeypatch.setattr(f"time.{clock}", lambda: 0.0)


@pytest.fixture
def released_fixed(monkeypatch: pytest.MonkeyPatch, clocks_stopped: None) -> None:
    """The released thetas held fixed, in this process (restored after the test): what
    tests/varied_randomness.py does in a job's process."""
    monkeypatch.setattr(boundary, "release_theta", fixed_theta)


def _run(workdir: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> Outcome:
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(workdir)
        code = main(argv)
    out, err = capsys.readouterr()
    results = workdir / "r.json"
    return Outcome(code, out, err, results.read_bytes() if results.exists() else None)


def _cases() -> list[tuple[str, str]]:
    return [
        (layout, change)
        for layout in FORMATS
        for change, (_, libsvm_only) in CHANGES.items()
        if layout.startswith("libsvm") or not libsvm_only
    ]


@pytest.mark.usefixtures("released_fixed")
@pytest.mark.parametrize("backend", ["threads", "simulated"])
@pytest.mark.parametrize(("layout", "change"), _cases())
def test_one_changed_record_changes_nothing_released(tmp_path, capsys, layout, change, backend):
    runs = []
    for name, changed in (("D", None), ("D'", change)):
        files = _data_set(tmp_path / name.replace("'", "-prime"), layout, changed)
        argv = [*files, *RUN, "--backend", backend]
        runs.append(_run(tmp_path / name.replace("'", "-prime"), argv, capsys))
    d, d_prime = runs
    assert d.code == 0, d.stderr
    report = d.report()
    assert len(report["coef"]) == P and report["column_groups"] == [0, 0, 0, 0, 1, 1]
    assert d_prime.code == d.code
    assert d_prime.stderr == d.stderr
    assert d_prime.stdout == d.stdout
    assert d_prime.results == d.results, f"the results file depends on {change}"


@pytest.mark.usefixtures("clocks_stopped")
@pytest.mark.parametrize("backend", ["threads", "simulated"])
def test_structure_under_label_privacy(tmp_path, capsys, backend):
    """No theta held fixed, label privacy: the released values differ (the fit reads the
    changed row's new column), the structure does not: exit code, stderr, widths, groups,
    traffic and every other count of the results file."""
    runs = []
    for name, changed in (("D", None), ("D-prime", "a column no other row uses")):
        files = _data_set(tmp_path / name, "libsvm {rank}", changed)
        argv = [*files, *SCHEMA, "--machines", str(J), "--max-rounds", "3", "--quiet"]
        argv += ["--output", "r.json", "--backend", backend]
        runs.append(_run(tmp_path / name, argv, capsys))
    d, d_prime = (run.report() for run in runs)
    assert runs[0].code == runs[1].code == 0 and runs[0].stderr == runs[1].stderr
    assert _structure(d) == _structure(d_prime)
    assert len(d["coef"]) == P and d["column_groups"] == d_prime["column_groups"]
    assert d["objective"] != d_prime["objective"], "the changed record should reach the fit"


def _structure(value: object) -> object:
    """Keys, lengths, strings and integers (counts: rows, rounds, bytes, messages) of a
    report; floats (released values) and the selected groups (which coefficients are
    non-zero: a released value) reduced to their type."""
    if isinstance(value, dict):
        return {k: "value" if k == "selected_groups" else _structure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_structure(v) for v in value]
    return "float" if isinstance(value, float) else value


@pytest.mark.mpi_launch
@pytest.mark.parametrize("backend", ["threads", "mpiexec"])
def test_per_machine_libsvm_files_send_the_same_bytes(tmp_path, backend):
    """The whole hook in a job's processes (tests/varied_randomness.py), on threads and under
    mpiexec: every message a machine sends, and every operation each process performs on the
    rows, hash the same for D and D' (an index above the width)."""
    released = []
    for name, changed in (("D", None), ("D-prime", "a LIBSVM index above the declared width")):
        workdir = tmp_path / name
        argv = [*_data_set(workdir, "libsvm {rank}", changed), *RUN]
        argv += ["--backend", "threads"] if backend == "threads" else []
        (workdir / "messages").mkdir()
        env = {KEY_VARIABLE: "1", FIXED_THETAS_VARIABLE: "1", MESSAGES_VARIABLE: "messages"}
        n_ranks = J if backend == "mpiexec" else None
        done = run_job(
            argv, n_ranks=n_ranks, module="tests.varied_randomness", cwd=workdir, env=env
        )
        assert done.returncode == 0, done.stderr
        digests = sorted(
            line
            for file in (workdir / "messages").glob("*.txt")
            for line in file.read_text().splitlines()
        )
        released.append((done.stdout, done.stderr, (workdir / "r.json").read_bytes(), digests))
    assert any("operations" in line for line in released[0][3])
    assert any("neighbour messages" in line for line in released[0][3])
    assert released[0] == released[1]


# the schema is declared before any row is read


def _refusal(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main([*argv, "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("dpnet: error: "), err
    return err[0]


@pytest.mark.parametrize(
    "files",
    [
        ["--data", "absent.libsvm"],
        ["--data", "part-{rank}.libsvm"],
        ["--data", "absent.csv", "--test-data", "absent.libsvm"],
        ["--data", "absent.libsvm", "--groups", "size:2"],
    ],
)
def test_a_libsvm_file_without_a_declared_width_is_refused_unread(capsys, tmp_path, files):
    """Refused by its name alone: none of these files exists, so none was opened."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        line = _refusal(capsys, files)
    assert "a LIBSVM file carries no width: declare it with --n-features P" in line


def test_declared_widths_must_agree_before_any_row_is_read(capsys, tmp_path):
    (tmp_path / "g.txt").write_text("0 0 1 1 2\n")
    for groups, ids in (("0,0,1", 3), (str(tmp_path / "g.txt"), 5)):
        argv = ["--data", str(tmp_path / "absent.npz"), "--n-features", "4", "--groups", groups]
        assert f"--n-features 4 but --groups gives {ids} ids" in _refusal(capsys, argv)
    assert "--n-features must lie in [1, 1e+09)" in _refusal(capsys, ["--n-features", "0"])
    assert "declares the width of --data files" in _refusal(capsys, ["--n-features", "3"])


def test_a_groups_list_declares_the_width(tmp_path, capsys):
    path = tmp_path / "d.libsvm"
    _write(path, _records(0, N, USED, ("-1", "1")))
    out = tmp_path / "r.json"
    argv = ["--data", str(path), "--groups", "0,0,1,1,2,2,3", "--test-fraction", "0"]
    assert main([*argv, "--max-rounds", "2", "--quiet", "--output", str(out)]) == 0
    assert json.loads(out.read_text())["column_groups"] == [0, 0, 1, 1, 2, 2, 3]


@pytest.mark.parametrize("kind", ["csv", "npz"])
def test_a_file_of_another_width_than_the_declared_one_is_refused(tmp_path, kind):
    path = tmp_path / f"d.{kind}"
    _write(path, _records(0, N, USED, ("-1", "1")))
    assert load_dataset(path, n_features=P).X.shape == (N, P)
    with pytest.raises(DataError, match=f"{P} feature columns, the declared width is {P + 1} "):
        load_dataset(path, n_features=P + 1)


def test_libsvm_indices_are_one_based_and_mapped_into_the_declared_width(tmp_path):
    """Index k is column k - 1, whatever other rows hold; 0, P + 1 and indices beyond what
    the reader holds are dropped from their row; the width is P however few columns the
    rows use."""
    path = tmp_path / "d.libsvm"
    path.write_text(
        "1 0:9 1:1 3:3\n"
        "-1 2:2 4:7 123456789012:5\n"  # index 4 = P + 1 for P = 3, then one of twelve digits
        "1 00000000007:8 +99999999999:9\n"  # leading zeros: the index 7; a sign
    )
    data = load_dataset(path, n_features=3)
    np.testing.assert_array_equal(data.X, [[1, 0, 3], [0, 2, 0], [0, 0, 0]])
    assert load_dataset(path, n_features=7).X[2].tolist() == [0, 0, 0, 0, 0, 0, 8]
    with pytest.raises(ConfigError, match="a LIBSVM file carries no width"):
        load_dataset(path)
