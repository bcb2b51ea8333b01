"""Issue 45, item 4: every reasonable layout of a --groups file or list, groups that name
columns (a "column,group" mapping by index or by CSV header name), and the CSV header's
names in the results file. The groups and the names are the public schema (docs/privacy.md,
"The public schema"); every refusal is one line and exit 2 (in-process threads backend)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from dpnet.data import column_groups, groups_width, load_dataset, parse_groups
from dpnet.errors import DataError
from dpnet.run import main

NAMES = ("age", "income", "debt", "kids")
EXPECTED = [0, 1, 1, 0]  # age and kids together, income and debt together
RUN = ["--machines", "2", "--topology", "ring", "--max-rounds", "3", "--quiet"]

LAYOUTS = {
    "one line": "0,1,1,0",
    "one line, trailing comma and newline": "0,1,1,0,\n",
    "one per line": "0\n1\n1\n0\n",
    "whitespace": "0 1 1 0\n",
    "mixed": "0, 1\n1\t0,\n\n",
    "index mapping": "0,a\n1,b\n2,b\n3,a\n",
    "index mapping with header, unordered": "column,group\n3,7\n1,9\n0,7\n2,9\n",
    "name mapping": "age,demographics\nincome,money\ndebt,money\nkids,demographics\n",
    "name mapping with header, unordered": (
        "column,group\nkids,demographics\ndebt,money\nage,demographics\nincome,money\n"
    ),
    "quoted name mapping, CRLF": '"age",d\r\n"income",m\r\ndebt,m\r\nkids,d\r\n',
}


def _file(tmp_path: Path, text: str, name: str = "groups.txt") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _csv(path: Path, rows: int = 40, seed: int = 0, header: tuple[str, ...] | None = NAMES) -> str:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, 4)).round(3)
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    lines = [] if header is None else [",".join([*header, "y"])]
    lines += [",".join([*map(str, r), str(t)]) for r, t in zip(X, y, strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("dpnet: error: "), err
    return err[0]


def _run(tmp_path: Path, argv: list[str]) -> dict:
    out = tmp_path / "r.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([*argv, *RUN, "--output", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_parses_to_the_same_groups(tmp_path: Path, layout: str) -> None:
    spec = _file(tmp_path, LAYOUTS[layout])
    assert parse_groups(spec, 4, "d.csv", NAMES).tolist() == EXPECTED
    by_name = "name" in layout
    assert groups_width(spec) == (None if by_name else 4)  # a name mapping fits the header


def test_inline_lists() -> None:
    for spec in ("0,1,1,0", "0, 1, 1, 0", "0 1 1 0", "0,1,1,0,"):
        assert parse_groups(spec, 4).tolist() == EXPECTED


def test_group_labels_as_given() -> None:
    assert column_groups("5,5,3,9", 4).labels == (3, 5, 9)
    assert column_groups("size:2", 4).labels is None and column_groups(None, 4).labels is None


@pytest.mark.parametrize(
    ("text", "names", "needle"),
    [
        ("", NAMES, "empty (expected 'none', 'size:K', group ids separated by commas"),
        ("0,1,x,0", NAMES, "group ids must be integers (line 1; expected"),
        ("0,,1,0", NAMES, "group ids must be integers"),
        ("0,1,1", NAMES, "3 group ids for 4 columns"),
        ("0,-1,1,0", NAMES, "negative group id -1"),
        ("age,d\nincome,m\ndebt,m\n", NAMES, "column 'kids' is not listed"),
        ("age,d\nincome,m\ndebt,m\nkids,d\nrent,m\n", NAMES, "no feature column named 'rent'"),
        ("age,d\nage,m\ndebt,m\nkids,d\n", NAMES, "column 'age' is listed twice"),
        ("0,d\nincome,m\n", NAMES, "line 1 gives a column index, other lines column names"),
        ("age,d\nincome,m\n", None, "maps columns by name, but d.csv has no column names"),
        ("0,a\n1,b\n3,a\n4,b\n", None, "column index 4 out of range 0..3"),
        ("0,a\n1,b\n2,a\n", None, "3 columns mapped, the data has 4"),
        ("0,a\n1,b\n1,a\n3,b\n", None, "column 1 is listed twice"),
    ],
)
def test_malformed_groups_files(
    tmp_path: Path, text: str, names: tuple | None, needle: str
) -> None:
    with pytest.raises(DataError) as info:
        parse_groups(_file(tmp_path, text), 4, "d.csv", names)
    message = str(info.value)
    assert needle in message and "\n" not in message


def test_the_loader_maps_names_by_the_header(tmp_path: Path) -> None:
    data = load_dataset(_csv(tmp_path / "d.csv"), groups=_file(tmp_path, LAYOUTS["name mapping"]))
    assert data.feature_names == NAMES and data.groups.tolist() == EXPECTED
    assert data.group_names == ("demographics", "money")


@pytest.mark.parametrize(
    "layout", ["one line", "index mapping", "name mapping with header, unordered"]
)
def test_the_cli_runs_each_kind_of_layout(tmp_path: Path, layout: str) -> None:
    spec = _file(tmp_path, LAYOUTS[layout])
    report = _run(tmp_path, ["--data", _csv(tmp_path / "d.csv"), "--groups", spec])
    assert report["column_groups"] == EXPECTED
    assert report["feature_names"] == list(NAMES)
    assert len(report["coef"]) == 4


@pytest.mark.parametrize("backend", ["threads", "simulated"])
@pytest.mark.parametrize("data", ["d.csv", "p-{rank}.csv"])
def test_the_results_file_carries_names_and_group_labels(
    tmp_path: Path, data: str, backend: str
) -> None:
    for j in range(2):
        _csv(tmp_path / f"p-{j}.csv", seed=j)
    _csv(tmp_path / "d.csv")
    spec = _file(tmp_path, LAYOUTS["name mapping"])
    argv = ["--data", str(tmp_path / data), "--groups", spec, "--backend", backend]
    report = _run(tmp_path, argv)
    assert report["backend"] == backend
    assert report["feature_names"] == list(NAMES)
    assert report["column_groups"] == EXPECTED
    labels = ["demographics", "money", "money", "demographics"]
    assert report["column_group_labels"] == labels
    assert report["selected_group_labels"] == [
        ["demographics", "money"][g] for g in report["selected_groups"]
    ]


def test_without_names_or_labels_the_fields_are_null(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 4))
    np.savez(tmp_path / "d.npz", X=X, y=(X[:, 0] > 0).astype(int))
    report = _run(tmp_path, ["--data", str(tmp_path / "d.npz"), "--groups", "size:2"])
    assert report["feature_names"] is None and report["column_group_labels"] is None
    assert report["selected_group_labels"] is None
    headerless = _csv(tmp_path / "h.csv", header=None)
    report = _run(tmp_path, ["--data", headerless, "--groups", "3,3,1,1"])
    assert report["feature_names"] is None
    assert report["column_group_labels"] == [3, 3, 1, 1]


def test_a_name_mapping_needs_a_csv_header(capsys, tmp_path: Path) -> None:
    spec = _file(tmp_path, LAYOUTS["name mapping"])
    X = np.random.default_rng(0).standard_normal((40, 4))
    np.savez(tmp_path / "d.npz", X=X, y=(X[:, 0] > 0).astype(int))
    msg = _error(capsys, ["--data", str(tmp_path / "d.npz"), "--groups", spec, *RUN])
    assert "maps columns by name, but" in msg and "is no CSV file" in msg
    headerless = _csv(tmp_path / "h.csv", header=None)
    msg = _error(capsys, ["--data", headerless, "--groups", spec, *RUN])
    assert "has no column names (only a CSV file's header row gives them)" in msg
    index = _file(tmp_path, LAYOUTS["index mapping"], "index.txt")  # by index: no names needed
    assert _run(tmp_path, ["--data", str(tmp_path / "d.npz"), "--groups", index])["coef"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("age,d\nincome,m\ndebt,m\n", "column 'kids' is not listed"),
        ("age,d\nincome,m\ndebt,m\nkids,d\nrent,m\n", "no feature column named 'rent'"),
        ("0,1,1\nx\n", "group ids must be integers"),
    ],
)
def test_cli_refusals_are_one_line(capsys, tmp_path: Path, text: str, needle: str) -> None:
    data = _csv(tmp_path / "d.csv")
    msg = _error(capsys, ["--data", data, "--groups", _file(tmp_path, text), *RUN])
    assert needle in msg
    assert "0." not in msg  # no value of a row


def test_per_machine_headers_must_agree(capsys, tmp_path: Path) -> None:
    _csv(tmp_path / "p-0.csv")
    _csv(tmp_path / "p-1.csv", header=("age", "income", "kids", "debt"))
    msg = _error(capsys, ["--data", str(tmp_path / "p-{rank}.csv"), *RUN])
    assert "machine 1's data: its header names feature column 2 'kids', machine 0's 'debt'" in msg


def test_the_test_file_header_must_agree(capsys, tmp_path: Path) -> None:
    data = _csv(tmp_path / "d.csv")
    test = _csv(tmp_path / "t.csv", header=("income", "age", "debt", "kids"))
    msg = _error(capsys, ["--data", data, "--test-data", test, *RUN])
    assert "t.csv: its header names feature column 0 'income'" in msg


def test_the_estimator_takes_names() -> None:
    pd = pytest.importorskip("pandas")
    from dpnet.estimators import DecentralizedGroupLassoLogistic

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 4))
    y = (X[:, 0] > 0).astype(int)
    frame = pd.DataFrame(X, columns=list(NAMES))
    fits = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for groups, data in [
            ({"kids": "d", "age": "d", "income": "m", "debt": "m"}, frame),
            (["d", "m", "m", "d"], X),
            (EXPECTED, X),
        ]:
            model = DecentralizedGroupLassoLogistic(
                groups=groups, epsilon=np.inf, max_rounds=3, n_machines=2
            )
            fits.append(model.fit(data, y).coef_)
        np.testing.assert_array_equal(fits[0], fits[1])
        np.testing.assert_array_equal(fits[0], fits[2])
        for groups, data, needle in [
            ({"age": "d"}, frame, "no group for column 'income'"),
            ({**dict.fromkeys(NAMES, 1), "rent": 2}, frame, "names 'rent', no column"),
            ({"age": "d"}, X, "needs X as a pandas DataFrame"),
        ]:
            model = DecentralizedGroupLassoLogistic(groups=groups, max_rounds=3, n_machines=2)
            with pytest.raises(Exception, match=needle):
                model.fit(data, y)


def test_the_names_reach_rank_0_under_mpiexec(tmp_path: Path) -> None:
    """With {rank} CSV files each process reads its own header; rank 0 writes its own (every
    machine's agree: the set-up exchange compares them)."""
    from tests.launch import run_job

    for j in range(2):
        _csv(tmp_path / f"p-{j}.csv", seed=j)
    spec = _file(tmp_path, LAYOUTS["name mapping with header, unordered"])
    argv = ["--data", "p-{rank}.csv", "--groups", spec, *RUN, "--output", "r.json"]
    done = run_job(argv, n_ranks=2, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["feature_names"] == list(NAMES)
    assert report["column_group_labels"] == ["demographics", "money", "money", "demographics"]
    _csv(tmp_path / "p-1.csv", header=("age", "income", "kids", "debt"))
    done = run_job(argv, n_ranks=2, cwd=tmp_path)
    assert done.returncode == 2
    assert "header names feature column 2 'kids', machine 0's 'debt'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
