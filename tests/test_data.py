"""Data layer: synthetic model III, GroupData validation, loaders, groups, partitions, scaling."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit
from sklearn.datasets import dump_svmlight_file
from sklearn.preprocessing import MinMaxScaler

from dpnet.data import (
    GroupData,
    LabelDomain,
    load_adult,
    load_dataset,
    load_ipums,
    load_memset,
    make_group_logistic,
    parse_groups,
    scale_rows,
    split_rows,
    to_pm1,
    train_test_split_indices,
)
from dpnet.errors import ConfigError, DataError

DATA_DIR = Path(
    os.environ.get("DPNET_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def _model3_D(X: np.ndarray) -> np.ndarray:
    """D written from the paper's formula, from u_3 and u_6 (1-based) only."""
    u3, u6 = X[:, 6], X[:, 15]
    return u3 + u3**2 + u3**3 + u6**3 / 3 - u6**2 + 2 * u6 / 3


# ---------------------------------------------------------------- synthetic generator


def test_synthetic_design() -> None:
    d = make_group_logistic(20_000, rng=np.random.default_rng(1)).validate()
    assert d.X.shape == (20_000, 48) and d.X.flags.c_contiguous and d.X.dtype == np.float64
    assert d.groups.tolist() == np.repeat(np.arange(16), 3).tolist()
    u = d.X[:, 0::3]
    np.testing.assert_allclose(d.X[:, 1::3], u * u, rtol=1e-14)
    np.testing.assert_allclose(d.X[:, 2::3], u * u * u, rtol=1e-14)
    # u ~ N(0, 1) iid: pooled KS test and near-zero cross-correlations (|r| < 5 / sqrt(n)).
    assert stats.kstest(u.ravel(), "norm").pvalue > 1e-3
    r = np.corrcoef(u, rowvar=False)
    assert np.abs(r[~np.eye(16, dtype=bool)]).max() < 5 / np.sqrt(20_000)
    # coef_true reproduces the paper's D; only groups 3 and 6 (1-based) are non-zero.
    np.testing.assert_allclose(d.X @ d.coef_true, _model3_D(d.X), rtol=1e-12, atol=1e-12)
    active = np.unique(d.groups[d.coef_true != 0])
    assert active.tolist() == [2, 5]
    assert d.feature_names[6:9] == ("u3^1", "u3^2", "u3^3")


def test_bernoulli_labels_follow_sigmoid() -> None:
    n = 200_000
    d = make_group_logistic(n, n_groups=6, rng=np.random.default_rng(7))
    prob = expit(_model3_D(d.X))
    pos = d.y == 1.0
    edges = np.quantile(prob, np.linspace(0, 1, 11))
    bins = np.clip(np.searchsorted(edges, prob, side="right") - 1, 0, 9)
    for b in range(10):
        m = bins == b
        # count of +1 in the bin: mean sum p_i, variance sum p_i (1 - p_i); 4.5 sigma.
        sd = np.sqrt(np.sum(prob[m] * (1 - prob[m])))
        assert abs(pos[m].sum() - prob[m].sum()) < 4.5 * sd + 1e-9, b
    assert set(np.unique(d.y)) == {-1.0, 1.0}


def test_threshold_rule_is_exact() -> None:
    d = make_group_logistic(5_000, label_rule="threshold", rng=np.random.default_rng(2))
    np.testing.assert_array_equal(d.y == 1.0, expit(_model3_D(d.X)) >= 0.5)
    assert np.all(d.y * (d.X @ d.coef_true) >= 0)  # separable by beta*


def test_synthetic_seeded_and_errors() -> None:
    a = make_group_logistic(50, n_groups=8, rng=np.random.default_rng(3))
    b = make_group_logistic(50, n_groups=8, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    assert a.X.shape == (50, 24) and a.n_groups == 8
    with pytest.raises(ConfigError, match="n_groups must be >= 6"):
        make_group_logistic(10, n_groups=5, rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match="label_rule"):
        make_group_logistic(10, label_rule="probit", rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match="n_samples"):
        make_group_logistic(0, rng=np.random.default_rng(0))


# ---------------------------------------------------------------- GroupData and labels


def _ok() -> GroupData:
    X = np.arange(12, dtype=np.float64).reshape(4, 3)
    return GroupData(X, np.array([1.0, -1.0, 1.0, -1.0]), np.array([0, 0, 1], dtype=np.int64))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"X": np.array([[np.nan, 1, 2]] * 4)}, "X contains NaN or inf"),
        ({"y": np.array([1.0, -1.0, np.inf, 1.0])}, "y contains NaN or inf"),
        ({"y": np.array([1.0, -1.0, 1.0])}, "y has shape \\(3,\\), expected \\(4,\\)"),
        ({"y": np.array([1.0, 0.0, 1.0, 0.0])}, "labels must be -1 or \\+1"),
        ({"y": np.ones(4)}, "both classes"),
        ({"groups": np.array([0, 1], dtype=np.int64)}, "one id per column \\(3\\)"),
        ({"groups": np.array([0, -1, 1], dtype=np.int64)}, "negative"),
        ({"groups": np.array([0, 0, 2], dtype=np.int64)}, "0..G-1 with no gaps"),
        ({"groups": np.array([0.0, 0.0, 1.0])}, "groups must be int64"),
        ({"X": np.ones((4, 3), dtype=np.float32)}, "2-D float64"),
        ({"X": np.asfortranarray(np.ones((4, 3)))}, "C-contiguous"),
        ({"coef_true": np.zeros(2)}, "coef_true has shape"),
    ],
)
def test_validate_errors(change: dict, message: str) -> None:
    base = _ok()
    fields = {k: getattr(base, k) for k in ("X", "y", "groups", "coef_true", "feature_names")}
    fields.update(change)
    with pytest.raises(DataError, match="^mydata: .*" + message):
        GroupData(**fields).validate("mydata")
    assert base.validate() is base


def test_subset() -> None:
    d = _ok().subset(np.array([3, 1]))
    np.testing.assert_array_equal(d.X, [[9, 10, 11], [3, 4, 5]])
    assert d.y.tolist() == [-1.0, -1.0] and d.X.flags.c_contiguous


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ([0, 1, 1, 0], [-1, 1, 1, -1]),
        ([2, 1, 2], [1, -1, 1]),
        ([-1.0, 1.0, 1.0], [-1, 1, 1]),
        (["yes", "no", "yes"], [1, -1, 1]),
        ([True, False], [1, -1]),
    ],
)
def test_to_pm1(labels: list, expected: list) -> None:
    out = to_pm1(labels)
    assert out.dtype == np.float64 and out.tolist() == expected


@pytest.mark.parametrize(
    ("spec", "labels", "expected"),
    [
        (None, [0, 1, 1], [-1, 1, 1]),
        (None, [-1.0, 1.0, -1.0], [-1, 1, -1]),
        (None, [True, False], [1, -1]),
        (None, [1, 1, 1], [1, 1, 1]),  # one class is a valid data set
        (None, [0, 0], [-1, -1]),
        ("no,yes", ["yes", "no", " yes"], [1, -1, 1]),
        ("2,4", [4, 4, 2], [1, 1, -1]),
        ("2,4", ["4", "4.0", "2"], [1, 1, -1]),
    ],
)
def test_label_domain_is_a_fixed_public_map(spec, labels, expected) -> None:
    out = LabelDomain.parse(spec).to_pm1(labels)
    assert out.dtype == np.float64 and out.tolist() == expected


def test_label_domain_errors_name_the_row_not_the_value() -> None:
    with pytest.raises(DataError) as info:
        LabelDomain().to_pm1([1, 0, 7, 1, 5], source="f.csv")
    text = str(info.value)
    assert "f.csv: 2 label(s) outside the label domain" in text and "data row 3" in text
    assert "7" not in text.replace("f.csv", "") and "5" not in text
    with pytest.raises(DataError, match="outside"):
        LabelDomain().to_pm1([0.0, np.nan])
    for bad in ("1", "a,b,c", ",1", "1,1"):
        with pytest.raises(ConfigError):
            LabelDomain.parse(bad)


def test_to_pm1_errors() -> None:
    with pytest.raises(DataError, match="exactly two values, found 3: \\[0, 1, 2\\]"):
        to_pm1([0, 1, 2])
    with pytest.raises(DataError, match="found 1"):
        to_pm1([1, 1])
    with pytest.raises(DataError, match="NaN"):
        to_pm1([0.0, np.nan])
    with pytest.raises(DataError, match="vector"):
        to_pm1(np.zeros((2, 2)))


# ---------------------------------------------------------------- loaders


def _xy(n: int = 30, p: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.round(rng.standard_normal((n, p)), 6)
    y = np.tile([0, 1], n // 2)
    return X, y


def test_npz_round_trip(tmp_path: Path) -> None:
    X, y = _xy()
    path = tmp_path / "d.npz"
    np.savez(path, X=X, y=y, groups=np.array([5, 5, 9, 9]))
    d = load_dataset(path)
    np.testing.assert_array_equal(d.X, X)
    assert d.y.tolist() == np.where(y == 1, 1.0, -1.0).tolist()
    assert d.groups.tolist() == [0, 0, 1, 1]  # relabelled in sorted order
    assert load_dataset(path, groups="none").groups.tolist() == [0, 1, 2, 3]
    np.savez(path, X=X, y=y)
    assert load_dataset(path, groups="size:3").groups.tolist() == [0, 0, 0, 1]


def test_csv_round_trip(tmp_path: Path) -> None:
    X, y = _xy()
    lab = np.where(y == 1, "pos", "neg")
    rows = [f"{a},{lb},{b},{c},{e}" for (a, b, c, e), lb in zip(X, lab, strict=True)]
    path = tmp_path / "d.csv"
    path.write_text("f1,y,f2,f3,f4\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError, match="outside the label domain .* --labels NEG,POS"):
        load_dataset(path, groups="0,0,1,1")
    d_labels = LabelDomain.parse("neg,pos")
    d = load_dataset(path, groups="0,0,1,1", labels=d_labels)
    np.testing.assert_array_equal(d.X, X)
    assert d.y.tolist() == np.where(lab == "pos", 1.0, -1.0).tolist()
    assert d.feature_names == ("f1", "f2", "f3", "f4")
    np.testing.assert_array_equal(load_dataset(path, label_column=1, labels=d_labels).y, d.y)
    small = tmp_path / "s.csv"
    small.write_text("a,b,c\n1,0,5\n2,1,6\n3,0,7\n")
    s = load_dataset(small, label_column="b")
    assert s.X.tolist() == [[1, 5], [2, 6], [3, 7]] and s.y.tolist() == [-1, 1, -1]
    with pytest.raises(DataError, match="3 label\\(s\\) outside the label domain .* row 1;"):
        load_dataset(small, label_column="c")
    # headerless, label last, gzipped
    gz = tmp_path / "d.csv.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("\n".join(",".join(map(str, [*x, t])) for x, t in zip(X, y, strict=True)))
    d2 = load_dataset(gz)
    np.testing.assert_array_equal(d2.X, X)
    assert d2.feature_names is None and d2.y.tolist() == np.where(y == 1, 1.0, -1.0).tolist()
    d3 = load_dataset(gz, label_column=-1)
    np.testing.assert_array_equal(d3.X, X)


def test_libsvm_round_trip(tmp_path: Path) -> None:
    X, y = _xy()
    X[X < 0.5] = 0.0  # sparse-ish
    for name in ("d.libsvm", "d.svm.gz"):
        path = tmp_path / name
        dump_svmlight_file(X, 2 * y - 1, str(tmp_path / "t"), zero_based=False)  # LIBSVM's
        if not name.endswith(".gz"):
            path.write_bytes((tmp_path / "t").read_bytes())
        if name.endswith(".gz"):
            path.write_bytes(gzip.compress((tmp_path / "t").read_bytes()))
        d = load_dataset(path, n_features=6)
        assert d.X.shape == (30, 6)
        np.testing.assert_allclose(d.X[:, :4], X)
        assert d.y.tolist() == (2.0 * y - 1).tolist()
    txt = tmp_path / "plain.dat"
    txt.write_bytes((tmp_path / "t").read_bytes())
    assert load_dataset(txt, fmt="libsvm", n_features=4).X.shape[0] == 30


def _expect(path: Path, message: str, **kw: object) -> None:
    with pytest.raises(DataError, match=message) as info:
        load_dataset(path, **kw)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "name,text,kw",
    [
        ("d.csv", "a,b,y\n1,2,0\n3,secret42,1\n", {}),
        ("d.libsvm", "1 1:2\n0 1:secret42\n", {"n_features": 2}),
        ("e.libsvm", "1 1:2\n0 secret42:1\n", {"n_features": 2}),
    ],
)
def test_a_field_that_does_not_parse_is_refused_without_its_text(tmp_path, name, text, kw):
    """A feature may be private: the refusal names the file and where, never the field."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError) as info:
        load_dataset(path, **kw)
    assert "secret42" not in str(info.value)


def test_loader_errors(tmp_path: Path) -> None:
    X, y = _xy()
    _expect(tmp_path / "absent.csv", "file does not exist")
    bad_ext = tmp_path / "d.xyz"
    bad_ext.write_text("1,2\n")
    _expect(bad_ext, "cannot tell the format")
    with pytest.raises(ConfigError, match="unknown data format 'parquet'"):
        load_dataset(bad_ext, fmt="parquet")
    npz = tmp_path / "d.npz"
    np.savez(npz, X=X)
    _expect(npz, "lacks array\\(s\\) \\['y'\\]")
    np.savez(npz, X=X, y=y[:-1])
    _expect(npz, "y has shape \\(29,\\), expected \\(30,\\)")
    np.savez(npz, X=X, y=y, groups=np.array([0, 1]))
    _expect(npz, "'groups' must hold one integer id per column \\(4\\)")
    np.savez(npz, X=X[:, 0], y=y)
    _expect(npz, "X must be 2-D")
    Xn = X.copy()
    Xn[3, 2] = np.inf
    np.savez(npz, X=Xn, y=y)
    _expect(npz, "NaN or inf \\(first in data row 4\\)")
    np.savez(npz, X=X, y=np.arange(30) % 3)
    _expect(npz, "10 label\\(s\\) outside the label domain .* data row 3;")
    junk = tmp_path / "junk.npz"
    junk.write_text("not a zip")
    _expect(junk, "not a readable npz archive")
    csv_path = tmp_path / "d.csv"
    csv_path.write_text("a,b,y\n1,2,0\n3,4\n")
    _expect(csv_path, "data row 2 has 2 fields, expected 3")
    csv_path.write_text("a,b,y\n1,2,0\n3,x,1\n")
    _expect(csv_path, "non-numeric feature value in data row 2, feature column")
    csv_path.write_text("a,b,y\n1,nan,0\n3,4,1\n")
    _expect(csv_path, "NaN or inf \\(first in data row 1\\)")
    csv_path.write_text("")
    _expect(csv_path, "CSV file is empty")
    csv_path.write_text("a,b,y\n")
    _expect(csv_path, "header but no data rows")
    csv_path.write_text("a,b,y\n1,2,0\n3,4,1\n")
    _expect(csv_path, "no column named 'z'", label_column="z")
    _expect(csv_path, "label column 5 out of range", label_column=5)
    csv_path.write_text("1;2;0\n3;4;1\n")
    _expect(csv_path, "\\(comma-separated\\), found 1 column")
    csv_path.write_text("1,2,0\n3,4,1\n")
    _expect(csv_path, "no header row, so no column named 'y'", label_column="y")
    np.savez(npz, X=np.zeros((0, 3)), y=np.zeros(0))
    _expect(npz, "no data rows")
    _expect(csv_path, "list: 3 group ids for 2 columns", groups="0,1,1")
    svm = tmp_path / "d.libsvm"
    svm.write_text("1 1:0.5 2:x\n")
    _expect(svm, "not a readable LIBSVM file", n_features=2)
    svm.write_text("1 1:0.5\n2 2:1\n3 1:1\n")
    _expect(svm, "2 label\\(s\\) outside the label domain .* data row 2;", n_features=2)
    gz = tmp_path / "broken.csv.gz"
    gz.write_bytes(b"\x1f\x8b garbage")
    _expect(gz, "unreadable")


def test_parse_groups(tmp_path: Path) -> None:
    assert parse_groups(None, 3).tolist() == [0, 1, 2]
    assert parse_groups("None", 3).tolist() == [0, 1, 2]
    assert parse_groups("size:4", 10).tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert parse_groups("1, 1, 3, 3, 2", 5).tolist() == [0, 0, 2, 2, 1]
    f = tmp_path / "groups.txt"
    f.write_text("0\n0\n1\n1\n1\n")
    assert parse_groups(str(f), 5).tolist() == [0, 0, 1, 1, 1]
    assert parse_groups(str(f), 5).dtype == np.int64
    with pytest.raises(DataError, match="groups file .*groups.txt: 5 group ids for 4 columns"):
        parse_groups(str(f), 4)
    for spec, msg in [
        ("0,1", "2 group ids for 3 columns"),
        ("0,-1,1", "negative group id -1"),
        ("0,a,1", "must be integers"),
        ("size:0", "group size must be >= 1"),
        ("size:two", "not an integer"),
        ("groups.txt", "is not 'none', 'size:K', an existing file"),
    ]:
        with pytest.raises(DataError, match=msg):
            parse_groups(spec, 3)


# ---------------------------------------------------------------- partitions and scaling


def test_split_rows() -> None:
    parts = split_rows(10, 3)
    assert [p.tolist() for p in parts] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    parts = split_rows(103, 5, rng=np.random.default_rng(0))
    assert [len(p) for p in parts] == [21, 21, 21, 20, 20]
    allrows = np.concatenate(parts)
    assert sorted(allrows.tolist()) == list(range(103)) and allrows.dtype == np.int64
    assert allrows.tolist() != list(range(103))  # shuffled
    parts = split_rows(10, 3, sizes=[2, 5, 3])
    assert [len(p) for p in parts] == [2, 5, 3] and parts[1].tolist() == [2, 3, 4, 5, 6]
    for kw, msg in [
        ({"sizes": [2, 5, 2]}, "sum to 9, not to n_rows = 10"),
        ({"sizes": [0, 5, 5]}, "at least one row"),
        ({"sizes": [5, 5]}, "3 integers"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            split_rows(10, 3, **kw)
    with pytest.raises(ConfigError, match="cannot split 2 rows into 3"):
        split_rows(2, 3)
    with pytest.raises(ConfigError, match="n_parts must be >= 1"):
        split_rows(2, 0)


def test_train_test_split_indices() -> None:
    tr, te = train_test_split_indices(100, 0.25, np.random.default_rng(0))
    assert len(te) == 25 and len(tr) == 75
    assert sorted(np.concatenate([tr, te]).tolist()) == list(range(100))
    assert np.all(np.diff(tr) > 0) and np.all(np.diff(te) > 0)
    with pytest.raises(ConfigError, match="in \\(0, 1\\)"):
        train_test_split_indices(100, 1.0, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="empty part"):
        train_test_split_indices(3, 0.1, np.random.default_rng(0))


def test_scale_rows() -> None:
    X = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    Z = scale_rows(X, 5.0)
    np.testing.assert_allclose(Z[:2], X[:2] / 5.0)  # rows within the bound: plain division
    np.testing.assert_allclose(Z[2], [0.6, 0.8])  # norm 2 after division: clipped to 1
    assert np.all(np.linalg.norm(Z, axis=1) <= 1 + 1e-15)
    # row-wise: a row's image does not depend on the other rows
    np.testing.assert_array_equal(scale_rows(X[1:2], 5.0)[0], Z[1])
    for bad in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ConfigError, match="scale_rows: bound must be a finite number > 0"):
            scale_rows(X, bad)


def test_load_ipums(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 5)) * [1, 10, 100, 0, 3]
    y = rng.integers(0, 2, 40)
    path = tmp_path / "ipums.dat"
    np.savetxt(path, np.column_stack([X, y]), fmt="%.10g")
    # public bounds equal to the true extremes reproduce min-max scaling ...
    lo, hi = X.min(axis=0), X.max(axis=0)
    Xs, ys = load_ipums(path, bounds=(lo, hi))
    ref = MinMaxScaler().fit_transform(np.loadtxt(path)[:, :-1])
    np.testing.assert_allclose(Xs, ref, atol=1e-9)
    assert ys.tolist() == np.where(y == 1, 1.0, -1.0).tolist()
    Xb, _ = load_ipums(path, bounds=(-1.0, 1.0))
    np.testing.assert_allclose(Xb[:, 0], np.clip((X[:, 0] + 1) / 2, 0, 1), atol=1e-9)
    # ... but the map is row-wise: one row's image does not depend on the others
    np.savetxt(tmp_path / "one.dat", np.column_stack([X, y])[:1], fmt="%.10g")
    np.testing.assert_array_equal(load_ipums(tmp_path / "one.dat", bounds=(-1.0, 1.0))[0][0], Xb[0])
    # all labels 1 is a valid data set (no data-dependent label mapping)
    np.savetxt(tmp_path / "pos.dat", np.column_stack([X, np.ones(40)]), fmt="%.10g")
    assert (load_ipums(tmp_path / "pos.dat", bounds=(0, 1))[1] == 1).all()
    with pytest.raises(TypeError):
        load_ipums(path)  # bounds are required
    with pytest.raises(ConfigError, match="one value per feature column"):
        load_ipums(path, bounds=(np.zeros(3), np.ones(3)))
    bad = tmp_path / "bad.dat"
    np.savetxt(bad, np.column_stack([X, y + 1]))
    with pytest.raises(DataError, match="bad.dat: .* outside the label domain"):
        load_ipums(bad, bounds=(0, 1))
    bad.write_text("1 2 0\n1 x 1\n")
    with pytest.raises(DataError, match="not a whitespace-separated numeric table"):
        load_ipums(bad, bounds=(0, 1))
    with pytest.raises(DataError, match="does not exist"):
        load_ipums(tmp_path / "none.dat", bounds=(0, 1))


# ---------------------------------------------------------------- real data (skipped if absent)


@pytest.mark.skipif(
    not (DATA_DIR / "memset" / "memset_donor_7mer.csv.gz").is_file(), reason="MEMset absent"
)
def test_memset_real() -> None:
    train, test = load_memset(DATA_DIR / "memset", rng=np.random.default_rng(0))
    assert train.X.shape == (16_000, 28) and test.X.shape == (8_000, 28)
    assert (train.y == 1).sum() == 8_000 and (train.y == -1).sum() == 8_000
    assert (test.y == 1).sum() == 4_208 and (test.y == -1).sum() == 3_792
    assert train.groups.tolist() == np.repeat(np.arange(7), 4).tolist()
    # exactly one base per position
    np.testing.assert_array_equal(train.X.reshape(-1, 7, 4).sum(axis=2), 1.0)
    assert train.feature_names[:4] == ("pos1_A", "pos1_T", "pos1_C", "pos1_G")
    # donor consensus MAG|GTRAGT with GT removed: G at position 3, A at position 5 enriched
    for col in (4 * 2 + 3, 4 * 4 + 0):
        assert train.X[train.y == 1, col].mean() > train.X[train.y == -1, col].mean() + 0.2
    with pytest.raises(ConfigError, match="need 1..8415"):
        load_memset(DATA_DIR / "memset", n_train_pos=9000, rng=np.random.default_rng(0))


@pytest.mark.skipif(not (DATA_DIR / "adult" / "a9a.train.libsvm.gz").is_file(), reason="absent")
def test_adult_real() -> None:
    Xtr, ytr, Xte, yte = load_adult(DATA_DIR / "adult")
    assert Xtr.shape == (32_561, 124) and Xte.shape == (16_281, 124)
    np.testing.assert_array_equal(Xtr[:, -1], 1.0)
    assert np.mean(ytr == -1) == pytest.approx(0.759, abs=5e-4)
    assert np.mean(yte == -1) == pytest.approx(0.764, abs=5e-4)
    sq = np.einsum("ij,ij->i", Xtr, Xtr)
    assert sq.min() >= 12 and sq.max() == 15  # 11-14 ones plus the intercept
    assert load_adult(DATA_DIR / "adult", intercept=False)[0].shape == (32_561, 123)
