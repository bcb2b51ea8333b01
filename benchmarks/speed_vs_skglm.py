"""Time to the optimum: the decentralized ADMM (MPI, one rank per machine) against skglm's
centralized GroupProxNewton on the same training rows, side by side in one run.

    nice -n 10 python -m benchmarks.speed_vs_skglm            # paper 3, Table 1: n = 1e4, p = 48
    python -m benchmarks.speed_vs_skglm --runs 1:complete 5:paper5 10:complete --repeats 3
    python -m benchmarks.speed_vs_skglm --runs 1:complete:majorized:5 5:paper5:majorized:5
    python -m benchmarks.speed_vs_skglm --runs 1:complete:newton:0 1:complete   # rtol 0 vs default

A run is J:graph[:theta solver[:value]] (default the Newton step with the default
--theta-rtol); the value is --theta-rtol for newton (0: every step to 1e-12), --beta-steps
(iterations per round) for majorized and gradient.

For every (J, graph): ``mpiexec -n J python -m dpnet.run`` (BLAS pools of 1 thread), history of
the network objective every round; "rounds to gap" = first round from which the relative gap
|F_t - F*| / F* stays <= --gap; the slowest machine's compute time to the gap = rounds to gap x
its compute seconds per round. The headline ratio is CPU to CPU: a rank's CPU time outside
communication calls is what a machine with a core of its own would spend, while its wall time
on this 2-core host also holds the time it waited for a core behind the other J - 1 ranks; the
wall-clock ratio is reported beside it. skglm (one thread, after a warm-up call that compiles
its numba kernels): the time of the loosest solver tolerance in SKGLM_TOLS whose solution is
within --gap of F*, and the time at tol 1e-12 (F* itself).
Timings are medians of --repeats. Writes benchmarks/out/speed_vs_skglm.csv.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks.common import OUT_DIR, rounds_to_gap, run_job, write_csv
from dpnet.cli import parse_config, prepare_problem

SKGLM_TOLS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-8, 1e-12)


def skglm_solver(
    X: np.ndarray, y: np.ndarray, groups: np.ndarray, lam: float
) -> Callable[[float], np.ndarray]:
    """GroupProxNewton on (X, y) as in devtools/reference.py, as a function of its tolerance:
    the problem (X with its intercept column) built once, outside any timed solve, and the
    solver compiled by a first solve."""
    from skglm.solvers import GroupProxNewton

    from devtools.reference import skglm_problem

    X_aug, datafit, penalty = skglm_problem(X, groups, lam)

    def solve(tol: float) -> np.ndarray:
        solver = GroupProxNewton(tol=tol, max_iter=200, fit_intercept=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return solver.solve(X_aug, y, datafit, penalty)[0]

    solve(1e-4)  # numba compilation
    return solve


def skglm_times(
    X: np.ndarray, y: np.ndarray, groups: np.ndarray, lam: float, repeats: int
) -> dict[float, tuple[float, float, float]]:
    """{tol: (median wall seconds, median CPU seconds, objective)} of :func:`skglm_solver` at
    every tolerance of SKGLM_TOLS, with one BLAS thread (like every rank)."""
    from devtools.reference import group_logistic_objective

    out = {}
    with threadpool_limits(limits=1):
        solve = skglm_solver(X, y, groups, lam)
        for tol in SKGLM_TOLS:
            wall, cpu = [], []
            for _ in range(repeats):
                start, cpu_start = time.perf_counter(), time.process_time()
                theta = solve(tol)
                wall.append(time.perf_counter() - start)
                cpu.append(time.process_time() - cpu_start)
            out[tol] = (
                float(np.median(wall)),
                float(np.median(cpu)),
                group_logistic_objective(X, y, groups, lam, theta),
            )
    return out


def skglm_to_gap(
    X: np.ndarray, y: np.ndarray, groups: np.ndarray, lam: float, gap: float, repeats: int
) -> dict[str, float]:
    """skglm's time to the relative gap ``gap``, the one way every benchmark times it: the
    loosest tolerance of SKGLM_TOLS whose objective is within ``gap`` of F* (the objective at
    the tightest, 1e-12), and its median wall and CPU seconds (:func:`skglm_times`); also F*
    and the wall and CPU seconds at 1e-12."""
    times = skglm_times(X, y, groups, lam, repeats)
    f_star = times[SKGLM_TOLS[-1]][2]
    tol = next(t for t in SKGLM_TOLS if abs(times[t][2] - f_star) <= gap * abs(f_star))
    return {
        "tol": tol,
        "wall_s": times[tol][0],
        "cpu_s": times[tol][1],
        "f_star": f_star,
        "wall_tightest_s": times[SKGLM_TOLS[-1]][0],
        "cpu_tightest_s": times[SKGLM_TOLS[-1]][1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=10_000)
    parser.add_argument("--n-groups", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gap", type=float, default=1e-6)
    parser.add_argument("--runs", nargs="+", default=["1:complete", "5:paper5"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--output", default="speed_vs_skglm")
    args = parser.parse_args()
    argv = [
        "--n-samples",
        str(args.n_samples),
        "--n-groups",
        str(args.n_groups),
        "--n-test",
        "0",
        "--seed",
        str(args.seed),
        "--tol",
        "1e-10",
        "--progress-every",
        "1",
        "--epsilon",
        "inf",  # the non-private optimum, as skglm's (default: epsilon 1)
    ]
    config = parse_config(argv)
    train = prepare_problem(config, 1).shards[0]
    sk = skglm_to_gap(train.X, train.y_raw, train.group_labels, config.lam, args.gap, args.repeats)
    f_star, sk_wall, sk_cpu = sk["f_star"], sk["wall_s"], sk["cpu_s"]
    print(
        f"skglm: {sk_cpu * 1e3:.1f} ms CPU ({sk_wall * 1e3:.1f} ms wall) to a {args.gap:g} gap "
        f"(tol {sk['tol']:g}), {sk['cpu_tightest_s'] * 1e3:.1f} ms CPU at tol 1e-12; "
        f"F* = {f_star:.12f}",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    for spec in args.runs:
        n_mach, topology, *solver = spec.split(":")
        extra = ["--topology", topology]
        if solver:
            extra += ["--theta-solver", solver[0]]
        if len(solver) > 1:
            extra += ["--theta-rtol" if solver[0] == "newton" else "--beta-steps", solver[1]]
        reports = [
            run_job(argv + extra, ranks=int(n_mach), timeout=args.timeout)
            for _ in range(args.repeats)
        ]
        report = reports[0]
        to_gap = rounds_to_gap(report["history"], f_star, args.gap)

        cpu_round, wall_round = (
            float(np.median([max(m[key] for m in r["machines"]) / r["rounds"] for r in reports]))
            for key in ("compute_cpu_seconds", "compute_seconds")
        )
        split = {  # mean machine's CPU per round in each step (dpnet's timing block)
            step: float(
                np.median([r["timing"]["cpu_seconds_per_round_by_step"][step] for r in reports])
            )
            for step in reports[0]["timing"]["cpu_seconds_per_round_by_step"]
        }
        cpu = np.nan if to_gap is None else to_gap * cpu_round
        wall = np.nan if to_gap is None else to_gap * wall_round
        rows.append(
            {
                "J": int(n_mach),
                "topology": topology,
                "theta_solver": ":".join(solver) or "newton",
                "n": args.n_samples,
                "p": 3 * args.n_groups,
                "rounds_to_gap": to_gap,
                "rounds_to_stop": report["rounds"],
                "max_machine_cpu_ms_per_round": cpu_round * 1e3,
                "max_machine_wall_ms_per_round": wall_round * 1e3,
                **{f"mean_machine_{k}_cpu_ms_per_round": v * 1e3 for k, v in split.items()},
                "max_machine_cpu_to_gap_s": cpu,
                "max_machine_wall_to_gap_s": wall,
                "skglm_cpu_to_gap_s": sk_cpu,
                "skglm_wall_to_gap_s": sk_wall,
                "skglm_tol_at_gap": sk["tol"],
                "skglm_cpu_tol_1e-12_s": sk["cpu_tightest_s"],
                "ratio_cpu": cpu / sk_cpu,
                "ratio_wall": wall / sk_wall,
                "ratio_cpu_to_skglm_1e-12": cpu / sk["cpu_tightest_s"],
                "repeats": args.repeats,
            }
        )
        r = rows[-1]
        print(
            f"J = {n_mach:>3} {topology:9s} {r['theta_solver']:12s}: "
            f"{to_gap} rounds to {args.gap:g} x {cpu_round * 1e3:.2f} ms CPU "
            f"({wall_round * 1e3:.2f} ms wall) per round (slowest machine) = {cpu:.3f} s CPU; "
            f"ratio to skglm {r['ratio_cpu']:.2f} CPU, {r['ratio_wall']:.2f} wall "
            f"({r['ratio_cpu_to_skglm_1e-12']:.2f} to skglm at 1e-12)\n"
            "          mean machine's CPU ms per round: "
            + ", ".join(f"{k.replace('_', ' ')} {v * 1e3:.3f}" for k, v in split.items()),
            flush=True,
        )
        write_csv(rows, OUT_DIR / f"{args.output}.csv")


if __name__ == "__main__":
    main()
