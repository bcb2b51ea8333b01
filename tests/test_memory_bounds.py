"""Inputs that cannot fit in memory are refused before allocation, in one line with their size
(exit 2): a LIBSVM file densified at its index 2e9 was a MemoryError traceback (2.9 TiB; it is
now read at the declared --n-features, checked the same way), ``--n-samples 1e8`` a 36 GiB
allocation; an npz member holding raw pickle bytes failed with "'bytes' has no ndim"."""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dpnet.data import memory
from dpnet.run import main


def _one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main([*argv, "--quiet"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("dpnet: error: ")
    return lines[0]


def _member(array_bytes: bytes | None, array: np.ndarray | None = None) -> bytes:
    if array_bytes is not None:
        return array_bytes
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def test_a_libsvm_width_beyond_memory_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**30)  # a machine with 1 GiB free
    path = tmp_path / "wide.libsvm"
    path.write_text("1 1:0.5\n-1 2:0.3\n")
    line = _one_error_line(capsys, ["--data", str(path), "--n-features", "500000000"])
    assert "2 x 500,000,000 values are 7.45 GiB, held 2 times" in line


def test_synthetic_rows_beyond_memory_are_refused(monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**30)  # a machine with 1 GiB free
    line = _one_error_line(capsys, ["--n-samples", "10000000"])
    assert "10,000,000 x 48 values are 3.58 GiB, held 3 times" in line and "1 GiB" in line


def test_an_npz_header_beyond_memory_is_refused_before_reading(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (10**7, 10**5)}
    )
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("X.npy", header.getvalue())  # a header, no data: nothing to allocate
        archive.writestr("y.npy", _member(None, np.ones(3)))
    assert "10,000,000 x 100,000 values are 7.28 TiB" in _one_error_line(
        capsys, ["--data", str(path)]
    )


def test_an_npz_member_that_is_not_an_array_is_refused(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    X = np.random.default_rng(0).standard_normal((20, 3))
    path = tmp_path / "pickled.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("X.npy", pickle.dumps(X))  # numpy hands such a member back as bytes
        archive.writestr("y.npy", _member(None, np.where(X[:, 0] > 0, 1.0, -1.0)))
    assert "member 'X' is not a .npy array" in _one_error_line(capsys, ["--data", str(path)])


def test_byte_sizes_read_as_a_person_would() -> None:
    assert [memory.byte_size(n) for n in (0, 1023, 1024, 3 * 2**30, 2.5 * 2**40)] == [
        "0 B",
        "1.02e+03 B",
        "1 KiB",
        "3 GiB",
        "2.5 TiB",
    ]


def test_the_simulators_own_arrays_are_counted(monkeypatch, capsys) -> None:  # noqa: ANN001
    """--backend simulated holds the shards, their rows with the intercept column in one
    (J, n_max, p + 1) stack and the Newton step's buffer, and with --cv every machine's X~
    for its folds and the folds' stacks: ~5 n p 8 bytes, where the data's check counted 3
    (its generation). With memory between the two the job died with MemoryError after the
    set-up (issue 45, item 8: exit 1 after ~49 s); now exit 2 at once. 2,000 rows x 48
    columns at J = 5 with --cv 3: 2.30 MB passed, the simulator needs 3.85 MB."""
    argv = ["--backend", "simulated", "--n-samples", "2000", "--machines", "5", "--n-test", "0"]
    argv += ["--cv", "3", "--n-lambdas", "2"]
    monkeypatch.setattr(memory, "available_bytes", lambda: 3_500_000)
    line = _one_error_line(capsys, argv)
    assert "--backend simulated: 5 machines' 2,000 rows x 48 columns need about 3.67 MiB" in line
    monkeypatch.setattr(memory, "available_bytes", lambda: 3_900_000)  # just enough: it runs
    assert main([*argv, "--quiet", "--max-rounds", "3"]) == 0
