"""Shared helpers of the main-job benchmarks: launching ``python -m dpnet.run``, the skglm
reference optimum F*, relative objective gaps, CSV output.

Imported as ``benchmarks.common`` by the scripts of this package, which run from the repository
root as ``python -m benchmarks.<script>``.
"""

from __future__ import annotations

import csv
import json
import os
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from devtools.convergence import (  # noqa: F401 - the gaps to F*, shared with the tests
    STOP_GAP,
    batched_gaps,
    batched_to_optimum,
    first_round_within,
    reference_value,
    relative_gaps,
    rounds_to_gap,
)

# shared with the tests (devtools/), imported here by the scripts: the report locations
from devtools.results import DATA_DIR, DOCS_DIR, OUT_DIR, REPO, report_path  # noqa: F401

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


def timed_together(fits: dict[str, Callable[[], Any]], repeats: int) -> dict[str, dict]:
    """Every fit once per repeat, in turn (a change of the machine's load lands on all of them,
    not on one method's block of repeats): per fit its median time, its median ratio to the
    first fit's time in the same repeat, every time and every output."""
    times: dict[str, list[float]] = {name: [] for name in fits}
    outs: dict[str, list[Any]] = {name: [] for name in fits}
    for _ in range(repeats):
        for name, fit in fits.items():
            start = time.perf_counter()
            outs[name].append(fit())
            times[name].append(time.perf_counter() - start)
    first = times[next(iter(fits))]
    return {
        name: {
            "median_s": statistics.median(t),
            "ratio": statistics.median(a / b for a, b in zip(t, first, strict=True)),
            "times": t,
            "outputs": outs[name],
        }
        for name, t in times.items()
    }


def stacked_job(argv: list[str], n_machines: int) -> tuple[Any, Any, Any, Any]:
    """(stacked shards, groups, ADMM config, graph) of ``python -m dpnet.run ARGV`` with
    ``n_machines`` machines, as the simulated backend sets it up (labels randomized)."""
    from dpnet.cli import admm_config, parse_config, prepare_problem
    from dpnet.decentralized import StackedShards, local_problem, randomize_all
    from dpnet.network import build_topology, validate_topology

    config = parse_config(argv)
    graph = validate_topology(
        build_topology(config.topology, n_machines, seed=config.topology_seed), n_machines
    )
    setup = prepare_problem(config, n_machines)
    assert setup.shards is not None
    crossings = randomize_all(setup.shards, config.keep_probability, config.seed)
    problems = [
        local_problem(
            s,
            lam=config.lam,
            loss=config.loss,
            keep_prob=config.keep_probability,
            n_machines=n_machines,
        )
        for s, _ in crossings
    ]
    data = StackedShards.stack([p[0] for p in problems])
    return data, problems[0][1], admm_config(config, setup.shards[0].columns), graph


def dgemm_gflops(X: np.ndarray, repeats: int) -> float:
    """GFLOP/s of one dgemm X^T X (2 n d^2 flops, X^T a contiguous copy: a general product,
    not numpy's symmetric one), median CPU time of ``repeats``: the rate a round's counted
    flops are priced at."""
    X_t = np.ascontiguousarray(X.T)
    times = []
    for _ in range(repeats):
        start = time.process_time()
        X_t @ X
        times.append(time.process_time() - start)
    return 2.0 * X.shape[0] * X.shape[1] ** 2 / float(np.median(times)) / 1e9


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


# ---- one-command paper reports (benchmarks/paper1.py, paper2.py, paper3.py) ----------------


def shown_path(path: Path) -> str:
    """``path`` as a committed report shows it: relative to the repository root, or only its
    name when it lies outside (a report must not carry the paths of the machine it ran on)."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def report_command(module: str) -> str:
    """This run's command line as its report shows it: ``nice -n 10 python -m
    benchmarks.<module>`` and the arguments given, absolute paths among them made relative to
    the repository root (where the command runs)."""
    args = []
    for arg in sys.argv[1:]:
        name, eq, value = arg.rpartition("=") if arg.startswith("--") else ("", "", arg)
        if os.path.isabs(value):
            value = os.path.relpath(value, REPO)
        args.append(shlex.quote(name + eq + value))
    return " ".join(["nice -n 10 python -m", f"benchmarks.{module}", *args])


REPRODUCED, CONTRADICTED, NOT_TESTABLE = "reproduced", "contradicted", "not testable"


def add_data_dir_argument(parser: Any) -> None:
    """``--data-dir``: the folder holding adult/, memset/ (see the README.md in it)."""
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder with the real data sets (adult/, memset/); default: $DPNET_DATA_DIR, "
        "else ../shared/data next to the repository; parts needing absent data are skipped",
    )


def resolve_data_dir(given: Path | None) -> Path | None:
    """The data folder to use, or None (with a message saying so) when it does not exist."""
    path = given if given is not None else DATA_DIR
    if path.is_dir():
        return path.resolve()
    how = "--data-dir" if given is not None else "the default (pass --data-dir PATH)"
    print(f"data directory {path} not found ({how}): real-data parts are skipped", flush=True)
    return None


def add_update_docs_argument(parser: Any, page: str) -> None:
    """``--update-docs``: write the committed page docs/``page`` instead of its copy in the
    script's ``--out`` folder (see :func:`report_path`)."""
    parser.add_argument(
        "--update-docs",
        action="store_true",
        help=f"write the committed page docs/{page} (default: {page} in the --out folder, "
        "not committed); refused (exit 2) when a data set the page reports on is missing",
    )


def machine_description() -> str:
    """CPU model, core count, load average, Python / numpy versions, MPI launcher."""
    import platform

    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mpi = "no mpiexec"
    mpiexec = Path(sys.executable).with_name("mpiexec")
    if mpiexec.exists():
        try:
            out = subprocess.run(
                [str(mpiexec), "--version"], capture_output=True, text=True, timeout=20
            ).stdout
            version = next((ln.split()[-1] for ln in out.splitlines() if "Version" in ln), "?")
            mpi = f"mpiexec (Hydra) {version}"
        except (OSError, subprocess.SubprocessError):
            pass
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return (
        f"{cpu}, {os.cpu_count()} logical cores (shared with other jobs; load average "
        f"{load} at the start), {platform.system()} {platform.release()}, Python "
        f"{platform.python_version()}, numpy {np.__version__}, MPI: {mpi}"
    )


def git_commit() -> str:
    """The checked-out commit (read-only ``git rev-parse``), '+ local changes' if dirty."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return head + (" + uncommitted changes" if dirty else "")


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def claim(text: str, where: str, verdict: str, evidence: str) -> dict[str, str]:
    """One claim of a paper with its verdict (REPRODUCED, CONTRADICTED or NOT_TESTABLE)."""
    if verdict not in (REPRODUCED, CONTRADICTED, NOT_TESTABLE):
        raise ValueError(verdict)
    return {"claim": text, "where": where, "verdict": verdict, "evidence": evidence}


def verdict_of(ok: bool | None) -> str:
    """True -> reproduced, False -> contradicted, None -> not testable."""
    return NOT_TESTABLE if ok is None else (REPRODUCED if ok else CONTRADICTED)


def write_report(
    path: Path,
    *,
    title: str,
    header: str,
    command: str,
    wall_seconds: float,
    machine: str,
    claims: list[dict[str, str]],
    sections: list[tuple[str, str]],
) -> None:
    """Write a results document: header, run facts, claims with verdicts, then sections."""
    counts = {v: sum(c["verdict"] == v for c in claims) for v in (REPRODUCED, CONTRADICTED)}
    counts[NOT_TESTABLE] = len(claims) - sum(counts.values())
    parts = [
        f"# {title}",
        "",
        "<!-- generated by the command below; edit the script, not this file -->",
        "",
        header.strip(),
        "",
        f"- **Command:** `{command}`",
        f"- **Wall time:** {wall_seconds / 60:.1f} min ({wall_seconds:.0f} s)",
        f"- **Machine:** {machine}",
        f"- **Code:** commit {git_commit()}, run finished {time.strftime('%Y-%m-%d %H:%M %Z')}",
        "",
        "## Claims of the paper and verdicts",
        "",
        f"{counts[REPRODUCED]} reproduced, {counts[CONTRADICTED]} contradicted, "
        f"{counts[NOT_TESTABLE]} not testable. Each verdict is computed by the script from "
        "the numbers of this run with the rule given in the evidence column.",
        "",
        md_table(
            ["#", "claim (paper's wording, condensed)", "where", "verdict", "evidence (this run)"],
            [
                [i + 1, c["claim"], c["where"], f"**{c['verdict']}**", c["evidence"]]
                for i, c in enumerate(claims)
            ],
        ),
        "",
    ]
    for heading, body in sections:
        parts += [f"## {heading}", "", body.strip(), ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))
    print(f"wrote {path}")
