"""Checkpoint and resume: a run killed at any round and resumed ends bitwise equal to the
uninterrupted run; checkpoints hold a machine's own state only; other runs' are refused."""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from dpnet.network import TrafficStats
from tests.launch import run_job

COMMON = ["--seed", "7", "--n-samples", "600", "--n-test", "200", "--tol", "1e-14", "--quiet"]
ROUNDS = ["--max-rounds", "90"]
# what must not change when a run is resumed (times do: they are each process's own)
SAME = (
    "coef",
    "intercept",
    "rounds",
    "stop_reason",
    "objective",
    "history",
    "test_accuracy",
    "privacy",
)


def _job(tmp_path: Path, name: str, *extra: str, n_ranks: int | None = None, env=None):  # noqa: ANN001, ANN202
    out = tmp_path / f"{name}.json"
    args = [*COMMON, *extra, "--output", str(out)]
    if n_ranks is None:
        args += ["--machines", "5"]
    done = run_job(args, n_ranks=n_ranks, timeout=120, env=env)
    report = json.loads(out.read_text()) if out.exists() else None
    return done, report


def _assert_same_run(a: dict, b: dict) -> None:
    for key in SAME:
        assert a[key] == b[key], key
    for ma, mb in zip(a["machines"], b["machines"], strict=True):
        for key in ("rounds", "messages_sent", "bytes_sent", "exchanges"):
            assert ma[key] == mb[key], key


@pytest.fixture
def uninterrupted(job_report: Callable[..., dict]) -> dict:  # tests/conftest.py
    report = job_report(*COMMON, *ROUNDS, "--machines", "5")
    assert report["rounds"] == 90  # the tolerance is out of reach: every round is run
    return report


@pytest.mark.parametrize(
    "crash_round",
    [1, pytest.param(23, marks=pytest.mark.slow), pytest.param(60, marks=pytest.mark.slow), 89],
)  # the first and the last round in the fast loop; two in the middle in the full suite
def test_crash_then_resume_equals_the_uninterrupted_run(
    tmp_path: Path, uninterrupted: dict, crash_round: int
) -> None:
    ck = str(tmp_path / "ck")
    crash = {"DPNET_FAIL_AT": f"3:{crash_round}"}
    done, report = _job(
        tmp_path, "crashed", *ROUNDS, "--checkpoint", ck, "--checkpoint-every", "10", env=crash
    )
    assert done.returncode == 1 and report is None
    if crash_round <= 10:  # crashed before the first checkpoint: nothing to resume from
        again, _ = _job(tmp_path, "resumed", *ROUNDS, "--resume", ck)
        assert again.returncode == 2 and "has no checkpoint" in again.stderr
        return
    again, resumed = _job(tmp_path, "resumed", *ROUNDS, "--checkpoint", ck, "--resume", ck)
    assert again.returncode == 0, again.stderr
    assert resumed["resumed_from_round"] == (crash_round - 1) // 10 * 10
    _assert_same_run(resumed, uninterrupted)


def test_resume_uses_the_latest_round_every_machine_has(
    tmp_path: Path, uninterrupted: dict
) -> None:
    ck = tmp_path / "ck"
    done, _ = _job(
        tmp_path, "part", "--max-rounds", "50", "--checkpoint", str(ck), "--checkpoint-every", "20"
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (ck / "machine-2").iterdir()) == [
        "round-0000000020.npz",
        "round-0000000040.npz",
    ]
    (ck / "machine-2" / "round-0000000040.npz").unlink()  # killed while writing round 40
    again, resumed = _job(tmp_path, "resumed", *ROUNDS, "--resume", str(ck))
    assert again.returncode == 0, again.stderr
    assert resumed["resumed_from_round"] == 20
    _assert_same_run(resumed, uninterrupted)


def test_a_checkpoint_holds_only_the_machines_own_state(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    done, _ = _job(
        tmp_path,
        "part",
        "--max-rounds",
        "20",
        "--checkpoint",
        str(ck),
        "--checkpoint-every",
        "20",
        "--epsilon",
        "1",
    )
    assert done.returncode == 0, done.stderr
    path = ck / "machine-1" / "round-0000000020.npz"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with np.load(path, allow_pickle=False) as stored:
        names = set(stored.files)
        y = stored["y_randomized"]
        theta_nbhd = stored["theta_nbhd"]
        anchor = stored["newton_anchor"]
        margins = stored["theta_margins"]
        meta = json.loads(str(stored["meta"]))
    aggregator = {n for n in names if n.startswith("aggregator_")}
    assert names - aggregator == {
        "theta",
        "z",
        "theta_nbhd",
        "v_out",
        "v_in",
        "penalty_changes",  # (round, factor, rule) of each change of c: network statistics
        "history",
        "newton_anchor",  # an earlier theta iterate and its c d_j: where H was last formed
        "theta_margins",  # y~ x^T theta of its own rows (randomized labels, its features)
        "y_randomized",
        "meta",
    }
    assert set(np.unique(y)) <= {-1.0, 1.0} and y.shape == (120,)  # 600 rows over 5 machines
    assert theta_nbhd.shape[0] == 1 + 2  # itself and its two paper5 neighbours, no one else
    # a block of one machine: one row of p + 1 coefficients, then rho
    assert anchor.shape == (1, theta_nbhd.shape[1] + 1)
    assert margins.shape == (1, *y.shape)  # one per row of its own
    # nothing of the randomized-response stream (its state rewinds to every flip)
    # the next theta step's tolerance: floats from the machine's residuals (public inputs
    # and randomized labels, like c)
    assert set(meta) == {"format", "fingerprints", "round", "c", "theta_tol", "traffic"}
    assert meta["format"] == 6 and set(meta["traffic"]) == set(TrafficStats().as_dict())
    assert len(meta["theta_tol"]) == 1 and meta["theta_tol"][0] >= 1e-12


def test_resumed_labels_are_the_stored_ones_not_a_new_draw(tmp_path: Path) -> None:
    """Without --seed randomized response draws OS entropy: a resume that drew again would
    release the labels twice. Two resumes from one checkpoint give the same result."""
    rng = np.random.default_rng(0)
    for j in range(5):
        X = rng.standard_normal((60, 8))
        y = np.where(X[:, 0] + 0.5 * rng.standard_normal(60) > 0, 1.0, 0.0)
        np.savez(tmp_path / f"part-{j}.npz", X=X, y=y)
    shards = ["--data", str(tmp_path / "part-{rank}.npz"), "--epsilon", "1", "--quiet"]
    shards += ["--tol", "1e-14"]  # never converged before round 30, whatever the draw
    ck = tmp_path / "ck"
    first = run_job(
        [*shards, "--max-rounds", "30", "--checkpoint", str(ck), "--checkpoint-every", "10"]
    )
    assert first.returncode == 0, first.stderr
    reports = []
    for name in ("a", "b"):
        copy = tmp_path / f"ck-{name}"
        shutil.copytree(ck, copy)
        out = tmp_path / f"{name}.json"
        done = run_job([*shards, "--max-rounds", "60", "--resume", str(copy), "--output", str(out)])
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(out.read_text()))
    assert reports[0]["coef"] == reports[1]["coef"]
    assert reports[0]["resumed_from_round"] == 30


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (["--lam", "0.2"], "another settings"),
        (["--topology", "ring"], "another graph"),
        (["--n-samples", "605"], "another data"),
        (["--epsilon", "2"], "another settings"),
        (["--standardize"], "another settings"),  # the fit's columns
    ],
)
def test_a_checkpoint_of_another_run_is_refused(
    tmp_path: Path, round_20_checkpoints: Path, change: list[str], message: str
) -> None:
    ck = str(round_20_checkpoints)
    again, report = _job(tmp_path, "other", "--max-rounds", "40", "--resume", ck, *change)
    assert again.returncode == 2 and report is None
    assert message in again.stderr and "round-0000000020.npz" in again.stderr


@pytest.fixture(scope="module")
def round_20_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 20 rounds with one checkpoint per machine at round 20; its directory (run once
    for the module: the tests below resume, damage or refuse copies of it)."""
    tmp_path = tmp_path_factory.mktemp("round-20")
    ck = tmp_path / "ck"
    done, _ = _job(
        tmp_path, "part", "--max-rounds", "20", "--checkpoint", str(ck), "--checkpoint-every", "20"
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (ck / "machine-4").iterdir()) == ["round-0000000020.npz"]
    return ck


@pytest.fixture
def round_20_checkpoints(round_20_run: Path, tmp_path: Path) -> Path:
    """The test's own copy of :func:`round_20_run`'s checkpoint directory."""
    return Path(shutil.copytree(round_20_run, tmp_path / "ck"))


def test_a_format_2_checkpoint_is_refused_by_name(
    tmp_path: Path, round_20_checkpoints: Path
) -> None:
    """Format 2 stored the flip stream's PCG64 state: such a file is never resumed."""
    ck = round_20_checkpoints
    path = ck / "machine-2" / "round-0000000020.npz"
    with np.load(path, allow_pickle=False) as stored:
        arrays = {k: stored[k] for k in stored.files}
    meta = json.loads(str(arrays["meta"]))
    meta |= {"format": 2, "rng_state": np.random.default_rng(0).bit_generator.state}
    np.savez(path, **{**arrays, "meta": np.array(json.dumps(meta))})
    again, report = _job(tmp_path, "other", "--max-rounds", "40", "--resume", str(ck))
    assert again.returncode == 2 and report is None
    line = again.stderr.strip()
    assert "round-0000000020.npz: format 2 is refused" in line and "every raw label" in line
    assert len(line.splitlines()) == 1


def test_a_corrupt_checkpoint_is_refused(tmp_path: Path, round_20_checkpoints: Path) -> None:
    ck = round_20_checkpoints
    path = ck / "machine-4" / "round-0000000020.npz"
    path.write_bytes(path.read_bytes()[:200])
    again, _ = _job(tmp_path, "other", "--max-rounds", "40", "--resume", str(ck))
    assert again.returncode == 2
    assert "machine 4: checkpoint" in again.stderr and "cannot be read" in again.stderr


def test_checkpoints_of_rank0_split_data_need_a_seed(tmp_path: Path) -> None:
    done = run_job(["--quiet", "--checkpoint", str(tmp_path / "ck")])
    assert done.returncode == 2 and "need --seed" in done.stderr


@pytest.mark.mpi_launch
def test_mpi_crash_then_resume_equals_the_uninterrupted_run(
    tmp_path: Path, uninterrupted: dict
) -> None:
    ck = str(tmp_path / "ck")
    crash = {"DPNET_FAIL_AT": "1:47"}
    done, _ = _job(
        tmp_path,
        "crashed",
        *ROUNDS,
        "--checkpoint",
        ck,
        "--checkpoint-every",
        "15",
        n_ranks=5,
        env=crash,
    )
    assert done.returncode != 0
    again, resumed = _job(tmp_path, "resumed", *ROUNDS, "--resume", ck, n_ranks=5)
    assert again.returncode == 0, again.stderr
    assert resumed["resumed_from_round"] == 45 and resumed["backend"] == "mpi"
    _assert_same_run(resumed, uninterrupted)  # the in-process run: the backends agree bitwise


def test_a_checkpoint_of_another_seed_is_refused(tmp_path: Path) -> None:
    """Per-machine files (the seed does not change the rows): a run resumed with another
    --seed would report that seed for labels randomized with the first: refused."""
    rng = np.random.default_rng(8)
    for j in range(3):
        X = rng.standard_normal((30, 4))
        np.savez(tmp_path / f"m{j}.npz", X=X, y=np.where(X[:, 0] > 0, 1.0, -1.0))
    args = ["--data", str(tmp_path / "m{rank}.npz"), "--machines", "3", "--epsilon", "1"]
    args += ["--quiet", "--tol", "1e-14"]
    ck = str(tmp_path / "ck")
    first = run_job(
        [*args, "--seed", "1", "--max-rounds", "10", "--checkpoint", ck, "--checkpoint-every", "5"],
        timeout=120,
    )
    assert first.returncode == 0, first.stderr
    again = run_job([*args, "--seed", "2", "--max-rounds", "20", "--resume", ck], timeout=120)
    assert again.returncode == 2 and "another settings" in again.stderr
    assert again.stderr.count("\n") == 1


@pytest.mark.parametrize("damage", ["empty", "renamed"])
def test_a_damaged_checkpoint_is_one_line_and_exit_2(
    tmp_path: Path, round_20_checkpoints: Path, damage: str
) -> None:
    """A 0-byte file (a full disk, a crash while copying), or files renamed to another round
    (every machine's, so the machines agree on that round): one line naming the file."""
    ck = round_20_checkpoints
    if damage == "empty":
        (ck / "machine-2" / "round-0000000020.npz").write_bytes(b"")
        needle = "cannot be read (EOFError"
    else:
        for j in range(5):
            path = ck / f"machine-{j}" / "round-0000000020.npz"
            path.rename(path.with_name("round-0000000030.npz"))
        needle = "holds round 20, not the 30 its name says"
    again, report = _job(tmp_path, "other", "--max-rounds", "40", "--resume", str(ck))
    assert again.returncode == 2 and report is None
    assert needle in again.stderr and again.stderr.count("\n") == 1


def _kept(latest: int, every: int, keep: int, torn: bool) -> set[int]:
    """The checkpoints a machine at round ``latest`` keeps (``torn``: killed while writing)."""
    written = list(range(every, latest + 1, every))
    if torn and written and written[-1] == latest:
        written.pop()  # the write of this round never completed: the temp file is dropped
    return set(written[-keep:])


@pytest.mark.parametrize("every", [1, 2, 5])
@pytest.mark.parametrize("graph_name", ["path-9", "ring-8", "star-6", "random-12"])
def test_kept_checkpoints_always_share_a_round(graph_name: str, every: int) -> None:
    """Machines drift apart by up to their distance; with keep_count(drift, every) files each,
    some round is kept by every machine at any moment a run can end, for every pattern of
    rounds the synchronous exchanges allow (each rank killed mid-write or not). KEEP = 2 failed
    on an 8-ring with --checkpoint-every 1 (2 of 3 kill/resume runs)."""
    import networkx as nx

    from dpnet.cli.checkpoint import keep_count
    from dpnet.decentralized import tree_plan

    kind, size = graph_name.split("-")
    graph = {
        "path": nx.path_graph,
        "ring": nx.cycle_graph,
        "star": lambda n: nx.star_graph(n - 1),
        "random": lambda n: nx.connected_watts_strogatz_graph(n, 2, 0.3, seed=1),
    }[kind](int(size))
    keep = keep_count(tree_plan(graph, 0).drift, every)
    rng = np.random.default_rng(0)
    distance = dict(nx.all_pairs_shortest_path_length(graph))
    shortfalls = 0
    for _ in range(300):
        # any rounds with |t_i - t_j| <= dist(i, j): t_j = base + min_i (offset_i + dist(i, j))
        base = int(rng.integers(20, 60))
        offsets = rng.integers(0, 2 * graph.number_of_nodes(), graph.number_of_nodes())
        rounds = [base + min(int(offsets[i]) + distance[i][j] for i in graph) for j in graph]
        torn = rng.random(len(rounds)) < 0.5
        kept = [_kept(t, every, keep, bool(x)) for t, x in zip(rounds, torn, strict=True)]
        assert set.intersection(*kept), (rounds, keep)
        short = [_kept(t, every, 2, bool(x)) for t, x in zip(rounds, torn, strict=True)]
        shortfalls += not set.intersection(*short)
    if graph_name in ("path-9", "ring-8") and every == 1:
        assert shortfalls > 0  # two files each are not enough there


def test_a_refused_run_creates_no_checkpoint_directory(tmp_path: Path) -> None:
    """--checkpoint DIR is checked (an existing writable ancestor), not created, until the run
    has passed every check: a run refused for its topology leaves no directory behind."""
    ck = tmp_path / "new" / "ck"
    done, _ = _job(tmp_path, "bad", "--topology", "nonsense", "--checkpoint", str(ck))
    assert done.returncode == 2 and "nonsense" in done.stderr
    assert not (tmp_path / "new").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    done, _ = _job(tmp_path, "bad", "--checkpoint", str(blocker / "ck"))
    assert done.returncode == 2 and "is not a directory" in done.stderr
    done, _ = _job(
        tmp_path, "good", "--max-rounds", "10", "--checkpoint", str(ck), "--checkpoint-every", "5"
    )
    assert done.returncode == 0 and (ck / "machine-0").is_dir()


def test_a_killed_writers_temporary_file_is_swept_when_the_machine_starts(tmp_path: Path):
    """A rank killed while writing leaves ``.round-*.tmp``; it was swept at the next write
    only, so a resumed run that ended before its first checkpoint kept it (chaos test,
    SIGSTOP in the rounds)."""
    from dpnet.cli import Checkpointer
    from dpnet.cli.checkpoint import machine_dir

    own, other = machine_dir(tmp_path, 1), machine_dir(tmp_path, 2)
    for directory in (own, other):
        directory.mkdir(parents=True)
        (directory / ".round-ab12cd.tmp").write_bytes(b"half a checkpoint")
    (own / "round-0000000005.npz").write_bytes(b"kept")
    Checkpointer(tmp_path, 1, 5, 3, {"machine": "1"}, np.ones(3), dict)
    assert sorted(p.name for p in own.iterdir()) == ["round-0000000005.npz"]
    assert (other / ".round-ab12cd.tmp").exists()  # another machine's is its own to sweep
