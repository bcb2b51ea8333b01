"""Time to the optimum: the decentralized ADMM (MPI, one rank per machine) against skglm's
centralized GroupProxNewton on the same training rows, side by side in one run.

    nice -n 10 python benchmarks/speed_vs_skglm.py            # paper 3, Table 1: n = 1e4, p = 48
    python benchmarks/speed_vs_skglm.py --runs 1:complete 5:paper5 10:complete --repeats 3
    python benchmarks/speed_vs_skglm.py --runs 1:complete:majorized:5 5:paper5:majorized:5

A run is J:graph[:theta solver[:iterations per round]] (default the exact Newton step).

For every (J, graph): ``mpiexec -n J python -m dpnet.run`` (BLAS pools of 1 thread), history of
the network objective every round; "rounds to gap" = first round from which the relative gap
|F_t - F*| / F* stays <= --gap; the slowest machine's compute time to the gap = rounds to gap x
its compute seconds per round (what a machine with its own core would spend; the waiting of J
ranks on 2 cores is booked as communication and left out). skglm (one thread, after a warm-up
call that compiles its numba kernels): the time of the loosest solver tolerance in
SKGLM_TOLS whose solution is within --gap of F*, and the time at tol 1e-12 (F* itself).
Timings are medians of --repeats. Writes benchmarks/out/speed_vs_skglm.csv.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from typing import Any

import numpy as np
from common import OUT_DIR, rounds_to_gap, run_job, thread_env, write_csv

from dpnet.config import parse_config
from dpnet.setup import prepare_problem

SKGLM_TOLS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-8, 1e-12)


def skglm_times(X: np.ndarray, y: np.ndarray, groups: np.ndarray, lam: float, repeats: int):
    """{tol: (median seconds, objective)} of GroupProxNewton on (X, y) as in tests/reference.py."""
    from reference import group_logistic_objective, skglm_problem
    from skglm.solvers import GroupProxNewton

    X_aug, datafit, penalty = skglm_problem(X, groups, lam)

    def solve(tol: float) -> np.ndarray:
        solver = GroupProxNewton(tol=tol, max_iter=200, fit_intercept=False)
        return solver.solve(X_aug, y, datafit, penalty)[0]

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solve(1e-4)  # numba compilation
        for tol in SKGLM_TOLS:
            seconds = []
            for _ in range(repeats):
                start = time.perf_counter()
                theta = solve(tol)
                seconds.append(time.perf_counter() - start)
            out[tol] = (
                float(np.median(seconds)),
                group_logistic_objective(X, y, groups, lam, theta),
            )
    return out


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
    for var, value in thread_env(1).items():
        os.environ[var] = value  # skglm in this process: one BLAS thread, like every rank
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
    ]
    config = parse_config(argv)
    train = prepare_problem(config, 1).shards[0]
    sk = skglm_times(train.X, train.y_raw, train.group_labels, config.lam, args.repeats)
    f_star = sk[SKGLM_TOLS[-1]][1]
    sk_gap = next(t for t in SKGLM_TOLS if abs(sk[t][1] - f_star) <= args.gap * abs(f_star))
    print(
        f"skglm: {sk[sk_gap][0] * 1e3:.1f} ms to a {args.gap:g} gap (tol {sk_gap:g}), "
        f"{sk[SKGLM_TOLS[-1]][0] * 1e3:.1f} ms at tol 1e-12; F* = {f_star:.12f}",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    for spec in args.runs:
        n_mach, topology, *solver = spec.split(":")
        extra = ["--topology", topology]
        if solver:
            extra += ["--theta-solver", solver[0]]
        if len(solver) > 1:
            extra += ["--beta-steps", solver[1]]
        reports = [
            run_job(argv + extra, ranks=int(n_mach), timeout=args.timeout)
            for _ in range(args.repeats)
        ]
        report = reports[0]
        to_gap = rounds_to_gap(report["history"], f_star, args.gap)
        per_round = float(
            np.median(
                [max(m["compute_seconds"] for m in r["machines"]) / r["rounds"] for r in reports]
            )
        )
        compute = np.nan if to_gap is None else to_gap * per_round
        rows.append(
            {
                "J": int(n_mach),
                "topology": topology,
                "theta_solver": ":".join(solver) or "newton",
                "n": args.n_samples,
                "p": 3 * args.n_groups,
                "rounds_to_gap": to_gap,
                "rounds_to_stop": report["rounds"],
                "max_machine_compute_ms_per_round": per_round * 1e3,
                "max_machine_compute_to_gap_s": compute,
                "skglm_to_gap_s": sk[sk_gap][0],
                "skglm_tol_at_gap": sk_gap,
                "skglm_tol_1e-12_s": sk[SKGLM_TOLS[-1]][0],
                "ratio_to_skglm_gap": compute / sk[sk_gap][0],
                "ratio_to_skglm_1e-12": compute / sk[SKGLM_TOLS[-1]][0],
                "repeats": args.repeats,
            }
        )
        r = rows[-1]
        print(
            f"J = {n_mach:>3} {topology:9s} {r['theta_solver']:12s}: "
            f"{to_gap} rounds to {args.gap:g} x "
            f"{per_round * 1e3:.2f} ms (slowest machine) = {compute:.3f} s; "
            f"ratio {r['ratio_to_skglm_gap']:.2f} (skglm at the gap), "
            f"{r['ratio_to_skglm_1e-12']:.2f} (skglm at 1e-12)",
            flush=True,
        )
        write_csv(rows, OUT_DIR / f"{args.output}.csv")


if __name__ == "__main__":
    main()
