"""The simulated backend at scale, from the command line a user types.

    nice -n 10 python -m benchmarks.simulated_scale                   # J = 1,000, 3,000, 10,000
    python -m benchmarks.simulated_scale --machines 1000 --max-rounds 3000

For every J: ``python -m dpnet.run --backend simulated --machines J --topology random-regular
--n-samples 100J --seed 1 --max-rounds R`` (defaults otherwise: p = 48 in 16 groups, lambda 0.1,
no privacy, so the rows are the ones skglm sees) in a process of its own, timed from outside
(wall, peak resident memory from wait4). skglm's centralized optimum F* on the same rows
(rebuilt from the seed by dpnet.cli.setup.prepare_problem: the job's own data) gives the round from
which the network objective stays within a relative 1e-6 of F*; seconds to that gap =
start-up + that many rounds at the run's seconds per round. Writes
benchmarks/out/simulated_scale.csv (one row per J) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks.common import OUT_DIR, reference_value, rounds_to_gap, thread_env, write_csv
from dpnet.cli import parse_config, prepare_problem

GAP = 1e-6
ROWS_PER_MACHINE = 100
MACHINES = (1000, 3000, 10000)
SEED = 1


def launch(argv: list[str], timeout: float) -> tuple[dict[str, Any], float, float]:
    """(results file, wall seconds, peak resident MB) of ``python -m dpnet.run argv``."""
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "r.json", Path(tmp) / "stderr"
        cmd = [sys.executable, "-m", "dpnet.run", *argv, "--output", str(out), "--quiet"]
        start = time.perf_counter()
        with err.open("w") as stderr:
            proc = subprocess.Popen(
                cmd,
                env=thread_env(2),  # one process on 2 cores: BLAS may use both
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
            killer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL))
            killer.start()
            _, status, usage = os.wait4(proc.pid, 0)
            killer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
        wall = time.perf_counter() - start
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(
                f"exit {proc.returncode}: {' '.join(cmd)}\n{err.read_text()[-2000:]}"
            )
        return json.loads(out.read_text()), wall, usage.ru_maxrss / 1024  # KB on Linux


def one_j(n_machines: int, max_rounds: int, timeout: float) -> dict[str, Any]:
    argv = ["--backend", "simulated", "--machines", str(n_machines), "--epsilon", "inf"]
    argv += ["--topology", "random-regular", "--n-samples", str(ROWS_PER_MACHINE * n_machines)]
    argv += ["--seed", str(SEED), "--max-rounds", str(max_rounds)]
    report, wall, peak_mb = launch(argv, timeout)
    setup = prepare_problem(parse_config(argv), n_machines)  # the job's rows, from its seed
    assert setup.shards is not None
    import numpy as np

    X = np.vstack([s.X for s in setup.shards])
    y = np.concatenate([s.y_raw for s in setup.shards])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f_star = reference_value(X, y, setup.public.group_labels, report["config"]["lam"])
    timing = report["timing"]
    rounds_wall = timing["seconds_per_round"] * n_machines  # per-machine share x J
    gap_round = rounds_to_gap(report["history"], f_star, GAP)
    return {
        "machines": n_machines,
        "rows_per_machine": ROWS_PER_MACHINE,
        "p": X.shape[1],
        "topology": "random-regular",
        "diameter": report["topology"]["diameter"],
        "algebraic_connectivity": report["topology"]["algebraic_connectivity"],
        "rounds_to_1e-6_gap": gap_round,
        "seconds_to_1e-6_gap": None
        if gap_round is None
        else timing["startup_seconds"] + gap_round * rounds_wall,
        "rounds": report["rounds"],
        "stop_reason": report["stop_reason"],
        "seconds_per_round": rounds_wall,
        "startup_seconds": timing["startup_seconds"],
        "process_seconds": wall,
        "peak_rss_mb": peak_mb,
        "bytes_per_machine_round": float(
            np.mean([m["bytes_per_round"] for m in report["machines"]])
        ),
        "command": "python -m dpnet.run " + " ".join(argv),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, nargs="+", default=list(MACHINES))
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=300,
        help="per run (the 1e-6 gap comes near round 75-130; the default stop rule, "
        "tol 1e-9, takes thousands at these sizes)",
    )
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()
    rows = []
    for n_machines in args.machines:
        rows.append(one_j(n_machines, args.max_rounds, args.timeout))
        print(json.dumps(rows[-1]), flush=True)
        write_csv(rows, OUT_DIR / "simulated_scale.csv")  # after every run: partial results
    print(f"wrote {OUT_DIR / 'simulated_scale.csv'}")


if __name__ == "__main__":
    main()
