"""Scaling of the decentralized group-lasso logistic ADMM with the number of machines J
(paper 3, Table 1 setting: synthetic model-III data, privacy off).

    nice -n 10 python -m benchmarks.scaling                 # n = 10^4, p = 48 (a few minutes)
    nice -n 10 python -m benchmarks.scaling --mode full     # + (10^4, 96) and (10^5, 48)

Every MPI run is ``mpiexec -n J python -m dpnet.run --backend mpi ...`` (one at a time, in
its own process group, killed at --timeout), with BLAS pools limited to --threads each.
J = 1: a single node; J = 5: the paper's graph (paper5); J = 10, 20: complete graph (paper)
and ring. A few in-process runs (all machines as threads of one process) for comparison.
Each configuration is launched --repeats times (timings: medians; rounds are deterministic).
Every run records the objective each round; the gap is |F_t - F*| / F* against skglm's
optimum F* on the same training data (devtools/reference.py).

Writes benchmarks/out/scaling_{mode}.csv and .png and prints the table.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    OUT_DIR,
    reference_value,
    relative_gaps,
    rounds_to_gap,
    run_job,
    write_csv,
)
from devtools.workloads import job_argv  # noqa: F401 - imported from here by the scripts
from dpnet.cli import parse_config, prepare_problem

GAP = 1e-4
MPI_RUNS = (
    (1, "complete"),
    (5, "paper5"),
    (10, "complete"),
    (10, "ring"),
    (20, "complete"),
    (20, "ring"),
)
INPROCESS_RUNS = ((5, "paper5"), (20, "complete"))
# columns that are medians over the repeated launches (rounds are deterministic given the seed)
TIMED = (
    "seconds_per_round",
    "compute_s_per_round",
    "comm_s_per_round",
    "max_machine_compute_s_per_round",
    "max_machine_cpu_s_per_round",
    "time_to_gap_s",
    "job_wall_s",
    "launch_wall_s",
    "cpu_s_all_processes",
)
# (n, n_groups): p = 3 * n_groups; the paper's three rows
SIZES = {"quick": ((10_000, 16),), "full": ((10_000, 16), (10_000, 32), (100_000, 16))}


def f_star(argv: list[str]) -> float:
    """skglm's optimum on exactly the training data the job generates from ``argv``."""
    config = parse_config(argv)
    train = prepare_problem(config, 1).shards[0]  # one machine: all training rows
    return reference_value(train.X, train.y_raw, train.group_labels, config.lam)


def summarise(report: dict[str, Any], fstar: float, n: int, p: int) -> dict[str, Any]:
    """One CSV row: convergence, timing and traffic of one run."""
    machines = report["machines"]
    rounds = report["rounds"]
    to_gap = rounds_to_gap(report["history"], fstar, GAP)
    spr = report["timing"]["seconds_per_round"]
    final_gap = relative_gaps(report["history"][-1:], fstar)[1][0]
    return {
        "n": n,
        "p": p,
        "backend": report["backend"],
        "J": report["n_machines"],
        "topology": report["topology"]["name"],
        "algebraic_connectivity": round(report["topology"]["algebraic_connectivity"], 4),
        "diameter": report["topology"]["diameter"],
        "rounds_to_gap": to_gap,
        "rounds_to_stop": rounds,
        "stop_reason": report["stop_reason"],
        "final_gap": f"{final_gap:.1e}",
        "test_accuracy": (report["test_accuracy"] or {}).get("estimate"),
        "seconds_per_round": spr,
        "compute_s_per_round": report["timing"]["compute_seconds_per_round"],
        "comm_s_per_round": report["timing"]["comm_seconds_per_round"],
        "max_machine_compute_s_per_round": max(m["compute_seconds"] for m in machines) / rounds,
        "max_machine_cpu_s_per_round": max(m["compute_cpu_seconds"] for m in machines) / rounds,
        "time_to_gap_s": math.nan if to_gap is None else to_gap * spr,
        "job_wall_s": report["timing"]["wall_seconds"],
        "launch_wall_s": report["launch_seconds"],
        "cpu_s_all_processes": report["child_cpu_seconds"],
        "bytes_per_machine_round": float(np.mean([m["bytes_sent"] for m in machines])) / rounds,
        "messages_per_machine_round": float(np.mean([m["messages_sent"] for m in machines]))
        / rounds,
        "rows_per_machine": int(np.mean([m["rows"] for m in machines])),
    }


def run(
    mode: str,
    seed: int,
    tol: float,
    max_rounds: int,
    timeout: float,
    threads: int,
    inprocess: bool,
    repeats: int,
) -> tuple[list[dict[str, Any]], dict[tuple, Any]]:
    rows, curves = [], {}
    for n, n_groups in SIZES[mode]:
        argv = job_argv(n, n_groups, seed, tol, max_rounds)
        fstar = f_star(argv)
        print(f"n = {n}, p = {3 * n_groups}: F* = {fstar:.10f} (skglm)", flush=True)
        plan = [(J, topo, J) for J, topo in MPI_RUNS]
        if inprocess:
            plan += [(J, topo, None) for J, topo in INPROCESS_RUNS]
        for J, topo, ranks in plan:
            extra = ["--topology", topo] + (
                [] if ranks else ["--backend", "threads", "--machines", str(J)]
            )
            try:
                reports = [
                    run_job(argv + extra, ranks=ranks, timeout=timeout, threads=threads)
                    for _ in range(repeats)
                ]
            except (TimeoutError, RuntimeError) as exc:
                print(f"  J = {J} {topo}: FAILED: {exc}", flush=True)
                rows.append(
                    {
                        "n": n,
                        "p": 3 * n_groups,
                        "J": J,
                        "topology": topo,
                        "backend": "mpi" if ranks else "threads",
                        "stop_reason": f"failed: {str(exc).splitlines()[0]}",
                    }
                )
                continue
            runs = [summarise(r, fstar, n, 3 * n_groups) for r in reports]
            row = {
                **runs[0],
                "repeats": repeats,
                **{k: float(np.median([r[k] for r in runs])) for k in TIMED},
            }
            rows.append(row)
            curves[(n, 3 * n_groups, row["backend"], J, topo)] = relative_gaps(
                reports[0]["history"], fstar
            )
            print(
                f"  {row['backend']:9s} J = {J:2d} {topo:8s}: {row['rounds_to_gap']} rounds "
                f"to gap {GAP:g}, {row['rounds_to_stop']} to stop; "
                f"{row['seconds_per_round'] * 1e3:.1f} ms/round "
                f"(compute {row['compute_s_per_round'] * 1e3:.1f}, "
                f"comm {row['comm_s_per_round'] * 1e3:.1f}); wall {row['job_wall_s']:.1f} s; "
                f"{row['bytes_per_machine_round'] / 1e3:.1f} kB, "
                f"{row['messages_per_machine_round']:.1f} msgs per machine-round",
                flush=True,
            )
    return rows, curves


def plot(rows: list[dict[str, Any]], curves: dict[tuple, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.get("rounds_to_stop") is not None and r["backend"] == "mpi"]
    sizes = sorted({(r["n"], r["p"]) for r in ok})
    fig, axes = plt.subplots(len(sizes), 3, figsize=(15, 4.2 * len(sizes)), squeeze=False)
    for ax_row, (n, p) in zip(axes, sizes, strict=True):
        sel = [r for r in ok if (r["n"], r["p"]) == (n, p)]
        for family, marker in (("paper", "o"), ("ring", "s")):
            pts = sorted(
                (r for r in sel if (r["topology"] == "ring") == (family == "ring") or r["J"] == 1),
                key=lambda r: r["J"],
            )
            label = "J=1 / paper5 / complete" if family == "paper" else "J=1 / ring"
            Js = [r["J"] for r in pts]
            ax_row[0].plot(
                Js,
                [r["rounds_to_gap"] or np.nan for r in pts],
                marker=marker,
                label=f"{label}: to gap {GAP:g}",
            )
            ax_row[0].plot(
                Js,
                [r["rounds_to_stop"] for r in pts],
                marker=marker,
                ls="--",
                label=f"{label}: to stop (tol)",
            )
            ax_row[1].plot(
                Js,
                [r["seconds_per_round"] * 1e3 for r in pts],
                marker=marker,
                label=f"{label}: total",
            )
            ax_row[1].plot(
                Js,
                [r["max_machine_compute_s_per_round"] * 1e3 for r in pts],
                marker=marker,
                ls=":",
                label=f"{label}: max machine compute",
            )
            ax_row[1].plot(
                Js,
                [r["comm_s_per_round"] * 1e3 for r in pts],
                marker=marker,
                ls="--",
                label=f"{label}: communication",
            )
        for key, (rounds, gaps) in curves.items():
            if key[:3] == (n, p, "mpi"):
                ax_row[2].semilogy(rounds, np.maximum(gaps, 1e-16), label=f"J={key[3]} {key[4]}")
        ax_row[2].axhline(GAP, color="k", lw=0.8)
        ax_row[0].set(xlabel="J", ylabel="rounds", title=f"n={n}, p={p}: rounds")
        ax_row[1].set(
            xlabel="J",
            ylabel="ms per round",
            yscale="log",
            title="time per round (MPI, 2 cores: oversubscribed for J > 2)",
        )
        ax_row[2].set(xlabel="round", ylabel="|F_t - F*| / F*", title="relative objective gap")
        for ax in ax_row:
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(SIZES), default="quick")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tol", type=float, default=1e-6, help="the job's stopping tolerance")
    parser.add_argument("--max-rounds", type=int, default=3000)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per launch")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per process")
    parser.add_argument(
        "--repeats", type=int, default=3, help="launches per configuration; timings are medians"
    )
    parser.add_argument("--no-inprocess", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    rows, curves = run(
        args.mode,
        args.seed,
        args.tol,
        args.max_rounds,
        args.timeout,
        args.threads,
        not args.no_inprocess,
        args.repeats,
    )
    stem = f"scaling_{args.mode}" + ("" if args.threads == 1 else f"_threads{args.threads}")
    write_csv(rows, args.out / f"{stem}.csv")
    plot(rows, curves, args.out / f"{stem}.png")
    print(f"wrote {args.out / stem}.csv and .png")
    if any(not math.isfinite(r.get("seconds_per_round", math.nan)) for r in rows):
        print("some runs failed: see stop_reason in the CSV")


if __name__ == "__main__":
    main()
