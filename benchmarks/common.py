"""Shared helpers of the main-job benchmarks: launching ``python -m dpnet.run``, the skglm
reference optimum F*, relative objective gaps, CSV output.

Imported as ``common`` by the scripts in this folder (``python benchmarks/<script>.py``).
"""

from __future__ import annotations

import csv
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "benchmarks" / "out"
sys.path.insert(0, str(REPO / "tests"))
from reference import group_logistic_objective, group_logistic_optimum  # noqa: E402

DATA_DIR = Path(os.environ.get("DPNET_DATA_DIR", REPO.parent / "shared" / "data"))
MEMSET_PATH = DATA_DIR / "memset" / "memset_donor_7mer.csv.gz"
EPS_GRID = (0.1, 0.3, 0.5, 0.7, 0.9, 1.1, 1.3, 1.5, 1.7, 1.9)


def thread_env(threads: int = 1) -> dict[str, str]:
    """The environment for launched jobs with BLAS/OpenMP pools limited to ``threads`` each:
    J ranks on 2 cores must not each start their own spinning OpenBLAS pool."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


def run_job(
    argv: list[str], *, ranks: int | None, timeout: float, threads: int = 1
) -> dict[str, Any]:
    """Run ``python -m dpnet.run argv`` (under ``mpiexec -n ranks`` unless ``ranks`` is None)
    in its own process group; kill the whole group after ``timeout`` seconds.

    Returns the results JSON plus ``launch_seconds`` (wall time of the whole launch, startup
    included) and ``child_cpu_seconds`` (user + sys CPU time of every process of the launch).
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "dpnet.run", *argv, "--output", str(out), "--quiet"]
        if ranks is not None:
            mpiexec = Path(sys.executable).with_name("mpiexec")
            cmd = [str(mpiexec), "-n", str(ranks), *cmd, "--backend", "mpi"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            env=thread_env(threads),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise TimeoutError(f"timed out after {timeout:.0f} s: {' '.join(cmd)}") from None
        launch = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(f"exit code {proc.returncode}: {' '.join(cmd)}\n{err[-2000:]}")
        report = json.loads(out.read_text())
    report["launch_seconds"] = launch
    report["child_cpu_seconds"] = (
        after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    )
    report["command"] = (
        " ".join(["mpiexec", "-n", str(ranks)] if ranks else [])
        + " python -m dpnet.run "
        + " ".join(argv)
    )
    return report


def reference_value(X: np.ndarray, y: np.ndarray, groups: np.ndarray, lam: float) -> float:
    """F* = F(theta*) with theta* from skglm's GroupProxNewton (tests/reference.py)."""
    theta = group_logistic_optimum(X, y, groups, lam)
    return group_logistic_objective(X, y, groups, lam, theta)


def relative_gaps(history: list[dict[str, Any]], f_star: float) -> tuple[np.ndarray, np.ndarray]:
    """Rounds and |F_t - F*| / |F*| of a results file's history."""
    rounds = np.array([h["round"] for h in history], dtype=int)
    values = np.array([h["objective"] for h in history], dtype=float)
    return rounds, np.abs(values - f_star) / abs(f_star)


def rounds_to_gap(history: list[dict[str, Any]], f_star: float, rel: float) -> int | None:
    """First round from which the relative gap stays <= ``rel`` for the rest of the history
    (None if it never does)."""
    rounds, gaps = relative_gaps(history, f_star)
    above = np.flatnonzero(gaps > rel)
    if len(rounds) == 0 or (len(above) and above[-1] == len(rounds) - 1):
        return None
    return int(rounds[above[-1] + 1]) if len(above) else int(rounds[0])


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
