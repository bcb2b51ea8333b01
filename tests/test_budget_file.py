"""--budget-file: a machine's privacy budget across jobs (dpnet.privacy.budget_file,
dpnet.cli.budget). Refused past the cap before any data is read; charged what the run's ledger
says the job spends on the machine; concurrent jobs all counted; kill -9 at any moment leaves
the file before or after a charge; a full disk refuses the job and keeps the file; a damaged
or foreign file is refused by name; every backend alike."""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dpnet.cli.budget import machine_spend
from dpnet.cli.config import parse_config
from dpnet.errors import ConfigError
from dpnet.privacy.budget import BudgetExceeded
from dpnet.privacy.budget_file import BudgetFileError, charge_budget, read_budget
from dpnet.run import main
from tests.disks import fill_disk
from tests.launch import Completed, finish_job, job_lines, run_job, start_job

TINY = ["--n-samples", "200", "--n-test", "0", "--max-rounds", "5", "--quiet"]
EPS1 = 0.999999999999999  # what the keep probability of --epsilon 1 spends (a double below 1)


def _job_errors(stderr: str) -> list[str]:
    return [ln for ln in job_lines(stderr) if not ln.startswith("dpnet: warning")]


def _refused(done: Completed, *words: str) -> str:
    lines = _job_errors(done.stderr)
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def job(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # noqa: ANN201
    """``python -m dpnet.run ARGS`` in this process (no interpreter start-up), in tmp_path."""
    monkeypatch.chdir(tmp_path)

    def run(args: list[str]) -> Completed:
        capsys.readouterr()
        code = main(args)
        out = capsys.readouterr()
        return Completed(code, out.out, out.err, "in-process")

    return run


def test_past_the_cap_the_job_is_refused_before_any_data_is_read(tmp_path: Path, job: Any) -> None:
    """Machine 1's file has 1 of its 1.5 left: the job (1 on every machine) is refused, its
    data files (which do not exist) never opened, and no machine charged."""
    charge_budget(str(tmp_path / "b-1.json"), (1.0, 0.0), (1.5, 0.0), "an earlier job")
    before = (tmp_path / "b-1.json").read_bytes()
    done = job(
        ["--machines", "3", "--data", "missing-{rank}.csv", "--budget-file", "b-{rank}.json"]
        + ["--budget-cap", "1.5"]
    )
    line = _refused(done, "b-1.json", "spends epsilon = 1", "spent epsilon = 1", "(1.5, 0)")
    assert "missing" not in line
    assert (tmp_path / "b-1.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b-1.json"]  # 0 and 2: none created


def test_refusals_of_the_options_and_of_the_file(tmp_path: Path, job: Any) -> None:
    """One line, exit 2, before anything runs: a path without {rank} for 3 machines, a file
    that does not exist without a cap, another cap than the file's, a job that is not private
    under a finite cap, a damaged and a foreign file (named, never reset)."""
    for argv, words in [
        (["--budget-cap", "1"], ["--budget-cap needs --budget-file"]),
        (["--budget-file", "b.json", "--budget-cap", "1,2"], ["delta must lie in [0, 1)"]),
    ]:
        with pytest.raises(ConfigError, match=re.escape(words[0])):
            parse_config(argv)
    one = job(["--machines", "3", "--budget-file", "b.json", "--budget-cap", "9"])
    _refused(one, "names one file for 3 machines", "{rank}")
    new = job(["--backend", "simulated", "--machines", "2", "--budget-file", "n-{rank}.json"])
    _refused(new, "n-0.json does not exist", "--budget-cap")
    charge_budget(str(tmp_path / "c-0.json"), (0.5, 0.0), (3.0, 0.0), "earlier")
    charge_budget(str(tmp_path / "c-1.json"), (0.5, 0.0), (3.0, 0.0), "earlier")
    base = ["--backend", "simulated", "--machines", "2", "--budget-file", "c-{rank}.json", *TINY]
    other = job([*base, "--budget-cap", "4"])
    _refused(other, "c-0.json has the cap (3, 0)", "--budget-cap gives (4, 0)")
    plain = job([*base, "--epsilon", "inf"])
    _refused(plain, "c-0.json", "(not private)", "spends epsilon = inf")
    good = (tmp_path / "c-1.json").read_bytes()
    (tmp_path / "c-1.json").write_bytes(good.replace(b'"epsilon": 0.5', b'"epsilon": 0.0'))
    damaged = job(base)
    _refused(damaged, "c-1.json", "line 2 is damaged", "never reset")
    (tmp_path / "c-1.json").write_text(json.dumps({"epsilon": 0.0}) + "\n")
    foreign = job(base)
    _refused(foreign, "c-1.json is not a dpnet budget file")
    assert read_budget(str(tmp_path / "c-0.json")).charges == 1  # nothing charged by any


@pytest.mark.parametrize("backend", ["threads", "simulated"])
def test_label_privacy_charges_what_the_ledger_says_each_machine_spends(
    tmp_path: Path, backend: str, job: Any
) -> None:
    done = job(
        ["--backend", backend, "--machines", "3", "--n-samples", "300", "--max-rounds", "10"]
        + ["--quiet", "--output", "r.json", "--budget-file", "b-{rank}.json"]
        + ["--budget-cap", "2", "--epsilon", "1.2"]
    )
    assert done.returncode == 0, done.stderr
    ledger = json.loads((tmp_path / "r.json").read_text())["privacy"]["ledger"]
    spent = ledger["per_machine_pure_epsilon"]
    assert set(spent) == {"0", "1", "2", "held-out rows"}
    for j in range(3):
        state = read_budget(str(tmp_path / f"b-{j}.json"))
        assert state is not None and state.charges == 1 and state.cap == (2.0, 0.0)
        expected = spent[str(j)] if j else max(spent["0"], spent["held-out rows"])
        assert state.spent == (expected, 0.0)
    again = job(
        ["--backend", backend, "--machines", "3", "--budget-file", "b-{rank}.json", *TINY]
    )  # 1.2 + 1 > 2 on every machine
    _refused(again, "b-0.json", "spent epsilon = 1.2", "(2, 0)")


def test_record_privacy_with_baselines_charges_the_ledgers_composition(
    tmp_path: Path, job: Any
) -> None:
    """--privacy record with --keep-prob: every machine's (epsilon, delta) plus its randomized
    response's epsilon (the ledger composes both); machine 0 also the four rdp-admm fits on its
    rows, each at the job's budget."""
    done = job(
        ["--backend", "simulated", "--machines", "3", "--n-samples", "300", "--n-test", "100"]
        + ["--privacy", "record", "--row-bound", "5", "--epsilon", "0.7", "--delta", "1e-6"]
        + ["--keep-prob", "0.8", "--max-rounds", "10", "--baselines", "rdp-admm", "--quiet"]
        + ["--output", "r.json", "--budget-file", "b-{rank}.json", "--budget-cap", "20,1e-3"]
    )
    assert done.returncode in (0, 3), done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    privacy, fits = report["privacy"], report["baselines"]["rdp-admm"]["methods"]
    assert (privacy["epsilon_per_machine"], privacy["delta"]) == (0.7, 1e-6)
    for j in range(3):
        releases = [r for r in privacy["ledger"]["releases"] if r["machine"] == j]
        pure = [r["pure_epsilon"] for r in releases if r["pure_epsilon"] != "inf"]
        gaussian = [r for r in releases if r["event"]["type"] == "SelfComposedDpEvent"]
        expected_eps, expected_delta = sum(pure) + 0.7, 1e-6  # RR + the noisy thetas
        if j == 0:  # the job's own releases, then the baselines' (targets: each <= it)
            assert len(gaussian) == 1 + len(fits) == 5
            assert all(f["privacy"]["epsilon"] <= 0.7 and f["privacy"]["delta"] == 1e-6
                       for f in fits.values())  # fmt: skip
            expected_eps, expected_delta = expected_eps + 0.7 * 4, expected_delta + 1e-6 * 4
        state = read_budget(str(tmp_path / f"b-{j}.json"))
        assert state is not None and state.charges == 1
        assert state.spent == pytest.approx((expected_eps, expected_delta), rel=1e-12)
    config = parse_config(
        ["--privacy", "record", "--row-bound", "5", "--epsilon", "0.7", "--delta", "1e-6"]
        + ["--keep-prob", "0.8", "--baselines", "rdp-admm"]
    )
    from dpnet.baselines.rdp_admm.experiment import ESTABLISHED_METHODS

    assert machine_spend(config, 0)[1] == pytest.approx(1e-6 * (1 + len(ESTABLISHED_METHODS)))


def test_the_file_is_a_function_of_public_inputs_only(tmp_path: Path, job: Any) -> None:
    """Two jobs of other seeds and other data write byte-identical files: no seed, no stream
    state, no data-derived value, no clock."""
    for seed, rows in (("1", "300"), ("2", "400")):
        (tmp_path / seed).mkdir()
        done = job(
            ["--backend", "simulated", "--machines", "2", "--seed", seed, "--n-samples", rows]
            + ["--max-rounds", "5", "--quiet", "--budget-file", f"{seed}/b-{{rank}}.json"]
            + ["--budget-cap", "3"],
        )
        assert done.returncode == 0, done.stderr
    for j in range(2):
        first = (tmp_path / "1" / f"b-{j}.json").read_bytes()
        assert first == (tmp_path / "2" / f"b-{j}.json").read_bytes()
        assert b"seed" not in first and b"300" not in first


def _charge_once(path: str, start: Any, cap: float, taken: Any) -> None:
    start.wait()
    try:
        charge_budget(path, (1.0, 0.0), (cap, 0.0), "one of eight")
    except BudgetExceeded:
        taken.put(False)
    else:
        taken.put(True)


@pytest.mark.parametrize("cap", [100.0, 5.0])
def test_eight_processes_charging_at_once_are_all_counted(tmp_path: Path, cap: float) -> None:
    """8 processes released together on one new file: every charge counted once (cap 100);
    with room for 5, exactly 5 are taken and 3 refused (the check and the append are one
    step under the lock)."""
    path = str(tmp_path / "b.json")
    context = multiprocessing.get_context("fork")
    start, taken = context.Barrier(8), context.Queue()
    processes = [
        context.Process(target=_charge_once, args=(path, start, cap, taken)) for _ in range(8)
    ]
    for process in processes:
        process.start()
    outcomes = [taken.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    state = read_budget(path)
    assert state is not None
    assert sum(outcomes) == state.charges == min(8, int(cap))
    assert state.spent == (state.charges, 0)


def test_a_charge_waits_for_the_lock(tmp_path: Path) -> None:
    """While another process holds the file's lock, a charge does not read or write it."""
    path = tmp_path / "b.json"
    charge_budget(str(path), (1.0, 0.0), (10.0, 0.0), "first")
    code = "import sys; from dpnet.privacy.budget_file import charge_budget as c; "
    code += "c(sys.argv[1], (1.0, 0.0), None, 'second')"
    with path.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        child = subprocess.Popen([sys.executable, "-c", code, str(path)], env=_env())
        time.sleep(1.0)
        assert child.poll() is None  # blocked (a slow start only makes this easier to pass)
        assert read_budget_unlocked(path) == 1
    assert child.wait(timeout=60) == 0
    assert read_budget(str(path)).charges == 2


def read_budget_unlocked(path: Path) -> int:
    return len(path.read_bytes().splitlines()) - 1


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


def test_two_real_jobs_at_once_are_both_counted(tmp_path: Path) -> None:
    args = ["--machines", "2", "--budget-file", "b-{rank}.json", "--budget-cap", "10", *TINY]
    jobs = [start_job(args, cwd=tmp_path) for _ in range(2)]
    for done in [finish_job(job, 120) for job in jobs]:
        assert done.returncode == 0, done.stderr
    for j in range(2):
        state = read_budget(str(tmp_path / f"b-{j}.json"))
        assert state is not None and state.charges == 2 and state.spent == (2 * EPS1, 0.0)


LOOP = """
import sys
from dpnet.privacy.budget_file import charge_budget
while True:
    charge_budget(sys.argv[1], (1.0, 0.0), (1e9, 0.0), "loop")
    sys.stdout.write("charged\\n")
    sys.stdout.flush()
"""


def test_kill_9_at_random_moments_leaves_the_file_before_or_after_a_charge(
    tmp_path: Path,
) -> None:
    """A process charging in a loop, SIGKILLed at random moments: every charge it reported is
    in the file, at most one more (durable, not yet reported), the file always parses, and the
    next charge goes on from it."""
    path = tmp_path / "b.json"
    rng = random.Random(45)
    counted = 0
    for _ in range(8):
        child = subprocess.Popen(
            [sys.executable, "-c", LOOP, str(path)], stdout=subprocess.PIPE, env=_env()
        )
        assert child.stdout is not None
        assert child.stdout.readline() == b"charged\n"  # past start-up: now in the loop
        time.sleep(rng.uniform(0.0, 0.03))
        child.send_signal(signal.SIGKILL)
        reported = 1 + child.stdout.read().count(b"charged\n")
        child.wait()
        state = read_budget(str(path))
        assert state is not None
        assert counted + reported <= state.charges <= counted + reported + 1
        assert state.spent == (state.charges, 0.0)
        counted = state.charges
    assert charge_budget(str(path), (1.0, 0.0), None, "after").charges == counted + 1


def test_a_half_written_record_is_not_counted_and_is_cut_off(tmp_path: Path) -> None:
    """What a kill in the middle of a write leaves (a last line without its newline): not
    counted, and the next charge removes it; a header cut short is a file never created."""
    path = tmp_path / "b.json"
    charge_budget(str(path), (1.0, 0.0), (5.0, 0.0), "one")
    whole = path.read_bytes()
    line = whole.splitlines(keepends=True)[1]
    for cut in (1, len(line) // 2, len(line) - 1):
        path.write_bytes(whole + line[:cut])
        state = read_budget(str(path))
        assert state is not None and state.torn_tail and state.charges == 1
    after = charge_budget(str(path), (1.0, 0.0), None, "two")
    assert after.charges == 2 and not read_budget(str(path)).torn_tail
    assert path.read_bytes().startswith(whole) and path.read_bytes().endswith(b"\n")
    header = whole.splitlines(keepends=True)[0]
    path.write_bytes(header[:-1])  # the creation was killed before the header's newline
    assert read_budget(str(path)) is None
    with pytest.raises(BudgetFileError, match="is empty"):
        charge_budget(str(path), (1.0, 0.0), None, "no cap")
    assert charge_budget(str(path), (1.0, 0.0), (5.0, 0.0), "created").charges == 1


def test_lines_parsed_before_are_not_trusted_for_another_file(tmp_path: Path) -> None:
    """Reading a file again parses only the lines after those read before (a spool charged
    by every fit of a session), and only if the file still starts with them: a damaged line
    after them is named by its number, and a file replaced at the same path is read anew."""
    path = tmp_path / "b.json"
    for job in ("one", "two", "three"):
        charge_budget(str(path), (1.0, 0.0), (5.0, 0.0), job)
    assert read_budget(str(path)).charges == 3
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"epsilon": 1.0, "delta": 0.0, "job": "x", "check": "0"}\n')
    with pytest.raises(BudgetFileError, match="line 5 is damaged"):
        read_budget(str(path))
    path.write_bytes(whole)
    other = tmp_path / "other.json"
    for job in ("a", "b", "c", "d"):
        charge_budget(str(other), (0.5, 0.0), (9.0, 0.0), job)
    os.replace(other, path)  # longer, another cap: its first lines differ
    state = read_budget(str(path))
    assert state.cap == (9.0, 0.0) and state.charges == 4 and state.spent == (2.0, 0.0)
    assert [job for job, _, _ in state.entries] == ["a", "b", "c", "d"]


def _pad_to_page(path: Path, page: int = 4096) -> None:
    """Charge 0 with a description that ends the file exactly on a page: the next charge needs
    a new page of the (full) tmpfs."""
    size = path.stat().st_size
    spare = path.with_name("probe.json")  # the line's length without its description
    spare.write_bytes(path.read_bytes())
    charge_budget(str(spare), (0.0, 0.0), None, "")
    empty = spare.stat().st_size - size
    spare.unlink()
    charge_budget(str(path), (0.0, 0.0), None, "x" * (page - (size + empty) % page))
    assert path.stat().st_size % page == 0


def test_a_full_disk_refuses_the_job_and_keeps_the_file(small_disk: Path, job: Any) -> None:
    path = small_disk / "b-0.json"
    charge_budget(str(path), (1.0, 0.0), (10.0, 0.0), "before")
    _pad_to_page(path)
    before = path.read_bytes()
    fill_disk(small_disk)
    with pytest.raises(BudgetFileError, match="No space left on device"):
        charge_budget(str(path), (1.0, 0.0), None, "library")
    assert path.read_bytes() == before
    args = ["--machines", "1", "--budget-file", str(small_disk / "b-{rank}.json"), *TINY]
    done = job(args)
    _refused(done, "b-0.json: the charge could not be written", "No space left on device")
    assert path.read_bytes() == before
    new = job([*args[:3], str(small_disk / "n-{rank}.json"), "--budget-cap", "3", *TINY])
    _refused(new, "n-0.json", "No space left on device")
    assert read_budget(str(small_disk / "n-0.json")) is None  # absent, or empty: not created
    (small_disk / "filler").unlink()
    assert job(args).returncode == 0
    assert read_budget(str(path)).charges == 3  # before, the padding, this job


@pytest.mark.mpi_launch
def test_under_mpiexec_every_rank_charges_its_own_file(tmp_path: Path) -> None:
    args = ["--budget-file", "b-{rank}.json", "--budget-cap", "1.5", *TINY]
    first = run_job(args, n_ranks=3, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    for j in range(3):
        assert read_budget(str(tmp_path / f"b-{j}.json")).spent == (EPS1, 0.0)
    charge_budget(str(tmp_path / "b-0.json"), (0.0, 0.0), None, "nothing")  # 0 still fits
    (tmp_path / "b-2.json").unlink()  # machine 2: a new file, would be created
    second = run_job(args, n_ranks=3, cwd=tmp_path)
    _refused(second, "b-0.json", "spent epsilon = 1", "(1.5, 0)")
    assert read_budget(str(tmp_path / "b-1.json")).charges == 1  # no machine charged
    assert not (tmp_path / "b-2.json").exists()
