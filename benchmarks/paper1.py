"""Paper 1 (Chen, Miao & Tang, DP median regression) end to end: the simulation of section 4
(Tables 1-2) with verdicts on the paper's claims, written to benchmarks/out/paper1/
results-paper1.md; with --update-docs to the committed docs/results-paper1.md instead.

    nice -n 10 python -m benchmarks.paper1 --mode quick   # n = 5,000 and 500,000, 3 repetitions
    nice -n 10 python -m benchmarks.paper1 --mode full    # n = 5,000 and 5,000,000, 10 (as paper)
    nice -n 10 python -m benchmarks.paper1 --mode quick --update-docs   # the committed page

Runs benchmarks/median_regression.py's experiment (y = 2 + 3 x1 - 4 x3 + Laplace(2), x uniform
in the unit ball, y clipped to 10, the paper's lambda, gamma, e, tau, N, l; epsilon in
{0.1, 0.5, 1, 2} because the paper's epsilon was lost) and the IRLS iteration count. Synthetic
data only (--data-dir is accepted for a uniform interface and not needed). PNG, CSV, the raw
table and the report go to benchmarks/out/paper1/ (--out).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import median_regression
from benchmarks.common import (
    NOT_TESTABLE,
    OUT_DIR,
    add_data_dir_argument,
    add_update_docs_argument,
    claim,
    machine_description,
    md_table,
    report_command,
    report_path,
    shown_path,
    verdict_of,
    write_report,
)
from dpnet.baselines.median import PAPER_PARAMS, simulate_median_data
from dpnet.baselines.median.algorithms import irls_fit
from dpnet.privacy import clip_values

PAGE = "results-paper1.md"
MODES = {"quick": ((5_000, 500_000), 3), "full": ((5_000, 5_000_000), 10)}
ALG1, ALG2 = "Alg1 objective", "Alg2 irls"
ALG3 = "Alg3 zero start, l=0.1"  # the paper's step; zero start: a data-independent start
ALG3_VARIANTS = ("Alg3 zero start, l=0.1", "Alg3 zero start, l=10", "Alg3 private start, l=0.1")
SHORT = {
    ALG1: "Alg1",
    ALG2: "Alg2",
    "Alg3 zero start, l=0.1": "Alg3 zero/l=0.1",
    "Alg3 zero start, l=10": "Alg3 zero/l=10",
    "Alg3 private start, l=0.1": "Alg3 private/l=0.1",
}
# surviving numbers of the paper's Tables 1 (n = 5,000) and 2 (n = 5,000,000): coef -> alg -> value
PAPER_TABLES = {
    5_000: {"beta2": (-0.0295, 13.2762, -0.6099), "beta3": (-4.0835, -14.2089, -3.2283)},
    5_000_000: {"beta3": (-3.9460, -3.9205, -3.9918)},
}

HEADER = """
Paper: E. Chen, Y. Miao, Y. Tang, "Median regression with differential privacy" (arXiv, 2020;
text in ../shared/papers/000_*.txt). Its section 4 simulates y = 2 + 3x1 - 4x3 + Laplace(2)
with n = 5,000 (Table 1) and n = 5,000,000 (Table 2). The extraction lost the epsilon of the
runs ("(epsilon, delta) = (0. , 0)": some 0.x), the time rows of both tables and every cell except
beta2 and beta3 of Table 1 and beta3 of Table 2: these are "not recoverable". We therefore run an
epsilon grid and test the paper's verbal claims. The algorithms are the corrected versions of
dpnet.baselines.median (docs/algorithms-median.md, docs/privacy-median-regression.md): Alg. 1
carries the Jacobian term the paper's proof omits, Alg. 2 uses an L1 sensitivity, Alg. 3 steps
along the descending directional derivative. Errors are against the exact ridge-LAD fit at the
same lambda (not the true coefficients), so they measure what privacy and the algorithm cost.
"""


def _mean(rows: list[dict], n: int, eps: float, method: str, key: str) -> float:
    return float(
        np.mean([r[key] for r in rows if (r["n"], r["epsilon"], r["method"]) == (n, eps, method)])
    )


def _time(timings: list[dict], n: int, method: str) -> float:
    """Median over epsilon of ``method``'s time at ``n``, each the median of the interleaved
    end-to-end fits of benchmarks/median_regression.py (TIMED_ROUNDS rounds, every method once
    per round in turn)."""
    return float(
        np.median([t["time_s"] for t in timings if t["n"] == n and t["method"].startswith(method)])
    )


def irls_iterations(sizes: tuple[int, ...], seed: int) -> dict[int, int]:
    """Iterations of the (non-private) IRLS core with the paper's tau and N on the same data."""
    out = {}
    for n in sizes:
        X, y = simulate_median_data(n, rng=np.random.default_rng(seed + n))
        y = clip_values(y, PAPER_PARAMS["y_bound"])
        out[n] = int(
            irls_fit(
                X,
                y,
                lam=PAPER_PARAMS["lam"],
                e=PAPER_PARAMS["e"],
                x_bound=1.0,
                intercept_ridge=1 / math.sqrt(n),
            )[1]
        )
    return out


def claims_of(rows: list[dict], timings: list[dict], iters: dict[int, int]) -> list[dict[str, str]]:
    sizes = sorted({r["n"] for r in rows})
    small, large = sizes[0], sizes[-1]
    eps_grid = median_regression.EPSILONS
    err = {
        (n, e, m): _mean(rows, n, e, m, "l2_error_vs_exact")
        for n in sizes
        for e in eps_grid
        for m in median_regression.METHODS
    }

    def fmt(n: int, methods: tuple[str, ...]) -> str:
        return "; ".join(
            f"eps {e:g}: " + ", ".join(f"{SHORT[m]} {err[n, e, m]:.3f}" for m in methods)
            for e in eps_grid
        )

    alg1_best = all(
        err[small, e, ALG1] < min(err[small, e, m] for m in (ALG2, *ALG3_VARIANTS))
        for e in eps_grid
    )
    alg2_small = all(
        err[small, e, ALG2] > err[small, e, ALG1] and err[small, e, ALG2] > err[large, e, ALG2]
        for e in eps_grid
    )
    t = {(n, m): _time(timings, n, m) for n in sizes for m in (ALG1, ALG2, *ALG3_VARIANTS)}
    matched = all(err[large, e, ALG2] <= err[large, e, ALG1] + 0.05 for e in eps_grid)
    ratios = {
        e: max(err[large, e, m] for m in ALG3_VARIANTS)
        / min(err[large, e, m] for m in ALG3_VARIANTS)
        for e in eps_grid
    }
    times = "; ".join(
        f"n={n}: " + ", ".join(f"{SHORT[m]} {t[n, m]:.3f} s" for m in (ALG1, ALG2, ALG3))
        for n in sizes
    )
    out = [
        claim(
            "With the small sample (n = 5,000) Algorithm 1 is more accurate than Algorithms 2 "
            "and 3",
            "abstract, section 4, Table 1",
            verdict_of(alg1_best),
            f"mean L2 error vs exact fit at n={small}: "
            + fmt(small, (ALG1, ALG2, ALG3))
            + ". Rule: Alg. 1 below Alg. 2 and every Alg. 3 variant at every epsilon.",
        ),
        claim(
            "Algorithm 2 needs a larger n: at small n its noise is large",
            "section 4",
            verdict_of(alg2_small),
            f"Alg. 2 error at n={small} / n={large}: "
            + ", ".join(
                f"eps {e:g}: {err[small, e, ALG2]:.3f} / {err[large, e, ALG2]:.4f}"
                for e in eps_grid
            )
            + ". Rule: at the small n above Alg. 1's error (see the first claim) and above its "
            "own error at the large n, at every epsilon.",
        ),
        claim(
            "When n is large, Algorithm 1 needs more time than Algorithm 2",
            "abstract, section 4",
            verdict_of(t[large, ALG1] > t[large, ALG2]),
            "median time over epsilon (end to end, each the median of "
            f"{median_regression.TIMED_ROUNDS} interleaved fits): {times}. Rule: Alg. 1 "
            f"slower than Alg. 2 at n={large}.",
        ),
        claim(
            "When n is large, Algorithm 2's accuracy matches Algorithm 1's",
            "abstract, section 4",
            verdict_of(matched),
            f"mean L2 error at n={large}: "
            + fmt(large, (ALG1, ALG2))
            + ". Rule: Alg. 2 within 0.05 of Alg. 1 at every epsilon.",
        ),
        claim(
            "Algorithm 3 takes less time than Algorithms 1 and 2 in both cases (small and large n)",
            "abstract, section 4",
            verdict_of(all(t[n, ALG3] < min(t[n, ALG1], t[n, ALG2]) for n in sizes)),
            f"{times}. Rule: Alg. 3 (zero start, l = 0.1) fastest at every n.",
        ),
        claim(
            "Algorithm 3 depends strongly on the initial value and the step size",
            "abstract, section 4",
            verdict_of(all(r >= 2 for r in ratios.values())),
            f"n={large}: error of the Alg. 3 variants (zero start l = 0.1, zero start l = 10, "
            "private start l = 0.1): "
            + fmt(large, ALG3_VARIANTS)
            + ". Rule: largest / smallest error >= 2 at every epsilon.",
        ),
        claim(
            "Algorithm 2 (IRLS) converges in fewer than 30 iterations",
            "section 4",
            verdict_of(all(k < 30 for k in iters.values())),
            "iterations to tau = 1e-6 (non-private core, same data): "
            + ", ".join(f"n={n}: {k}" for n, k in iters.items())
            + ". Rule: < 30 at every n.",
        ),
    ]
    if 5_000_000 in sizes:
        paper = PAPER_TABLES[5_000_000]["beta3"]
        ours = {m: [_mean(rows, 5_000_000, e, m, "beta3") for e in eps_grid] for m in (ALG1, ALG2)}
        ours[ALG3] = [_mean(rows, 5_000_000, e, ALG3_VARIANTS[2], "beta3") for e in eps_grid]
        close = all(abs(v + 4) <= 0.1 for vals in ours.values() for v in vals)
        out.append(
            claim(
                "At n = 5,000,000 all three algorithms estimate beta3 = -4 closely (Table 2: "
                f"{paper[0]}, {paper[1]}, {paper[2]})",
                "Table 2",
                verdict_of(close),
                "our mean beta3 per epsilon: "
                + "; ".join(
                    f"{SHORT[m]} " + ", ".join(f"{v:.4f}" for v in vals) for m, vals in ours.items()
                )
                + " (Alg. 3 with the private start). Rule: within 0.1 of -4.",
            )
        )
    else:
        out.append(
            claim(
                "At n = 5,000,000 all three algorithms estimate beta3 = -4 closely (Table 2)",
                "Table 2",
                NOT_TESTABLE,
                f"not run in this mode (largest n = {large:,}); `--mode full` runs n = 5,000,000",
            )
        )
    out += [
        claim(
            "Table 1-2 cell values (e.g. Alg. 2 beta3 = -14.2089 at n = 5,000)",
            "Tables 1-2",
            NOT_TESTABLE,
            "one noisy draw at an epsilon the extraction lost; see the side-by-side table",
        ),
        claim(
            "Theorems 3.1, 3.3, 3.5: Algorithms 1-3 are epsilon-DP",
            "section 3",
            NOT_TESTABLE,
            "not a benchmark question; the written proofs have gaps (Jacobian term, L1 vs L2 "
            "sensitivity, unenforced ||beta|| <= v, Alg. 3 composes to d x epsilon): "
            "docs/privacy-median-regression.md and the tests/test_median_*.py audits",
        ),
    ]
    return out


def sections(rows: list[dict], timings: list[dict], mode: str, out_dir: Path) -> list[tuple]:
    sizes = sorted({r["n"] for r in rows})
    main_rows = []
    for n in sizes:
        ex = next(r for r in rows if r["n"] == n and r["method"] == "exact")
        main_rows.append(
            [n, "-", "exact ridge-LAD", f"{ex['beta1']:.4f}", f"{ex['beta3']:.4f}", "0", "-"]
        )
        for e in median_regression.EPSILONS:
            for m in median_regression.METHODS:
                sel = [r for r in rows if (r["n"], r["epsilon"], r["method"]) == (n, e, m)]
                b1 = np.array([r["beta1"] for r in sel])
                b3 = np.array([r["beta3"] for r in sel])
                er = np.array([r["l2_error_vs_exact"] for r in sel])
                tm = next(
                    (
                        x["time_s"]
                        for x in timings
                        if x["n"] == n and x["method"] == f"{m} (eps={e:g})"
                    ),
                    math.nan,
                )
                main_rows.append(
                    [
                        n,
                        f"{e:g}",
                        m,
                        f"{b1.mean():.4f} +- {b1.std(ddof=1):.4f}",
                        f"{b3.mean():.4f} +- {b3.std(ddof=1):.4f}",
                        f"{er.mean():.4f}",
                        f"{tm:.3f}",
                    ]
                )
    reps = len([r for r in rows if r["method"] == ALG1]) // (
        len(sizes) * len(median_regression.EPSILONS)
    )
    main = md_table(
        [
            "n",
            "eps",
            "method",
            "beta1 (mean +- sd)",
            "beta3 (mean +- sd)",
            "L2 err vs exact",
            "time (s)",
        ],
        main_rows,
    )
    paper_rows = []
    for n, cells in PAPER_TABLES.items():
        for coef, values in cells.items():
            ours = []
            for m in (ALG1, ALG2, ALG3_VARIANTS[2]):
                if n in sizes:
                    ours.append(
                        " / ".join(
                            f"{_mean(rows, n, e, m, coef):.3f}" for e in median_regression.EPSILONS
                        )
                    )
                else:
                    ours.append("not run")
            paper_rows.append([n, coef, *(f"{v:g}" for v in values), *ours])
    paper = md_table(
        [
            "n",
            "coef",
            "paper Alg. 1",
            "paper Alg. 2",
            "paper Alg. 3",
            "ours Alg. 1 (eps 0.1 / 0.5 / 1 / 2)",
            "ours Alg. 2",
            "ours Alg. 3 (private start)",
        ],
        paper_rows,
    )
    qr = [t for t in timings if t["method"].startswith("statsmodels") or "exact" in t["method"]]
    ref = md_table(
        ["n", "reference fit", "time (s)"],
        [[t["n"], t["method"], f"{t['time_s']:.3f}"] for t in qr],
    )
    png = out_dir / f"median_regression_{mode}.png"
    return [
        (
            "Paper's surviving numbers next to ours",
            f"""
True values: beta2 = 0, beta3 = -4. Ours: mean over repetitions at each epsilon of the grid (the
paper's epsilon is lost). The paper's time rows are not recoverable.

{paper}
""",
        ),
        (
            "Measured table",
            f"""
{reps} repetitions per (n, epsilon, method): mean +- sd of the coefficients, mean L2 error
against the exact ridge-LAD fit; time = median of {median_regression.TIMED_ROUNDS} end-to-end
fits, timed in rounds that fit every method once in turn (a shared machine's load lands on all
methods alike). Later repetitions of Alg. 2 reuse its deterministic minimiser and draw fresh
noise (same output distribution; see benchmarks/median_regression.py). "Alg3 private start"
starts from Alg. 2 at the estimator's default share of epsilon (the variance-minimising one,
0.74 at n = 5,000, 0.78 at 500,000, 0.89 at 5,000,000) and runs the descent with the rest
(total epsilon).

{main}

Reference fits on the same data:

{ref}
""",
        ),
        (
            "Outputs and modes",
            f"""
Figure `{shown_path(png)}` (error against epsilon),
raw CSV and table next to it (not committed). Quick mode: n = 5,000 and 500,000, 3 repetitions.
Full mode: n = 5,000 and 5,000,000 (the paper's sizes), 10 repetitions (about an hour).
""",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="quick")
    add_data_dir_argument(parser)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=OUT_DIR / "paper1", help="PNG/CSV/report folder"
    )
    add_update_docs_argument(parser, PAGE)
    args = parser.parse_args()
    doc = report_path(PAGE, out=args.out, update_docs=args.update_docs)  # synthetic data only
    start = time.perf_counter()
    machine = machine_description()
    sizes, reps = MODES[args.mode]
    timings: list[dict[str, Any]] = []
    rows = median_regression.run(
        args.mode, args.out, args.seed, sizes=sizes, reps=reps, timings=timings
    )
    iters = irls_iterations(sizes, args.seed)
    claims = claims_of(rows, timings, iters)
    command = report_command("paper1")
    write_report(
        doc,
        title="Paper 1: median regression with differential privacy",
        header=HEADER,
        command=command,
        wall_seconds=time.perf_counter() - start,
        machine=machine,
        claims=claims,
        sections=sections(rows, timings, args.mode, args.out),
    )
    print(f"done in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
