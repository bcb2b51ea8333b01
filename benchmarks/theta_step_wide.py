"""The theta step on wide data (p >> n_j): the block Newton step with its Woodbury system vs
the paper's gradient steps, side by side in one run, and the whole job at p = 5,000.

    nice -n 10 python -m benchmarks.theta_step_wide            # a few minutes on 2 cores
    nice -n 10 python -m benchmarks.theta_step_wide --p 500 --job-p 500   # quick

Data: n = 100 rows, X ~ N(0, 1), groups of 5 columns, two active groups, y ~ Bernoulli(sigma);
J = 5 machines (paper5 graph, 20 rows each, so n_j = 20 < p + 1).

The Newton theta step (:class:`dpnet.decentralized.theta.NewtonThetaStep`, the compiled kernel
:mod:`dpnet.decentralized._newton`) chooses its system by the shard's shape alone, with no
option: a tall machine (n_j >= p + 1) keeps a dense Newton matrix and its inverse (a chord
method), a wide one solves the n_j x n_j Woodbury system in every iteration. So on these shards
the job always runs Woodbury. An earlier version of this benchmark also timed a "dense" column,
the tall-shard path forced onto the wide shards by marking every machine tall; the compiled
kernel decides tall inside itself (n_j >= dim), with no hook to force it short of changing
dpnet/, so that column is gone (docs/benchmarks.md and docs/algorithms.md quote its last
figures, measured with the numpy step before the kernel). For each p in P_GRID:

- theta step: the inputs of machine 0's theta step (centre, rho, last theta and tolerance) are
  recorded in rounds 1 (cold) and WARM_ROUND (warm) of an in-process run; each kind is timed
  on exactly those inputs from a fresh step (no Newton matrix kept from earlier rounds; BLAS
  single-threaded, as in in-process runs), with the work the kernel counted in that call
  (``NewtonThetaStep.counts``, :data:`dpnet.decentralized._newton.COUNTS`): its Newton steps
  (``newton_iterations``), the dense Newton matrices it formed (``dense_matrices``, 0 on wide
  shards) and its Woodbury solves (``woodbury_solves``);
- ADMM round: in-process runs of a fixed number of rounds (tol = 0), wall time / rounds.

Then ``python -m dpnet.run --data FILE --test-fraction 0 --machines 5 --backend threads``
(its Newton system by shape: Woodbury) on the p = 5,000 problem, timed to convergence, and its
objective gap to skglm's optimum; the same job with ``--theta-solver gradient`` for comparison.

Writes benchmarks/out/theta_step_wide.csv and theta_step_wide_job.csv and prints the tables.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks.common import OUT_DIR, reference_value, run_job, write_csv
from dpnet.decentralized import NewtonThetaStep, StackedShards, admm, steps
from dpnet.decentralized._newton import MATRICES, STEPS, WOODBURY
from dpnet.decentralized.theta import NO_ANCHORS, gradient_thetas
from dpnet.network import build_topology, run_in_process
from dpnet.penalties import groups_from_labels

N, J, GROUP_SIZE, LAM, SEED = 100, 5, 5, 0.1, 0
P_GRID = (500, 2000, 5000)
WARM_ROUND = 10
KINDS = ("woodbury", "gradient")
# rounds timed per ADMM run
ROUNDS = {500: 10, 2000: 3, 5000: 2}


def make_data(p: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, p))
    beta = np.zeros(p)
    beta[: 2 * GROUP_SIZE] = rng.standard_normal(2 * GROUP_SIZE)
    y = np.where(rng.random(N) < 1.0 / (1.0 + np.exp(-(X @ beta))), 1.0, -1.0)
    return X, y, np.arange(p) // GROUP_SIZE


def local_problems(
    X: np.ndarray, y: np.ndarray, groups: np.ndarray
) -> tuple[list[steps.LocalData], steps.GroupStructure]:
    ptr, idx = groups_from_labels(groups)
    structure = steps.GroupStructure(ptr, idx, np.full(len(ptr) - 1, LAM / (2 * J)))
    shards = [
        steps.LocalData(np.hstack([X[r], np.ones((len(r), 1))]), y[r], N)
        for r in np.array_split(np.arange(N), J)
    ]
    return shards, structure


def newton_system(n_rows: int, dim: int) -> str:
    """The Newton system the block's theta step uses on a shard of ``n_rows`` rows and ``dim``
    columns: dense where it keeps a matrix (:attr:`NewtonThetaStep.tall`, n_j >= dim), else
    Woodbury."""
    return "dense" if n_rows >= dim else "woodbury"


Recorded = tuple[StackedShards, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]
"""A theta step's inputs: machine 0's block of one, centre, rho, last theta, tolerance."""


def run_rounds(
    shards: list[steps.LocalData],
    structure: steps.GroupStructure,
    kind: str,
    rounds: int,
    record: list[Recorded] | None = None,
) -> float:
    """Wall seconds of ``rounds`` in-process ADMM rounds with the given theta step."""
    graph = build_topology("paper5", J)
    cfg = admm.ADMMConfig(
        lam=LAM,
        tol=0.0,
        max_rounds=rounds,
        theta_solver="gradient" if kind == "gradient" else "newton",
    )
    original = NewtonThetaStep.__call__

    def recording(
        self: NewtonThetaStep,
        center: np.ndarray,
        rho: np.ndarray,
        theta_prev: np.ndarray,
        **kwargs: Any,
    ) -> Any:
        if record is not None and np.shares_memory(self.data.X, shards[0].X_aug):
            record.append((self.data, center.copy(), rho.copy(), theta_prev.copy(), kwargs))
        return original(self, center, rho, theta_prev, **kwargs)

    NewtonThetaStep.__call__ = recording  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        run_in_process(
            graph,
            lambda comm: admm.run_machine(comm, shards[comm.rank], structure, cfg, graph),
            peer_timeout=3600,
        )
        return time.perf_counter() - start
    finally:
        NewtonThetaStep.__call__ = original  # type: ignore[method-assign]


def time_theta_step(kind: str, args: Recorded, repeats: int) -> tuple[float, np.ndarray | None]:
    """Median seconds of one theta step on recorded inputs (a fresh step: no kept matrix)
    and, for the Newton step, machine 0's kernel counts of that call (by ``_newton.COUNTS``)."""
    data, center, rho, theta_prev, tolerance = args
    times, counts = [], None
    with threadpool_limits(1):
        for _ in range(repeats):
            cfg = admm.ADMMConfig(lam=LAM)
            if kind == "gradient":
                start = time.perf_counter()
                gradient_thetas(
                    data,
                    center,
                    rho,
                    theta_prev,
                    n_steps=cfg.beta_steps,
                    step_size=cfg.beta_step_size,
                )
                times.append(time.perf_counter() - start)
                continue
            step = NewtonThetaStep(data, theta_prev, NO_ANCHORS, NO_ANCHORS)
            before = step.counts[0].copy()  # the start point's evaluation
            start = time.perf_counter()
            step(center, rho, theta_prev, **tolerance)
            times.append(time.perf_counter() - start)
            counts = step.counts[0] - before
    return float(np.median(times)), counts


def step_and_round_rows(p: int) -> list[dict[str, Any]]:
    X, y, groups = make_data(p)
    shards, structure = local_problems(X, y, groups)
    record: list[Recorded] = []
    run_rounds(shards, structure, "woodbury", WARM_ROUND, record)
    inputs = {"cold (round 1)": record[0], f"warm (round {WARM_ROUND})": record[-1]}
    rows = []
    for label, args in inputs.items():
        for kind in KINDS:
            seconds, counts = time_theta_step(kind, args, 5)
            rows.append(
                {
                    "p": p,
                    "n": N,
                    "J": J,
                    "n_j": int(args[0].rows[0]),
                    "what": "theta step",
                    "when": label,
                    "kind": kind,
                    "seconds": seconds,
                    "newton_iterations": None if counts is None else int(counts[STEPS]),
                    "dense_matrices": None if counts is None else int(counts[MATRICES]),
                    "woodbury_solves": None if counts is None else int(counts[WOODBURY]),
                }
            )
    rounds = ROUNDS[p]
    for kind in KINDS:
        seconds = float(np.median([run_rounds(shards, structure, kind, rounds) for _ in range(3)]))
        rows.append(
            {
                "p": p,
                "n": N,
                "J": J,
                "n_j": N // J,
                "what": "ADMM round",
                "when": f"rounds 1-{rounds}",
                "kind": kind,
                "seconds": seconds / rounds,
                "newton_iterations": None,
                "dense_matrices": None,
                "woodbury_solves": None,
            }
        )
    for row in rows:  # ratio to Woodbury on the same inputs / rounds
        ref = next(
            r
            for r in rows
            if r["what"] == row["what"] and r["when"] == row["when"] and r["kind"] == "woodbury"
        )
        row["ratio_to_woodbury"] = row["seconds"] / ref["seconds"]
    return rows


def job_rows(p: int, gradient_max_rounds: int) -> list[dict[str, Any]]:
    X, y, groups = make_data(p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f_star = reference_value(X, y, groups, LAM)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wide.npz"
        np.savez(path, X=X, y=y, groups=groups)
        for solver, max_rounds in (("newton", 3000), ("gradient", gradient_max_rounds)):
            argv = [
                "--data",
                str(path),
                "--test-fraction",
                "0",
                "--machines",
                str(J),
                "--backend",
                "threads",
                "--lam",
                str(LAM),
                "--seed",
                "1",
                "--theta-solver",
                solver,
                "--max-rounds",
                str(max_rounds),
                "--epsilon",
                "inf",  # the non-private optimum (default: epsilon 1)
            ]
            report = run_job(argv, ranks=None, timeout=1800)
            f = report["objective"]["on_randomized_labels"]
            rows.append(
                {
                    "p": p,
                    "n": N,
                    "J": J,
                    "theta_solver": solver,
                    "newton_system": newton_system(N // J, p + 1) if solver == "newton" else None,
                    "rounds": report["rounds"],
                    "stop_reason": report["stop_reason"],
                    "job_wall_s": report["timing"]["wall_seconds"],
                    "launch_wall_s": report["launch_seconds"],
                    "ms_per_round": 1e3 * report["timing"]["seconds_per_round"],
                    "objective": f,
                    "rel_gap_to_skglm": (f - f_star) / abs(f_star),
                    "selected_groups": len(report["selected_groups"]),
                    "command": report["command"],
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--p", type=int, nargs="+", default=list(P_GRID))
    parser.add_argument("--job-p", type=int, default=5000)
    parser.add_argument("--gradient-max-rounds", type=int, default=3000)
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    for p in args.p:
        ROUNDS.setdefault(p, 2)
        rows += step_and_round_rows(p)
        write_csv(rows, OUT_DIR / "theta_step_wide.csv")
    print(
        f"{'p':>5} {'what':<11} {'when':<17} {'kind':<9} {'ms':>11} {'Newton it':>9} "
        f"{'matrices':>8} {'Woodbury':>8} {'/ woodbury':>10}"
    )
    for r in rows:
        it, formed, solves = (
            "" if r[key] is None else str(r[key])
            for key in ("newton_iterations", "dense_matrices", "woodbury_solves")
        )
        print(
            f"{r['p']:>5} {r['what']:<11} {r['when']:<17} {r['kind']:<9} "
            f"{1e3 * r['seconds']:>11.3f} {it:>9} {formed:>8} {solves:>8} "
            f"{r['ratio_to_woodbury']:>10.1f}"
        )

    jobs = job_rows(args.job_p, args.gradient_max_rounds)
    write_csv(jobs, OUT_DIR / "theta_step_wide_job.csv")
    for r in jobs:
        print(
            f"job p = {r['p']}, n = {r['n']}, J = {r['J']}, theta solver {r['theta_solver']}"
            f" ({r['newton_system'] or 'U = 10, alpha = 0.4'}): {r['rounds']} rounds, stop "
            f"{r['stop_reason']}, job {r['job_wall_s']:.2f} s (launch {r['launch_wall_s']:.2f}"
            f" s), {r['ms_per_round']:.2f} ms/round, gap to skglm {r['rel_gap_to_skglm']:.2e},"
            f" {r['selected_groups']} groups"
        )


if __name__ == "__main__":
    main()
