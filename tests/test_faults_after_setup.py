"""A fault after set-up ends the same way on every backend: the same exit code, the same line.

- Data every machine finds unusable in the same exchange (``--cv`` on randomized labels of one
  class: lambda_max is undefined) is exit 2 with one ``dpnet: error:`` line from rank 0; under
  mpiexec this used to be exit 1 and ``rank R failed: DataError`` (issue 19).
- An unexpected exception on one machine is exit 1 with ``dpnet: rank R failed: ...``; in-process
  this used to be a traceback. The simulated backend ends both the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.launch import run_job

J = 4


def _dpnet_lines(stderr: str) -> list[str]:
    """dpnet's own lines (mpiexec adds a line of its own when a rank aborts)."""
    return [ln for ln in stderr.splitlines() if ln.startswith("dpnet:")]


def _one_class_file(tmp_path):
    X = np.random.default_rng(0).standard_normal((40, 4))
    np.savez(tmp_path / "one.npz", X=X, y=np.ones(40))
    return str(tmp_path / "one.npz")


@pytest.mark.mpi_launch
def test_cv_on_one_class_labels_is_exit_2_and_one_line_on_every_backend(tmp_path):
    # labels as given (--epsilon inf): randomized response would give the fit both classes
    args = ["--data", _one_class_file(tmp_path), "--cv", "3", "--test-fraction", "0"]
    args += ["--epsilon", "inf"]
    args += ["--machines", str(J), "--output", str(tmp_path / "r.json")]
    ends = {
        "threads": run_job(args, timeout=60),
        "mpiexec": run_job(args, n_ranks=J, timeout=60),
        "simulated": run_job([*args, "--backend", "simulated"], timeout=60),
    }
    lines = {name: _dpnet_lines(done.stderr) for name, done in ends.items()}
    for name, done in ends.items():
        assert done.returncode == 2, (name, done.stderr)
        assert len(lines[name]) == 1 and "Traceback" not in done.stderr, done.stderr
        assert "lambda_max is undefined" in lines[name][0]
    assert lines["threads"] == lines["mpiexec"] == lines["simulated"]
    assert not (tmp_path / "r.json").exists()


@pytest.mark.mpi_launch
def test_an_exception_on_one_machine_is_exit_1_and_one_line_on_every_backend(tmp_path):
    args = ["--n-samples", "300", "--quiet", "--machines", "5"]
    args += ["--output", str(tmp_path / "r.json")]
    env = {"DPNET_FAIL_AT": "2:5"}
    ends = {
        "threads": run_job(args, timeout=60, env=env),
        "mpiexec": run_job(args, n_ranks=5, timeout=60, env=env),
        "simulated": run_job([*args, "--backend", "simulated"], timeout=60, env=env),
    }
    expected = "dpnet: rank 2 failed: RuntimeError: injected fault on machine 2 in round 5"
    for name, done in ends.items():
        assert done.returncode == 1, (name, done.stderr)
        assert _dpnet_lines(done.stderr) == [expected], done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow  # two whole jobs as subprocesses (fault variables set, nothing injected)
def test_the_job_itself_reads_no_fault_variable(tmp_path):
    """Fault injection lives in tests/fault_entry.py: dpnet.run with DPNET_FAIL_AT="oops"
    (a 29-line traceback once) or a valid "2:1" runs as without them."""
    cmd = [sys.executable, "-m", "dpnet.run", "--n-samples", "200", "--quiet", "--machines", "3"]
    for value in ("oops", "2:1"):
        out = tmp_path / f"{value.replace(':', '-')}.json"
        env = {**os.environ, "DPNET_FAIL_AT": value, "DPNET_STALL_AT": value}
        done = subprocess.run(
            [*cmd, "--output", str(out)], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert out.exists()


@pytest.mark.parametrize("backend", ["threads", "simulated"])
def test_a_closed_stdout_ends_the_output_not_the_job(tmp_path, backend):
    """``python -m dpnet.run | head -2``: a reader that goes away before the summary ended the
    job with "rank 0 failed: BrokenPipeError" (exit 1) on the threads backend, "the simulated
    machines failed" on the simulator (issue 45, item 8). Now the output ends quietly: exit 0,
    nothing on stderr, the results file written (the pipe is closed before the job writes)."""
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "dpnet.run", "--n-samples", "200", "--machines", "3"]
    cmd += ["--backend", backend, "--progress-every", "0", "--output", str(out)]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert job.stdout is not None and job.stderr is not None
    job.stdout.close()
    err = job.stderr.read()
    assert job.wait(timeout=120) == 0, err
    assert err == "" and out.exists()


@pytest.mark.parametrize(
    ("args", "code", "written"),
    [(["--machines", "3"], 0, True), (["--epsilon", "0"], 2, False)],
)
def test_a_closed_stderr_keeps_the_exit_code_and_the_files(tmp_path, args, code, written):
    """``python -m dpnet.run 2>&1 | head -1``: a progress line meeting the closed pipe stopped
    the job and its failure line met the pipe too, so dpnet.run's entry ended it with exit 0
    and no results file; a bad option's line likewise gave exit 0 instead of 2. Now every
    write to the closed pipe goes to /dev/null: the job's own code, its files written."""
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "dpnet.run", "--n-samples", "200", "--output", str(out), *args]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert job.stdout is not None
    job.stdout.close()
    assert job.wait(timeout=120) == code
    assert out.exists() is written
