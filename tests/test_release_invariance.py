"""The release boundary against the mechanism's randomness: the randomized labels held fixed,
the raw labels *and* the uniforms that produced the randomized labels from them varied.

Each pair of runs uses the real mechanism with uniforms the test knows
(``tests.varied_randomness``): run a draws from key 1, run b from key 2, and each run's raw labels
are chosen so that the real randomized response yields the same target labels (many raw labels
differ between the runs). Every surface of :data:`devtools.surfaces.SURFACES` that is inside the
release boundary must then be byte-identical: stdout, stderr, the results file, the plots, the
checkpoints (also after a resume), every message a machine sends. An output that carries the
mechanism's randomness (a stream state, a seed, a uniform) rather than a label differs between
the runs; checkpoints storing the flip stream's state failed this test. The oracle file, outside
the boundary, must differ: that shows the raw labels reached the job.
"""

from __future__ import annotations

import json
import math
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pytest

from devtools.surfaces import INPUT_PATH_OPTIONS, NON_PATH_OPTIONS, SURFACES, active_surfaces
from dpnet import streams
from dpnet.cli import RunConfig, parse_config
from dpnet.data import split_rows, train_test_split_indices
from tests.launch import Completed, run_job
from tests.varied_randomness import (
    FIXED_THETAS_VARIABLE,
    HOLDOUT,
    KEY_VARIABLE,
    MESSAGES_VARIABLE,
    raw_labels_for,
)

J, N, SEED, EPSILON, TEST_FRACTION = 5, 60, 3, 1.0, 0.25
KEEP = math.exp(EPSILON) / (1 + math.exp(EPSILON))
KEYS = (1, 2)
COMMON = ["--seed", str(SEED), "--epsilon", str(EPSILON), "--machines", str(J)]
OUTPUTS = ["--output", "r.json", "--plot", "conv.png", "--oracle-output", "oracle.json"]
OUTPUTS += ["--progress-every", "10", "--budget-file", "budget-{rank}.json", "--budget-cap", "inf"]

SINGLE_FILE = [*COMMON, *OUTPUTS, "--data", "d.npz", "--test-fraction", str(TEST_FRACTION)]
CHECKPOINTED = [*SINGLE_FILE, "--tol", "1e-14", "--max-rounds", "30"]
CHECKPOINTED += ["--checkpoint", "ck", "--checkpoint-every", "10"]
RESUMED = [*SINGLE_FILE, "--tol", "1e-14", "--max-rounds", "50", "--resume", "ck"]
RESUMED += ["--checkpoint", "ck2", "--checkpoint-every", "10", "--output", "r2.json"]
CROSS_VALIDATED = [*COMMON, *OUTPUTS, "--data", "part-{rank}.npz", "--cv", "3", "--standardize"]
CROSS_VALIDATED += ["--n-lambdas", "3", "--cv-plot", "cv.png", "--max-rounds", "100"]


def _features() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, groups and the target randomized labels (public in both runs)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, 6))
    target = np.where(X[:, 0] - X[:, 2] + 0.5 * rng.standard_normal(N) > 0, 1.0, -1.0)
    return X, np.repeat(np.arange(3), 2), target


def _single_file_labels(target: np.ndarray, key: int) -> np.ndarray:
    """Raw labels of d.npz that the job (its split and shards) randomizes into ``target``."""
    train, test = train_test_split_indices(N, TEST_FRACTION, streams.data_stream(SEED))
    raw = np.empty(N)
    for j, idx in enumerate(split_rows(len(train), J)):
        rows = train[idx]
        raw[rows] = raw_labels_for(target[rows], key, j, KEEP)
    raw[test] = raw_labels_for(target[test], key, HOLDOUT, KEEP)
    return raw


def _write_inputs(workdir: Path, key: int, per_machine: bool) -> np.ndarray:
    X, groups, target = _features()
    workdir.mkdir()
    if not per_machine:
        raw = _single_file_labels(target, key)
        np.savez(workdir / "d.npz", X=X, y=raw, groups=groups)
        return raw
    raw = np.empty(N)
    for j, rows in enumerate(split_rows(N, J)):
        raw[rows] = raw_labels_for(target[rows], key, j, KEEP)
        np.savez(workdir / f"part-{j}.npz", X=X[rows], y=raw[rows], groups=groups)
    return raw


@dataclass(frozen=True)
class Finished:
    """A finished run: its exit, its working directory and where its message digests are."""

    done: Completed
    workdir: Path
    messages: Path
    config: RunConfig


def _run(
    workdir: Path, args: list[str], key: int, n_ranks: int | None, fixed_thetas: bool = False
) -> Finished:
    messages = workdir / f"messages-{len(list(workdir.glob('messages-*')))}"
    messages.mkdir()
    env = {KEY_VARIABLE: str(key), MESSAGES_VARIABLE: str(messages)}
    if fixed_thetas:
        env[FIXED_THETAS_VARIABLE] = "1"
    done = run_job(
        args, n_ranks=n_ranks, module="tests.varied_randomness", cwd=workdir, env=env, timeout=240
    )
    assert done.returncode == 0, done.stderr
    return Finished(done, workdir, messages, parse_config(args))


def _tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def _messages(surface: str) -> Callable[[Finished], object]:
    def collect(run: Finished) -> object:
        lines = []
        for file in run.messages.glob("*.txt"):
            lines += [ln for ln in file.read_text().splitlines() if f" {surface}: " in ln]
        assert lines, f"no {surface} recorded"
        return sorted(lines)

    return collect


def _file(option: str) -> Callable[[Finished], object]:
    def collect(run: Finished) -> object:
        path = run.workdir / getattr(run.config, option)
        return _tree(path) if path.is_dir() else path.read_bytes()

    return collect


def _per_machine(option: str) -> Callable[[Finished], object]:
    """Every machine's file of a {rank} option, by machine."""

    def collect(run: Finished) -> object:
        return [(run.workdir / name).read_bytes() for name in _expand(getattr(run.config, option))]

    return collect


def _expand(path: str) -> list[str]:
    """A path option's files: one per machine with {rank} in it."""
    return [path.replace("{rank}", str(j)) for j in range(J)] if "{rank}" in path else [path]


COLLECTORS: dict[str, Callable[[Finished], object]] = {
    "stdout": lambda run: run.done.stdout,
    "stderr": lambda run: run.done.stderr,
    "neighbour messages": _messages("neighbour messages"),
    "final gather": _messages("final gather"),
    "operations": _messages("operations"),
    "results": _file("output"),
    "plot": _file("plot"),
    "cv plot": _file("cv_plot"),
    "checkpoints": _file("checkpoint"),
    "budget files": _per_machine("budget_file"),
}
"""How to read each released surface of a finished run (one per surface of SURFACES)."""


def _released(run: Finished) -> dict[str, object]:
    out = {}
    for surface in active_surfaces(run.config):
        if surface.released:
            assert surface.name in COLLECTORS, f"surface {surface.name!r} is not tested"
            out[surface.name] = COLLECTORS[surface.name](run)
    return out


def _files_outside_the_inventory(workdir: Path, runs: list[list[str]]) -> set[str]:
    """Top-level paths in ``workdir`` that no input, no test file and no surface accounts for."""
    claimed = {"d.npz", *(f"part-{j}.npz" for j in range(J))}
    for args in runs:
        config = parse_config(args)
        for surface in active_surfaces(config):
            if surface.option:
                claimed |= set(_expand(getattr(config, surface.option)))
    present = {p.name for p in workdir.iterdir() if not p.name.startswith("messages-")}
    return present - claimed


def test_every_released_surface_has_a_collector():
    names = {s.name for s in SURFACES if s.released}
    assert names == set(COLLECTORS), "every released surface needs a collector here"
    assert all(s.option is None or s.option in RunConfig.__dataclass_fields__ for s in SURFACES)


def test_every_path_option_is_classified():
    """Every string option of the CLI is a surface (it writes), an input (it reads) or no
    path at all: a new output option cannot slip past the inventory."""
    hints = typing.get_type_hints(RunConfig)
    string_options = {f.name for f in fields(RunConfig) if hints[f.name] in (str, str | None)}
    string_options -= {f.name for f in fields(RunConfig) if "choices" in f.metadata}
    written = {s.option for s in SURFACES if s.option is not None}
    assert string_options == (written | set(INPUT_PATH_OPTIONS) | set(NON_PATH_OPTIONS))


@pytest.mark.mpi_launch
@pytest.mark.parametrize("backend", ["threads", "mpiexec", "simulated"])
@pytest.mark.parametrize(
    "layout",
    ["single file, held-out rows, checkpoints and resume", "own files, cross-validation"],
)
def test_raw_labels_and_uniforms_change_nothing_released(tmp_path, backend, layout):
    per_machine = layout.startswith("own files")
    runs = [CROSS_VALIDATED] if per_machine else [CHECKPOINTED, RESUMED]
    n_ranks = J if backend == "mpiexec" else None
    if backend == "simulated":  # no checkpoints there (refused): the same run without them
        runs = [[*CROSS_VALIDATED] if per_machine else [*SINGLE_FILE, "--max-rounds", "30"]]
        runs = [[*args, "--backend", "simulated"] for args in runs]
    released, oracles, raws = [], [], []
    for key in KEYS:
        workdir = tmp_path / f"key-{key}"
        raws.append(_write_inputs(workdir, key, per_machine))
        surfaces: dict[str, object] = {}
        for i, args in enumerate(runs):
            finished = _run(workdir, args, key, n_ranks)
            surfaces |= {f"{name} (run {i})": v for name, v in _released(finished).items()}
        released.append(surfaces)
        oracles.append((workdir / "oracle.json").read_bytes())
        assert not _files_outside_the_inventory(workdir, runs)
    assert np.count_nonzero(raws[0] != raws[1]) >= 10, "the two runs' raw labels should differ"
    for name in released[0]:
        assert released[0][name] == released[1][name], (
            f"{name} depends on the raw labels or uniforms"
        )
    assert oracles[0] != oracles[1], "the oracle file should see the changed raw labels"


RECORD = ["--privacy", "record", "--epsilon", "1", "--row-bound", "3", "--machines", str(J)]
RECORD += ["--keep-prob", str(KEEP), "--data", "part-{rank}.npz", "--test-data", "test.npz"]
RECORD += ["--output", "r.json", "--plot", "conv.png", "--oracle-output", "oracle.json"]
RECORD += ["--progress-every", "10", "--max-rounds", "30"]
RECORD += ["--budget-file", "budget-{rank}.json", "--budget-cap", "inf"]


def _write_record_inputs(workdir: Path, key: int) -> np.ndarray:
    """Every machine's own file: features that differ between the keys in every row, raw
    labels that the key's randomized response turns into the same targets; one public test
    file, the same for both keys. No --seed: the noise streams draw OS entropy."""
    X, groups, target = _features()
    X = X + np.random.default_rng(100 + key).standard_normal(X.shape)
    workdir.mkdir()
    raw = np.empty(N)
    for j, rows in enumerate(split_rows(N, J)):
        raw[rows] = raw_labels_for(target[rows], key, j, KEEP)
        np.savez(workdir / f"part-{j}.npz", X=X[rows], y=raw[rows], groups=groups)
    test_X, _, test_y = _features()
    np.savez(workdir / "test.npz", X=test_X, y=test_y, groups=groups)
    return X


@pytest.mark.mpi_launch
@pytest.mark.parametrize("backend", ["threads", "mpiexec", "simulated"])
def test_raw_records_and_noise_change_nothing_released(tmp_path, backend):
    """--privacy record: the released thetas held fixed (every machine's, every round's), the
    raw records (every feature, every raw label), the randomized-response uniforms and the
    Gaussian noise streams varied: every released surface is byte-identical. The oracle file,
    which reads the raw rows, differs."""
    n_ranks = J if backend == "mpiexec" else None
    args = [*RECORD, *(["--backend", "simulated"] if backend == "simulated" else [])]
    released, oracles, features = [], [], []
    for key in KEYS:
        workdir = tmp_path / f"key-{key}"
        features.append(_write_record_inputs(workdir, key))
        finished = _run(workdir, args, key, n_ranks, fixed_thetas=True)
        released.append(_released(finished))
        oracles.append((workdir / "oracle.json").read_bytes())
        assert not _files_outside_the_inventory(workdir, [args]) - {"test.npz"}
    assert np.all(features[0] != features[1]), "every raw feature should differ"
    for name in released[0]:
        assert released[0][name] == released[1][name], f"{name} depends on the raw records"
    assert oracles[0] != oracles[1], "the oracle file should see the changed raw records"


@pytest.mark.parametrize("backend", ["threads", "simulated"])
def test_raw_records_change_nothing_released_with_standardize(tmp_path, backend):
    """--privacy record --standardize: the released column sums (every machine's sums and sums
    of squares) and thetas held fixed, every raw record, uniform and noise stream varied:
    every released surface is byte-identical, the centre and scale of the results file too;
    the oracle file differs."""
    args = [*RECORD, "--standardize"]
    args += ["--backend", "simulated"] if backend == "simulated" else []
    released, oracles = [], []
    for key in KEYS:
        workdir = tmp_path / f"key-{key}"
        _write_record_inputs(workdir, key)
        finished = _run(workdir, args, key, None, fixed_thetas=True)
        released.append(_released(finished))
        oracles.append((workdir / "oracle.json").read_bytes())
        report = json.loads((workdir / "r.json").read_text())
        assert report["standardization"] is not None  # the fit was standardized
        assert report["privacy"]["standardization"]["row_clip"] > 0
    for name in released[0]:
        assert released[0][name] == released[1][name], f"{name} depends on the raw records"
    assert oracles[0] != oracles[1], "the oracle file should see the changed raw records"
