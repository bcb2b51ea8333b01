"""Fuzz the main job's CLI: random CSV / npz / LIBSVM contents and random option values.

Every outcome must be either a finished run whose row count equals the file's (exit 0, or 3
when the run ends without an estimate), or one ``dpnet: error:`` line and exit 2: never a
traceback, a hang or a silently changed data set. Bounded (80 examples, at most 20 rounds
each) so that it stays a few seconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dpnet.run import main

SPECIAL_FEATURE = st.sampled_from([1e-300, 1e99, -1e99, 1e150, math.nan, math.inf, -math.inf])
LABEL = st.sampled_from(["1", "0", "-1", "1.0", "-1.0"])
BAD_LABEL = st.sampled_from(["2", "yes", "nan", "", "0.5"])


BAD_NUMBER = st.sampled_from(
    [
        "0",
        "-1",
        "37",
        "800",
        "1e308",
        "nan",
        "inf",
        "-inf",
        "x",
        "",
        "2.5",
        "99999999999999999999999",
    ]
)
GOOD = {
    "--lam": st.floats(1e-4, 10).map(repr),
    "--epsilon": st.sampled_from(["0.1", "1", "5", "36", "inf"]),
    "--tol": st.floats(1e-12, 0.5).map(repr),
    "--test-fraction": st.sampled_from(["0", "0.1", "0.25", "0.5", "0.9"]),
    "--seed": st.integers(0, 2**40).map(str),
    "--machines": st.integers(1, 6).map(str),
    "--topology": st.sampled_from(["ring", "path", "complete", "star", "paper5"]),
}


@st.composite
def options(draw) -> list[str]:
    """Valid values for every option but at most one, which gets a bad value (so that about
    half the examples run and the other half test one refusal each)."""
    bad = draw(st.sampled_from([None] * len(GOOD) + list(GOOD)))
    argv: list[str] = []
    for name, good in GOOD.items():
        argv += [name, draw(BAD_NUMBER if name == bad else good)]
    return argv


@st.composite
def data_files(draw):
    """A data set in one of the formats; sometimes one absurd feature or one label outside
    the domain (one bad cell each, so that most examples are valid)."""
    n = draw(st.integers(1, 24))
    p = draw(st.integers(1, 4))
    X = np.array(
        draw(st.lists(st.lists(st.floats(-5, 5), min_size=p, max_size=p), min_size=n, max_size=n))
    )
    labels = draw(st.lists(LABEL, min_size=n, max_size=n))
    if draw(st.integers(0, 3)) == 0:
        X[draw(st.integers(0, n - 1)), draw(st.integers(0, p - 1))] = draw(SPECIAL_FEATURE)
    if draw(st.integers(0, 3)) == 0:
        labels[draw(st.integers(0, n - 1))] = draw(BAD_LABEL)
    kind = draw(st.sampled_from(["csv", "npz", "libsvm"]))
    return kind, X, labels, draw(st.booleans()), draw(st.booleans())


def _write(
    directory: Path, kind: str, X: np.ndarray, labels: list[str], header: bool, bom: bool
) -> Path:
    if kind == "npz":
        path = directory / "d.npz"
        np.savez(path, X=X, y=np.array(labels))  # text labels: the loader maps them
        return path
    if kind == "libsvm":
        path = directory / "d.libsvm"
        lines = [
            f"{lab} " + " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(row))
            for row, lab in zip(X, labels, strict=True)
        ]
    else:
        path = directory / "d.csv"
        lines = [",".join([*(f"f{j}" for j in range(X.shape[1])), "y"])] if header else []
        lines += [
            ",".join([*(repr(float(v)) for v in row), lab])
            for row, lab in zip(X, labels, strict=True)
        ]
    path.write_bytes(
        ("\ufeff" if bom and kind == "csv" else "").encode() + "\n".join(lines).encode() + b"\n"
    )
    return path


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=data_files(), opts=options())
def test_cli_never_crashes_or_drops_rows(data, opts):
    kind, X, labels, header, bom = data
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), kind, X, labels, header, bom)
        out = Path(tmp) / "r.json"
        argv = ["--data", str(path), "--n-features", str(X.shape[1]), *opts]  # the schema's
        argv += ["--max-rounds", "20", "--quiet", "--output", str(out)]
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(argv)
        err_lines = [ln for ln in stderr.getvalue().splitlines() if ln.strip()]
        if code == 2:
            assert len(err_lines) == 1 and err_lines[0].startswith("dpnet: error: "), err_lines
            assert not out.exists()
            event("refused: " + err_lines[0].replace(tmp, "")[14:40])
            return
        event(f"ran, exit {code}")
        assert code in (0, 3), (code, err_lines)
        report = json.loads(out.read_text())
        assert report["n_train"] + (report["n_test"] or 0) == X.shape[0]
        assert all(ln.startswith("dpnet: warning: ") for ln in err_lines), err_lines
