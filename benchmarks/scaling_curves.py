"""Strong and weak scaling of the decentralized ADMM over MPI, as plots.

    nice -n 10 python -m benchmarks.scaling_curves                 # both, a few minutes
    python -m benchmarks.scaling_curves --machines 1 2 4 8 --topologies complete

Strong scaling: the n = --strong-rows training rows of paper 3's Table 1 (model III, p = 48,
lambda = 0.1, privacy off) split over J machines. Weak scaling: --weak-rows rows per machine,
n = J x --weak-rows. For every (J, graph) one ``mpiexec -n J python -m dpnet.run`` (BLAS pools
of one thread), history every round, against skglm's optimum F* on the same rows:

- rounds to a --gap relative objective gap (first round from which it stays below);
- the slowest machine's CPU seconds to that gap (rounds to gap x its compute CPU per round:
  what a machine with a core of its own spends; on this 2-core host J ranks share the cores,
  so their wall time is not a machine's time);
- strong scaling speed-up T(1) / T(J) and efficiency speed-up / J; weak scaling efficiency
  T(1) / T(J) (1 is ideal: the time stays flat as machines and rows grow together);
- start-up (dpnet's import to the first round, slowest rank) and bytes per machine per round.

Writes benchmarks/out/scaling_curves.csv and scaling_curves.png.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from benchmarks.common import OUT_DIR, rounds_to_gap, run_job, write_csv
from benchmarks.scaling import f_star


def job_argv(n: int, seed: int) -> list[str]:
    """Options of one job on n synthetic rows (all training rows, history every round)."""
    return [
        *("--n-samples", str(n), "--n-groups", "16", "--n-test", "0", "--seed", str(seed)),
        *("--epsilon", "inf", "--tol", "1e-10", "--progress-every", "1"),
    ]


def measure(
    kind: str, n: int, J: int, topology: str, seed: int, gap: float, timeout: float
) -> dict[str, Any]:
    """One CSV row: one MPI job of J ranks on n rows."""
    argv = job_argv(n, seed)
    report = run_job([*argv, "--topology", topology], ranks=J, timeout=timeout)
    to_gap = rounds_to_gap(report["history"], f_star(argv), gap)
    rounds = report["rounds"]
    machines = report["machines"]
    cpu_round = max(m["compute_cpu_seconds"] for m in machines) / rounds
    return {
        "scaling": kind,
        "J": J,
        "topology": topology if J > 1 else "single",
        "n": n,
        "rows_per_machine": n // J,
        "rounds_to_gap": to_gap,
        "rounds_to_stop": rounds,
        "max_machine_cpu_ms_per_round": cpu_round * 1e3,
        "max_machine_cpu_to_gap_s": math.nan if to_gap is None else to_gap * cpu_round,
        "startup_s": report["timing"]["startup_seconds"],
        "job_wall_s": report["launch_seconds"],
        "bytes_per_machine_round": float(np.mean([m["bytes_sent"] for m in machines])) / rounds,
    }


def add_efficiency(rows: list[dict[str, Any]]) -> None:
    """Speed-up and efficiency against the J = 1 row of the same scaling kind."""
    for kind in ("strong", "weak"):
        base = [r for r in rows if r["scaling"] == kind and r["J"] == 1]
        if not base:
            continue
        t1 = base[0]["max_machine_cpu_to_gap_s"]
        for r in rows:
            if r["scaling"] == kind:
                r["speedup"] = t1 / r["max_machine_cpu_to_gap_s"]
                r["efficiency"] = r["speedup"] / r["J"] if kind == "strong" else r["speedup"]


def plot(rows: list[dict[str, Any]], path: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(19, 4.3))
    topologies = sorted({r["topology"] for r in rows} - {"single"})
    for kind, ls in (("strong", "-"), ("weak", "--")):
        for topo in topologies:
            pts = sorted(
                (r for r in rows if r["scaling"] == kind and r["topology"] in (topo, "single")),
                key=lambda r: r["J"],
            )
            if len(pts) < 2:
                continue
            Js = [r["J"] for r in pts]
            label = f"{kind}, {topo}"
            axes[0].plot(Js, [r["max_machine_cpu_to_gap_s"] for r in pts], "o" + ls, label=label)
            axes[1].plot(Js, [r["rounds_to_gap"] or np.nan for r in pts], "o" + ls, label=label)
            axes[2].plot(Js, [r["efficiency"] for r in pts], "o" + ls, label=label)
            axes[3].plot(Js, [r["startup_s"] for r in pts], "o" + ls, label=label)
    t1 = [r["max_machine_cpu_to_gap_s"] for r in rows if r["scaling"] == "strong" and r["J"] == 1]
    if t1:
        Js = sorted({r["J"] for r in rows})
        axes[0].plot(Js, [t1[0] / J for J in Js], "k:", label="strong, ideal T(1)/J")
    axes[2].axhline(1.0, color="k", lw=0.8, ls=":")
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel="machines J",
        ylabel="s",
        title="slowest machine's CPU time to the gap",
    )
    axes[1].set(xscale="log", xlabel="machines J", ylabel="rounds", title="rounds to the gap")
    axes[2].set(
        xscale="log",
        xlabel="machines J",
        ylabel="efficiency",
        title="strong: T(1)/(J T(J)); weak: T(1)/T(J)",
    )
    axes[3].set(
        xscale="log",
        xlabel="machines J",
        ylabel="s",
        title="start-up: import to first round",
    )
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--topologies", nargs="+", default=["complete", "ring"])
    parser.add_argument("--strong-rows", type=int, default=10_000)
    parser.add_argument("--weak-rows", type=int, default=1_000, help="rows per machine")
    parser.add_argument("--gap", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per launch")
    parser.add_argument("--output", default="scaling_curves")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for kind in ("strong", "weak"):
        for J in args.machines:
            n = args.strong_rows if kind == "strong" else args.weak_rows * J
            for topology in args.topologies if J > 1 else args.topologies[:1]:
                row = measure(kind, n, J, topology, args.seed, args.gap, args.timeout)
                rows.append(row)
                print(
                    f"{kind:6s} J = {J:3d} {row['topology']:9s} n = {n:6d}: "
                    f"{row['rounds_to_gap']} rounds to {args.gap:g}, "
                    f"{row['max_machine_cpu_ms_per_round']:.2f} ms CPU per round "
                    f"(slowest machine) = {row['max_machine_cpu_to_gap_s']:.3f} s; "
                    f"start-up {row['startup_s']:.2f} s, job {row['job_wall_s']:.1f} s wall",
                    flush=True,
                )
    add_efficiency(rows)
    write_csv(rows, OUT_DIR / f"{args.output}.csv")
    plot(rows, OUT_DIR / f"{args.output}.png")
    print(f"wrote {OUT_DIR / args.output}.csv and .png")


if __name__ == "__main__":
    main()
