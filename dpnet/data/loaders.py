"""Loaders for user files (npz, CSV, LIBSVM) and the real data sets of the papers.

Every user error (missing file, unreadable or malformed content, NaN/inf, labels that are not
two classes, groups that do not cover the columns) raises :class:`DataError` with a one-line
message naming the file and the problem.

The width is public (docs/privacy.md, "The public schema"): a file is read at a declared
width ``n_features``, never at one found in its rows. CSV and npz files carry their width in
their format (the header or first row, the array's shape), checked against the declared one;
a LIBSVM file carries none, so it needs one (:func:`format_of`) and is mapped onto it by a rule
that reads no other row (:func:`_load_libsvm`).

Privacy note: :func:`scale_rows` and :func:`load_ipums` use only bounds the user supplies,
never a statistic of the data; labels are mapped by a public :class:`LabelDomain`.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpnet.checks import positive
from dpnet.data.dataset import GroupData
from dpnet.data.labels import DEFAULT_LABELS, LabelDomain
from dpnet.data.memory import check_fits
from dpnet.errors import ConfigError, DataError

FORMATS = ("npz", "csv", "libsvm")
_EXT = {
    ".npz": "npz",
    ".csv": "csv",
    ".libsvm": "libsvm",
    ".svm": "libsvm",
    ".svmlight": "libsvm",
}
MEMSET_BASES = "atcg"  # paper 3's one-hot order: A(1,0,0,0), T(0,1,0,0), C(0,0,1,0), G(0,0,0,1)
MEMSET_FILE = "memset_donor_7mer.csv.gz"
ADULT_FEATURES = 123
WIDTH_LIMIT = 10**9  # declared widths lie below it
# a LIBSVM pair whose index has ten digits or more (>= WIDTH_LIMIT, above every width; the
# reader holds 32-bit indices): dropped from its row before parsing
_BEYOND_EVERY_WIDTH = re.compile(rb"(?<=[ \t])\+?0*[1-9][0-9]{9,}:\S*")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_file(path: Path) -> None:
    if not path.exists():
        raise DataError(f"{path}: file does not exist")
    if not path.is_file():
        raise DataError(
            f"{path}: is a directory, not a data file"
            if path.is_dir()
            else f"{path}: not a regular file"
        )


def format_of(path: str | Path, n_features: int | None, fmt: str | None = None) -> str:
    """The format of ``path`` (``fmt``, else its extension). A LIBSVM file carries no width,
    so without a declared ``n_features`` it is refused here, before it is opened: a
    data-independent refusal (ConfigError)."""
    kind = _detect_format(Path(path), fmt)
    if kind == "libsvm" and n_features is None:
        raise ConfigError(
            f"{path}: a LIBSVM file carries no width: declare it with --n-features P "
            "(indices are one-based; one outside 1..P is dropped from its row)"
        )
    return kind


def _detect_format(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise ConfigError(f"unknown data format {fmt!r}; expected one of {FORMATS}")
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    if suffixes and suffixes[-1] in _EXT:
        return _EXT[suffixes[-1]]
    raise DataError(
        f"{path}: cannot tell the format from the extension; pass fmt as one of {FORMATS}"
    )


GroupLabel = int | str  # a group's label as the --groups spec gives it


@dataclass(frozen=True)
class ColumnGroups:
    """The group of every column: ``ids`` (int64, 0..G-1, in sorted order of the given
    labels: integers first, by value, then names) and ``labels[g]``, the label group ``g`` was
    given (None when the spec gave none: "none", "size:K", an npz file's own array)."""

    ids: np.ndarray
    labels: tuple[GroupLabel, ...] | None


@dataclass(frozen=True)
class _Listed:
    """A list or file of groups, read without the data: ``labels[i]`` is entry i's group,
    of column i (a list) or of column ``keys[i]`` (a "column,group" mapping, by 0-based
    index or by the column's name in the CSV header). A name mapping's ``first`` row is its
    header unless it names a column (decided against the names, :func:`_resolve`)."""

    where: str
    labels: tuple[GroupLabel, ...]
    keys: tuple[int, ...] | tuple[str, ...] | None = None
    by_name: bool = False
    first: tuple[str, str] | None = None

    @property
    def width(self) -> int | None:
        """Columns it implies (one entry per column); None for a name mapping, which fits
        the columns the CSV header names."""
        return None if self.by_name else len(self.labels)


GROUPS_FORMAT = (
    "expected 'none', 'size:K', group ids separated by commas or whitespace (one per "
    "column), or a file of them or of 'column,group' lines"
)
_INT = re.compile(r"[+-]?[0-9]+")


def parse_groups(
    spec: str | None,
    n_features: int,
    source: str = "groups",
    names: tuple[str, ...] | None = None,
) -> np.ndarray:
    """Group id per column (int64, ids relabelled to 0..G-1 in sorted order of the given ids).

    ``spec``: None or "none" -> one group per column; "size:K" -> consecutive blocks of K
    columns (the last block is shorter if K does not divide p); a list of ids, one per column,
    separated by commas and/or whitespace; or the path of a file holding such a list (over
    one or many lines), or "column,group" lines (:func:`column_groups`).
    """
    return column_groups(spec, n_features, source, names).ids


def column_groups(
    spec: str | None,
    n_features: int,
    source: str = "groups",
    names: tuple[str, ...] | None = None,
) -> ColumnGroups:
    """:func:`parse_groups` with the labels the spec gave. A file whose every line holds two
    comma-separated fields (a single line: unless both are integers) maps columns to groups,
    ``column,group``: the column by 0-based index (among the feature columns, the order of
    ``coef``) or by its name in the CSV header ``names`` (public); a first line that is not
    an entry (``column,group``) is a header. Every column needs exactly one line (a column
    not listed is refused, naming it); group labels are integers >= 0 or names."""
    listed = _listed_groups(spec, source)
    if listed is not None:
        labels = _resolve(listed, n_features, source, names)
        order = sorted(set(labels), key=lambda g: (isinstance(g, str), g))
        rank = {g: i for i, g in enumerate(order)}
        ids = np.array([rank[g] for g in labels], dtype=np.int64)
        return ColumnGroups(ids, tuple(order))
    if spec is None or spec.strip().lower() == "none":
        return ColumnGroups(np.arange(n_features, dtype=np.int64), None)
    text = spec.strip()  # "size:K": _listed_groups refused every other spec
    try:
        k = int(text[5:])
    except ValueError:
        raise DataError(f"{source}: group size in {spec!r} is not an integer") from None
    if k < 1:
        raise DataError(f"{source}: group size must be >= 1, got {k}")
    return ColumnGroups(np.arange(n_features, dtype=np.int64) // k, None)


def groups_width(spec: str | None) -> int | None:
    """The width a groups spec implies: the count of ids of a list or file, or of lines of an
    index mapping (one per column); None for "none", "size:K" and a mapping by column name,
    which fit any width."""
    listed = _listed_groups(spec, "--groups")
    return None if listed is None else listed.width


def groups_by_name(spec: str | None) -> bool:
    """Whether ``spec`` is a file mapping columns to groups by their names (DataError if it
    is malformed)."""
    listed = _listed_groups(spec, "--groups")
    return listed is not None and listed.by_name


def _resolve(
    listed: _Listed, n_features: int, source: str, names: tuple[str, ...] | None
) -> list[GroupLabel]:
    """The label of every one of the ``n_features`` columns (DataError naming the problem)."""
    where = listed.where
    if listed.keys is None:
        if len(listed.labels) != n_features:
            raise DataError(f"{where}: {len(listed.labels)} group ids for {n_features} columns")
        return list(listed.labels)
    keys: list[Any] = list(listed.keys)
    labels = list(listed.labels)
    if listed.by_name:
        if names is None:
            raise DataError(
                f"{where} maps columns by name, but {source} has no column names (only a CSV "
                "file's header row gives them): map them by 0-based column index"
            )
        assert listed.first is not None  # a name mapping keeps its first line aside
        if listed.first[0] in names:
            keys.insert(0, listed.first[0])
            labels.insert(0, _label(listed.first[1], where, 1))
        else:
            where = f"{where[:-1]}; line 1 a header)"
        column = {name: k for k, name in enumerate(names)}
        for key in keys:
            if key not in column:
                raise DataError(
                    f"{where}: no feature column named {key!r} in the header of {source}"
                )
        index = [column[key] for key in keys]
    else:
        if len(keys) != n_features:
            raise DataError(f"{where}: {len(keys)} columns mapped, the data has {n_features}")
        for key in keys:
            if not 0 <= key < n_features:
                raise DataError(
                    f"{where}: column index {key} out of range 0..{n_features - 1} "
                    "(0-based, among the feature columns)"
                )
        index = keys
    found: list[GroupLabel | None] = [None] * n_features
    for k, label in zip(index, labels, strict=True):
        if found[k] is not None:
            raise DataError(f"{where}: column {_column(k, names)} is listed twice")
        found[k] = label
    for k, given in enumerate(found):
        if given is None:
            raise DataError(
                f"{where}: column {_column(k, names)} is not listed (every column needs "
                "one line 'column,group')"
            )
    return [g for g in found if g is not None]


def _column(k: int, names: tuple[str, ...] | None) -> str:
    return f"{names[k]!r}" if names is not None else str(k)


def _label(token: str, where: str, line: int) -> GroupLabel:
    if not token:
        raise DataError(f"{where}: line {line} has an empty group")
    if _INT.fullmatch(token):
        value = int(token)
        if value < 0:
            raise DataError(f"{where}: negative group id {value}")
        return value
    return token


def _listed_groups(spec: str | None, source: str) -> _Listed | None:
    """The entries of a list or file of groups; None for None, "none" and "size:K";
    DataError for anything else."""
    if spec is None or spec.strip().lower() == "none":
        return None
    text = spec.strip()
    if text.lower().startswith("size:"):
        return None
    path = Path(text)
    if path.is_file():
        try:
            content = path.read_bytes().decode("utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"groups file {path}: unreadable ({_one_line(exc)})") from None
        return _groups_file(content, f"groups file {path}")
    if "," in text or all(_INT.fullmatch(t) for t in text.split()):
        return _id_list([text], f"{source} list")
    raise DataError(
        f"{source}: {spec!r} is not 'none', 'size:K', an existing file or a list of ids"
    )


def _groups_file(content: str, where: str) -> _Listed:
    """A groups file: a list of ids, or "column,group" lines (see :func:`column_groups`)."""
    lines = [line for line in content.splitlines() if line.strip()]
    if not lines:
        raise DataError(f"{where}: empty ({GROUPS_FORMAT})")
    rows = [[c.strip() for c in r] for r in csv.reader(lines)]
    rows = [r[:-1] if len(r) > 1 and not r[-1] else r for r in rows]  # a trailing comma
    if not all(len(r) == 2 for r in rows) or (
        len(rows) == 1 and all(_INT.fullmatch(c) for c in rows[0])
    ):
        return _id_list(lines, where)
    where = f"{where} (read as 'column,group' lines)"
    for i, (key, _) in enumerate(rows):
        if not key:
            raise DataError(f"{where}: line {i + 1} has an empty column")
    is_index = [bool(_INT.fullmatch(key)) for key, _ in rows]
    if all(is_index[1:]) and (is_index[0] or len(rows) > 1):
        body = rows if is_index[0] else rows[1:]  # a first line that is no index: a header
        skip = len(rows) - len(body)
        labels = tuple(_label(g, where, i + 1 + skip) for i, (_, g) in enumerate(body))
        return _Listed(where, labels, tuple(int(key) for key, _ in body))
    if any(is_index):
        raise DataError(
            f"{where}: line {is_index.index(True) + 1} gives a column index, other lines "
            "column names: use one or the other"
        )
    labels = tuple(_label(g, where, i + 2) for i, (_, g) in enumerate(rows[1:]))
    keys = tuple(key for key, _ in rows[1:])
    return _Listed(where, labels, keys, True, (rows[0][0], rows[0][1]))


def _id_list(lines: list[str], where: str) -> _Listed:
    """Integer ids separated by commas and/or whitespace, over one or many lines; a trailing
    comma on a line is allowed."""
    ids: list[GroupLabel] = []
    for i, line in enumerate(lines):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) > 1 and not fields[-1]:
            fields.pop()
        for field in fields:
            tokens = field.split()
            if not tokens or not all(_INT.fullmatch(t) for t in tokens):
                raise DataError(
                    f"{where}: group ids must be integers (line {i + 1}; {GROUPS_FORMAT})"
                )
            ids.extend(_label(t, where, i + 1) for t in tokens)
    return _Listed(where, tuple(ids))


def _finish(
    path: Path,
    X: np.ndarray,
    y_raw: np.ndarray,
    groups: ColumnGroups,
    names: tuple[str, ...] | None = None,
    labels: LabelDomain = DEFAULT_LABELS,
) -> GroupData:
    src = str(path)
    if X.ndim != 2:
        raise DataError(f"{src}: X must be 2-D, got shape {X.shape}")
    if y_raw.ndim != 1 or y_raw.shape[0] != X.shape[0]:
        raise DataError(f"{src}: y has shape {y_raw.shape}, expected ({X.shape[0]},)")
    if X.shape[0] == 0:
        raise DataError(f"{src}: no data rows")
    if X.dtype.kind not in "biuf":
        raise DataError(f"{src}: X is not numeric (dtype {X.dtype})")
    X = np.ascontiguousarray(X, dtype=np.float64)
    if not np.isfinite(X).all():
        rows = np.flatnonzero(~np.isfinite(X).all(axis=1))
        raise DataError(f"{src}: X contains NaN or inf (first in data row {rows[0] + 1})")
    y = labels.to_pm1(y_raw, source=src)
    data = GroupData(X, y, groups.ids, feature_names=names, group_names=groups.labels)
    return data.validate(src, both_classes=False)


def _load_npz(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in ("X", "y") if k not in npz.files]
            if missing:
                raise DataError(f"{path}: npz archive lacks array(s) {missing}")
            names = ("X", "y", "groups") if "groups" in npz.files else ("X", "y")
            arrays = [_npz_member(path, npz, name) for name in names]
            return arrays[0], arrays[1], arrays[2] if len(arrays) == 3 else None
    except DataError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise DataError(f"{path}: not a readable npz archive ({_one_line(exc)})") from None


def _npz_member(path: Path, npz: Any, name: str) -> np.ndarray:
    """Member ``name`` of an open npz archive, its size checked from the .npy header before
    it is read. A member that is not an .npy array (numpy then hands back its raw bytes, e.g.
    a pickle) is refused."""
    with npz.zip.open(f"{name}.npy") as member:
        try:
            version = np.lib.format.read_magic(member)
        except ValueError:
            raise DataError(f"{path}: member {name!r} is not a .npy array") from None
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(member)
    check_fits(shape, f"{path}: array {name!r}", max(dtype.itemsize, 1))
    return npz[name]  # an .npy member: numpy reads it as an array


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _read_bytes(path: Path) -> bytes:
    try:
        if path.suffix.lower() == ".gz":
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: unreadable ({_one_line(exc)})") from None


def _read_text(path: Path) -> str:
    try:
        # utf-8-sig: a byte-order mark (as spreadsheet programs write) is not part of row 1
        return _read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: unreadable ({_one_line(exc)})") from None


def _is_header(first: list[str]) -> bool:
    """Row 1 is a header iff none of its cells is a number. A data row has numeric features,
    so it is never eaten, even with a text label; a header with a numeric column name is read
    as data and fails loudly on its text cells."""
    return not any(_is_number(c) for c in first)


def _load_csv(
    path: Path, label_column: str | int | None
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...] | None]:
    rows = [r for r in csv.reader(io.StringIO(_read_text(path))) if r and any(c.strip() for c in r)]
    if not rows:
        raise DataError(f"{path}: CSV file is empty")
    header = None
    if _is_header(rows[0]):
        header = [c.strip() for c in rows[0]]
        rows = rows[1:]
        if not rows:
            raise DataError(f"{path}: CSV file has a header but no data rows")
    width = len(header) if header is not None else len(rows[0])
    for i, r in enumerate(rows):
        if len(r) != width:
            raise DataError(f"{path}: data row {i + 1} has {len(r)} fields, expected {width}")
    if width < 2:
        raise DataError(
            f"{path}: CSV needs a feature column and a label column (comma-separated), "
            f"found {width} column"
        )
    if label_column is None:
        col = header.index("y") if header is not None and "y" in header else width - 1
    elif isinstance(label_column, str):
        if header is None:
            raise DataError(f"{path}: no header row, so no column named {label_column!r}")
        if label_column not in header:
            raise DataError(f"{path}: no column named {label_column!r} in the header")
        col = header.index(label_column)
    else:
        if not -width <= label_column < width:
            raise DataError(f"{path}: label column {label_column} out of range ({width} columns)")
        col = label_column % width
    cells = np.array(rows, dtype=str)
    labels = np.char.strip(cells[:, col])
    feats = np.delete(cells, col, axis=1)
    try:
        X = feats.astype(np.float64)
    except ValueError:
        bad = next(
            (i, j) for i, r in enumerate(feats) for j, c in enumerate(r) if not _is_number(c)
        )
        raise DataError(  # the cell's position, never its text (a feature may be private)
            f"{path}: non-numeric feature value in data row {bad[0] + 1}, feature column "
            f"{bad[1] + 1}"
        ) from None
    if all(_is_number(c) for c in labels):
        labels = labels.astype(np.float64)
    names = tuple(h for j, h in enumerate(header) if j != col) if header is not None else None
    return X, labels, names


def _load_libsvm(path: Path, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows at the declared width P by a rule that reads no other row: indices are one-based,
    and a pair whose index lies outside 1..P (0, or above P) is dropped from its row, the
    row mapped into the declared domain (no error, no warning: either would tell of one
    row). Read sparse, densified at (n, P) only."""
    from sklearn.datasets import load_svmlight_file

    text = _BEYOND_EVERY_WIDTH.sub(b"", _read_bytes(path))
    try:  # zero_based: an index 0 parses (as column 0), whatever the other rows hold
        X, y = load_svmlight_file(io.BytesIO(text), zero_based=True)
    except (ValueError, EOFError, OverflowError):  # the reader's message may quote a field
        raise DataError(
            f"{path}: not a readable LIBSVM file (every line: a numeric label, then "
            f"index:value pairs with increasing integer indices)"
        ) from None
    check_fits((X.shape[0], n_features), f"{path}: densifying at the declared width")
    X.resize((X.shape[0], n_features + 1))  # indices above P dropped, or zero columns added
    return X[:, 1:].toarray(), y  # index 0 dropped: column k holds index k + 1


def load_dataset(
    path: str | Path,
    *,
    groups: str | None = None,
    fmt: str | None = None,
    n_features: int | None = None,
    label_column: str | int | None = None,
    labels: LabelDomain = DEFAULT_LABELS,
) -> GroupData:
    """Load a labelled data set from ``path`` and return a validated :class:`GroupData`.

    Formats (by extension, ``.gz`` allowed for CSV and LIBSVM, or by ``fmt``):
    ``npz`` with arrays ``X``, ``y`` and optionally ``groups``; ``csv`` (header optional,
    numeric features; the label column is ``label_column``, else the column named "y", else
    the last); ``libsvm`` (one-based indices, densified at ``n_features``, which it needs:
    :func:`_load_libsvm`). ``n_features``, the declared width: every file is read at it (a
    CSV or npz file of another width is refused). Labels are mapped to -1/+1 by the public
    ``labels`` domain (:mod:`dpnet.data.labels`); one class is allowed. ``groups`` is parsed by
    :func:`column_groups` (a mapping by column name against a CSV file's header); if it is
    None an npz file's own ``groups`` array is used, otherwise one group per column.
    """
    path = Path(path)
    kind = format_of(path, n_features, fmt)
    _check_file(path)
    names = None
    file_groups = None
    if kind == "npz":
        X, y, file_groups = _load_npz(path)
    elif kind == "csv":
        X, y, names = _load_csv(path, label_column)
    else:
        assert n_features is not None  # format_of refused a LIBSVM file without a width
        X, y = _load_libsvm(path, n_features)
    p = X.shape[1] if X.ndim == 2 else 0
    if n_features is not None and X.ndim == 2 and p != n_features:
        raise DataError(
            f"{path}: {p} feature columns, the declared width is {n_features} "
            "(--n-features, or one id per column in --groups)"
        )
    if groups is None and file_groups is not None:
        arr = np.asarray(file_groups)
        if arr.shape != (p,) or arr.dtype.kind not in "iu":
            raise DataError(f"{path}: 'groups' must hold one integer id per column ({p})")
        if (arr < 0).any():
            raise DataError(f"{path}: 'groups' contains negative id(s)")
        g = ColumnGroups(np.unique(arr, return_inverse=True)[1].reshape(-1).astype(np.int64), None)
    else:
        g = column_groups(groups, p, str(path), names)
    return _finish(path, np.asarray(X), np.asarray(y), g, names, labels)


def load_memset(
    path: str | Path,
    *,
    n_train_pos: int = 8000,
    n_train_neg: int = 8000,
    n_test_pos: int = 4208,
    n_test_neg: int = 3792,
    rng: np.random.Generator,
) -> tuple[GroupData, GroupData]:
    """Paper 3's MEMset donor split: (train, test) with rows drawn without replacement.

    ``path`` is the CSV (``split,y,seq``) or the directory holding ``memset_donor_7mer.csv.gz``.
    Each 7-mer is one-hot encoded position by position in the paper's base order A, T, C, G:
    28 columns, 7 groups of 4 (no intercept column; the solver handles it). y: 1 (real donor
    site) -> +1, 0 (decoy) -> -1. Rows of each returned set are in random order.
    """
    path = Path(path)
    if path.is_dir():
        path = path / MEMSET_FILE
    _check_file(path)
    rows = list(csv.reader(io.StringIO(_read_text(path))))
    if not rows or [c.strip() for c in rows[0]] != ["split", "y", "seq"]:
        raise DataError(f"{path}: expected the header 'split,y,seq'")
    body = rows[1:]
    if any(len(r) != 3 for r in body):
        raise DataError(f"{path}: every row needs exactly 3 fields")
    cols = np.array(body, dtype=str)
    split, lab, seq = cols[:, 0], cols[:, 1], np.char.lower(cols[:, 2])
    if not np.isin(lab, ["0", "1"]).all() or not np.isin(split, ["train", "test"]).all():
        raise DataError(f"{path}: split must be train/test and y must be 0/1")
    if (np.char.str_len(seq) != 7).any():
        raise DataError(f"{path}: every seq must have 7 bases")
    chars = np.frombuffer("".join(seq.tolist()).encode("ascii"), dtype="S1").reshape(-1, 7)
    onehot = chars[:, :, None] == np.array(list(MEMSET_BASES), dtype="S1")
    if not (onehot.sum(axis=2) == 1).all():
        raise DataError(f"{path}: seq contains letters other than a, c, g, t")
    X_all = onehot.reshape(len(body), 28).astype(np.float64)
    y_all = np.where(lab == "1", 1.0, -1.0)
    groups = np.repeat(np.arange(7, dtype=np.int64), 4)
    names = tuple(f"pos{i + 1}_{b.upper()}" for i in range(7) for b in MEMSET_BASES)

    def draw(part: str, n_pos: int, n_neg: int) -> GroupData:
        picks = []
        for label, count in ((1.0, n_pos), (-1.0, n_neg)):
            pool = np.flatnonzero((split == part) & (y_all == label))
            if not 0 < count <= pool.size:
                raise ConfigError(
                    f"MEMset {part}: asked for {count} rows of class {label:+.0f}, "
                    f"need 1..{pool.size}"
                )
            picks.append(rng.choice(pool, size=count, replace=False))
        idx = rng.permutation(np.concatenate(picks))
        return GroupData(
            X=np.ascontiguousarray(X_all[idx]), y=y_all[idx], groups=groups, feature_names=names
        ).validate(f"{path} ({part})")

    return draw("train", n_train_pos, n_train_neg), draw("test", n_test_pos, n_test_neg)


def load_adult(
    directory: str | Path, *, intercept: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X_train, y_train, X_test, y_test) from ``a9a.train.libsvm.gz`` / ``a9a.test.libsvm.gz``.

    123 binary features (the test file never uses index 123, hence the fixed width), plus a
    trailing column of ones if ``intercept``; labels -1/+1. Rows have 11-14 ones: divide by a
    public bound such as sqrt(14) (or sqrt(15) with the intercept) with :func:`scale_rows`.
    """
    directory = Path(directory)
    out: list[np.ndarray] = []
    for name in ("a9a.train.libsvm.gz", "a9a.test.libsvm.gz"):
        data = load_dataset(directory / name, fmt="libsvm", n_features=ADULT_FEATURES)
        X = data.X
        if intercept:
            X = np.ascontiguousarray(np.hstack([X, np.ones((X.shape[0], 1))]))
        out += [X, data.y]
    return out[0], out[1], out[2], out[3]


def load_ipums(
    path: str | Path, *, bounds: tuple[ArrayLike, ArrayLike]
) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) from a user-supplied whitespace-separated file, last column the 0/1 label.

    Features are scaled to [0, 1] by ``bounds = (lower, upper)``, public per-column (or scalar)
    limits chosen without looking at the data: x -> clip((x - lower) / (upper - lower), 0, 1),
    a row-wise map whose output bound holds for every data set. The ADMM paper's min-max
    scaling by the data's own column extremes would release those extremes unaccounted, so
    bounds are required. Constant columns (upper == lower) become 0. y: 1 -> +1, 0 -> -1.
    """
    lo_in, hi_in = bounds
    path = Path(path)
    _check_file(path)
    try:
        data = np.loadtxt(path, dtype=np.float64, ndmin=2)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise DataError(
            f"{path}: not a whitespace-separated numeric table ({_one_line(exc)})"
        ) from None
    if data.shape[0] == 0 or data.shape[1] < 2:
        raise DataError(f"{path}: need at least one row and two columns, got {data.shape}")
    X, y_raw = data[:, :-1], data[:, -1]
    if not np.isfinite(data).all():
        raise DataError(f"{path}: contains NaN or inf")
    try:
        lo = np.broadcast_to(np.asarray(lo_in, dtype=np.float64), X.shape[1:])
        hi = np.broadcast_to(np.asarray(hi_in, dtype=np.float64), X.shape[1:])
    except ValueError:
        raise ConfigError(
            f"load_ipums: bounds must be scalars or one value per feature column ({X.shape[1]})"
        ) from None
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()) or (hi < lo).any():
        raise ConfigError("load_ipums: bounds must be finite, every upper bound >= its lower")
    span = hi - lo
    scaled = np.divide(X - lo, span, out=np.zeros_like(X), where=span > 0)
    y = LabelDomain((0.0,), (1.0,)).to_pm1(y_raw, source=str(path))
    return np.ascontiguousarray(np.clip(scaled, 0.0, 1.0)), y


def scale_rows(X: ArrayLike, bound: float) -> np.ndarray:
    """x_i / bound, then rows with norm > 1 are shrunk to norm 1: ||x_i||_2 <= 1 for all i.

    ``bound`` must be a public, data-independent constant (e.g. sqrt(14) for Adult); no norm
    computed from the data is used to choose the scale, so the map is row-wise and its output
    bound holds for every possible data set (what sensitivity analyses need).
    """
    positive("scale_rows: bound", bound, error=ConfigError)
    Z = np.asarray(X, dtype=np.float64) / bound
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    return np.ascontiguousarray(Z / np.maximum(norms, 1.0))
