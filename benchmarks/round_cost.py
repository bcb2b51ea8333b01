"""What one round of the decentralized ADMM costs beside its local solve (issue 23's goal: a
round at 500 rows x 49 columns within 2x one Hessian-plus-solve of that shard).

    python -m benchmarks.round_cost                 # 500 and 10,000 rows of paper 3's data
    python -m benchmarks.round_cost --rows 500 2000 --repeats 9

One machine (J = 1, in this process, one BLAS thread) runs the default ADMM to convergence on
the first n rows of paper 3's Table 1 data (model III, p = 48, seed 1); its CPU time per round
(median over --repeats runs), split by step (``timing.cpu_seconds_per_round_by_step``), is set
against the median CPU time of one Hessian-plus-solve of the same rows: X~^T D X~ formed as a
symmetric product of the scaled rows (D a diagonal of logistic weights; BLAS dsyrk) plus c I,
and solved by Cholesky (LAPACK dposv), the work of one classical Newton iteration.

And against its counted flops (issue 44's yardstick: a round within 2x of them): the theta
step's flops over the run, from its own counts (``devtools.flop_count``: products with X~,
Newton matrices, factors, solves; the Z step and the loss's elementwise work are not counted),
divided by the rounds and priced at this host's rate of one dgemm X~^T X of the shard
(``benchmarks.common.dgemm_gflops``). Writes benchmarks/out/round_cost.csv.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import networkx as nx
import numpy as np
from scipy.linalg.blas import dsyrk
from scipy.linalg.lapack import dposv
from threadpoolctl import threadpool_limits

from benchmarks.common import dgemm_gflops
from devtools.flop_count import block_flops, newton_steps
from dpnet.cli import parse_config, prepare_problem
from dpnet.decentralized import (
    ADMMConfig,
    MachineResult,
    cross_boundary,
    local_problem,
    run_machine,
)
from dpnet.network import run_in_process

OUT = Path(__file__).resolve().parent / "out" / "round_cost.csv"


def hessian_and_solve(X: np.ndarray, weights: np.ndarray, rho: float, grad: np.ndarray) -> None:
    """One Newton system of the shard: (X^T diag(weights) X + rho I) s = grad, H's upper
    triangle by one symmetric product (BLAS dsyrk, half a general product's flops) of S^T, a
    Fortran-ordered view of the row-major S = diag(sqrt(weights)) X."""
    scaled = X * np.sqrt(weights)[:, None]
    hess = dsyrk(1.0, scaled.T, lower=0)
    hess.flat[:: hess.shape[0] + 1] += rho
    dposv(hess, grad, overwrite_a=True)


def measure(n_rows: int, repeats: int) -> dict[str, float]:
    config = parse_config(
        ["--n-samples", str(n_rows), "--n-test", "0", "--seed", "1", "--epsilon", "inf"]
    )
    raw = prepare_problem(config, 1).shards[0]
    shard, _ = cross_boundary(raw, 1.0, np.random.default_rng(0), "machine 0")
    data, groups = local_problem(
        shard, lam=config.lam, loss="logistic", keep_prob=1.0, n_machines=1
    )
    graph = nx.empty_graph(1)

    def fit() -> MachineResult:
        return run_in_process(
            graph, lambda comm: run_machine(comm, data, groups, ADMMConfig(), graph)
        )[0]

    X = data.X_aug
    weights, grad = np.full(X.shape[0], 0.2 / n_rows), np.ones(X.shape[1])
    per_round, solves, splits, rates = [], [], [], []
    with newton_steps() as made:  # warms caches and imports too
        counted = fit()
    flops = sum(sum(machine.values()) for step in made for machine in block_flops(step))
    for _ in range(repeats):
        result = fit()
        per_round.append(result.compute_cpu_seconds / result.rounds)
        assert result.step_cpu_seconds is not None
        splits.append({k: v / result.rounds for k, v in result.step_cpu_seconds.items()})
        start, count = time.process_time(), max(20, 200_000 // n_rows)
        for _ in range(count):
            hessian_and_solve(X, weights, 0.1, grad)
        solves.append((time.process_time() - start) / count)
        rates.append(dgemm_gflops(X, max(5, 200_000 // n_rows)))
    row = {
        "rows": n_rows,
        "columns": X.shape[1],
        "rounds": result.rounds,
        "cpu_ms_per_round": float(np.median(per_round)) * 1e3,
        "hessian_and_solve_ms": float(np.median(solves)) * 1e3,
    }
    row["ratio"] = row["cpu_ms_per_round"] / row["hessian_and_solve_ms"]
    row["gflops"] = float(np.median(rates))
    row["flop_ms_per_round"] = flops / counted.rounds / (row["gflops"] * 1e9) * 1e3
    row["flop_ratio"] = row["cpu_ms_per_round"] / row["flop_ms_per_round"]
    for step in splits[0]:
        row[f"{step}_ms"] = float(np.median([s[step] for s in splits])) * 1e3
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[500, 10_000])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rows = []
    with threadpool_limits(limits=1):
        for n_rows in args.rows:
            row = measure(n_rows, args.repeats)
            rows.append(row)
            steps = ", ".join(
                f"{k.removesuffix('_ms').replace('_', ' ')} {v:.4f}"
                for k, v in row.items()
                if k.endswith("_ms") and k not in ("hessian_and_solve_ms", "flop_ms_per_round")
            )
            print(
                f"{n_rows} x {row['columns']}: {row['rounds']} rounds, "
                f"{row['cpu_ms_per_round']:.4f} ms CPU per round = {row['ratio']:.2f} x one "
                f"Hessian-plus-solve ({row['hessian_and_solve_ms']:.4f} ms) = "
                f"{row['flop_ratio']:.2f} x its counted flops at {row['gflops']:.1f} GFLOP/s "
                f"({row['flop_ms_per_round']:.4f} ms); ms per round: {steps}",
                flush=True,
            )
    OUT.parent.mkdir(exist_ok=True)
    with OUT.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
