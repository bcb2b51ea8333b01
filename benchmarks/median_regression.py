"""Reproduce the simulation of Chen, Miao & Tang (2020), section 4, with the corrected algorithms.

y = 2 + 3 x1 - 4 x3 + Laplace(scale 2), x uniform in the unit ball of R^3, y clipped to 10;
lam = 0.002, gamma = 0.05, e = 0.05, tau = 1e-6, N = 200 (Alg. 2), l = 0.1 and N = 40 (Alg. 3);
epsilon in {0.1, 0.5, 1, 2}. Errors are against the exact ridge-LAD fit (same lam, certified).

    python -m benchmarks.median_regression --mode quick   # n = 5,000 and 50,000, 3 repetitions
    python -m benchmarks.median_regression --mode full    # n = 5,000 and 5,000,000, 10 repetitions

Writes benchmarks/out/median_regression_{mode}.csv, .md and .png. Times: at each (n, epsilon)
TIMED_ROUNDS rounds, each fitting every method once in turn end to end through
DPMedianRegressor (fresh noise; a change of the machine's load lands on all methods, not on one
method's block); a method's time is its median over the rounds. Errors: the first repetition
is a fit through DPMedianRegressor; later repetitions of Alg. 2 (and of Alg. 3's private start,
which is Alg. 2 at its share of epsilon) reuse the certified minimiser (their only
data-dependent, deterministic part) and draw fresh Laplace noise: the same output distribution
at a fraction of the CPU. statsmodels QuantReg is timed once per n (a reference only).
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import timed_together, write_csv
from dpnet.baselines.median import PAPER_PARAMS, TRUE_THETA, DPMedianRegressor, simulate_median_data
from dpnet.baselines.median.algorithms import CERT_SLACK, irls_fit, private_start_share
from dpnet.baselines.median.numerics import exact_lad
from dpnet.baselines.median.privacy import irls_l2_sensitivity
from dpnet.privacy import clip_values, laplace_mechanism

EPSILONS = (0.1, 0.5, 1.0, 2.0)
# label -> estimator keyword overrides (Alg. 3: step size and start, as the issue asks)
METHODS = {
    "Alg1 objective": {"method": "objective"},
    "Alg2 irls": {"method": "irls"},
    "Alg3 zero start, l=0.1": {"method": "coordinate", "init": "zero"},
    "Alg3 zero start, l=10": {"method": "coordinate", "step": 10.0, "init": "zero"},
    "Alg3 private start, l=0.1": {"method": "coordinate", "init": "private"},
}
MODES = {"quick": ((5_000, 50_000), 3), "full": ((5_000, 5_000_000), 10)}
TIMED_ROUNDS = 5  # interleaved timed fits of every method per (n, epsilon); times are medians


def _start_share(n: int, d: int) -> float:
    """The estimator's default init_share (init="private") with the paper's parameters."""
    p = PAPER_PARAMS
    return private_start_share(
        n,
        d,
        lam=p["lam"],
        intercept_ridge=1.0 / math.sqrt(n),
        x_bound=p["x_bound"],
        y_bound=p["y_bound"],
        beta_bound=DPMedianRegressor().beta_bound,
        n_splits=p["n_splits"],
        step=p["step"],
    )


def _quantreg_time(X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    import statsmodels.api as sm

    start = time.perf_counter()
    params = sm.QuantReg(y, sm.add_constant(X)).fit(q=0.5).params
    return time.perf_counter() - start, np.asarray(params)


def _fit(X: np.ndarray, y: np.ndarray, eps: float, kw: dict, rng: np.random.Generator) -> Any:
    """One end-to-end fit through DPMedianRegressor (paper's parameters, ``kw`` on top)."""
    return DPMedianRegressor(
        epsilon=eps, random_state=int(rng.integers(2**63)), **{**PAPER_PARAMS, **kw}
    ).fit(X, y)


def _irls_repeat(X, y, epsilon, cache, rng) -> np.ndarray:
    n = X.shape[0]
    a_mu = 1.0 / math.sqrt(n)
    if "theta" not in cache:
        cache["theta"] = irls_fit(
            X, y, lam=PAPER_PARAMS["lam"], e=PAPER_PARAMS["e"], x_bound=1.0, intercept_ridge=a_mu
        )[0]
    delta2 = irls_l2_sensitivity(n, lam=PAPER_PARAMS["lam"], intercept_ridge=a_mu, x_bound=1.0)
    l1 = math.sqrt(X.shape[1] + 1) * (1 + 2 * CERT_SLACK) * delta2
    return np.asarray(
        laplace_mechanism(cache["theta"], l1_sensitivity=l1, epsilon=epsilon, rng=rng)[0]
    )


def run(
    mode: str,
    out_dir: Path,
    seed: int = 0,
    *,
    sizes: tuple[int, ...] | None = None,
    reps: int | None = None,
    timings: list[dict] | None = None,
    timed_rounds: int = TIMED_ROUNDS,
) -> list[dict]:
    """Fit every method at every (n, epsilon); ``sizes`` / ``reps`` override the mode's, and
    the timing rows (median over ``timed_rounds`` interleaved rounds) are appended to
    ``timings`` when given. Returns one row per fit."""
    sizes = sizes or MODES[mode][0]
    reps = reps or MODES[mode][1]
    rows: list[dict] = []
    timings = [] if timings is None else timings
    for n in sizes:
        rng = np.random.default_rng(seed + n)
        X, y = simulate_median_data(n, rng=rng)
        y = clip_values(y, PAPER_PARAMS["y_bound"])  # the estimator's own clipping is then a no-op
        t_qr, qr = _quantreg_time(X, y)
        start = time.perf_counter()
        exact = exact_lad(X, y, PAPER_PARAMS["lam"])
        t_exact = time.perf_counter() - start
        print(
            f"n={n}: QuantReg {t_qr:.2f}s {np.round(qr, 4)}; exact ridge-LAD {t_exact:.2f}s "
            f"{np.round(exact, 4)}",
            flush=True,
        )
        timings.append({"n": n, "method": "statsmodels QuantReg (lam=0)", "time_s": t_qr})
        timings.append({"n": n, "method": "exact ridge-LAD (certified)", "time_s": t_exact})
        cache: dict = {}
        share = _start_share(n, X.shape[1])
        for eps in EPSILONS:
            time_rng = np.random.default_rng([seed, n, int(eps * 1000), 10**6])
            fits = {
                label: functools.partial(_fit, X, y, eps, kw, time_rng)
                for label, kw in METHODS.items()
            }
            timed = timed_together(fits, timed_rounds)
            for label in METHODS:
                timings.append(
                    {
                        "n": n,
                        "method": f"{label} (eps={eps:g})",
                        "time_s": timed[label]["median_s"],
                        "timed_rounds": timed_rounds,
                        "quantreg_ratio": t_qr / timed[label]["median_s"],
                    }
                )
            for label, kw in METHODS.items():
                for rep in range(reps):
                    rep_rng = np.random.default_rng([seed, n, int(eps * 1000), rep])
                    if rep > 0 and kw["method"] == "irls":
                        theta = _irls_repeat(X, y, eps, cache, rep_rng)
                    elif rep > 0 and kw.get("init") == "private":  # same law as init="private"
                        init = _irls_repeat(X, y, share * eps, cache, rep_rng)
                        est = DPMedianRegressor(
                            epsilon=(1.0 - share) * eps,
                            random_state=int(rep_rng.integers(2**63)),
                            **{**PAPER_PARAMS, **kw, "init": init},
                        ).fit(X, y)
                        theta = np.r_[est.intercept_, est.coef_]
                    else:
                        est = DPMedianRegressor(
                            epsilon=eps,
                            random_state=int(rep_rng.integers(2**63)),
                            **{**PAPER_PARAMS, **kw},
                        ).fit(X, y)
                        theta = np.r_[est.intercept_, est.coef_]
                    rows.append(
                        {
                            "n": n,
                            "epsilon": eps,
                            "method": label,
                            "rep": rep,
                            "mu": theta[0],
                            "beta1": theta[1],
                            "beta2": theta[2],
                            "beta3": theta[3],
                            "l2_error_vs_exact": float(np.linalg.norm(theta - exact)),
                            "max_error_vs_exact": float(np.abs(theta - exact).max()),
                            "time_s": timed[label]["median_s"] if rep == 0 else math.nan,
                        }
                    )
                err = np.mean([r["l2_error_vs_exact"] for r in rows[-reps:]])
                print(f"  n={n} eps={eps:g} {label}: mean L2 error {err:.4f}", flush=True)
        for label in ("exact",):
            rows.append(
                {
                    "n": n,
                    "epsilon": math.nan,
                    "method": label,
                    "rep": 0,
                    "mu": exact[0],
                    "beta1": exact[1],
                    "beta2": exact[2],
                    "beta3": exact[3],
                    "l2_error_vs_exact": 0.0,
                    "max_error_vs_exact": 0.0,
                    "time_s": t_exact,
                }
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    _write(rows, timings, out_dir, mode)
    return rows


def _write(rows: list[dict], timings: list[dict], out_dir: Path, mode: str) -> None:
    base = out_dir / f"median_regression_{mode}"
    write_csv(rows, base.with_suffix(".csv"))
    lines = [
        "| n | eps | method | mu | beta1 | beta2 | beta3 | L2 err vs exact | max err |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted(
        {(r["n"], r["epsilon"], r["method"]) for r in rows if r["method"] != "exact"},
        key=lambda k: (k[0], k[1], list(METHODS).index(k[2])),
    )
    for n in sorted({r["n"] for r in rows}):
        ex = next(r for r in rows if r["n"] == n and r["method"] == "exact")
        lines.append(
            f"| {n} | - | exact ridge-LAD | "
            + " | ".join(f"{ex[c]:.4f}" for c in ("mu", "beta1", "beta2", "beta3"))
            + " | 0 | 0 |"
        )
    for n, eps, label in keys:
        sel = [r for r in rows if (r["n"], r["epsilon"], r["method"]) == (n, eps, label)]
        cells = []
        for c in ("mu", "beta1", "beta2", "beta3"):
            v = np.array([r[c] for r in sel])
            cells.append(f"{v.mean():.4f} ± {v.std(ddof=1) if v.size > 1 else 0:.4f}")
        err = np.array([r["l2_error_vs_exact"] for r in sel])
        mx = np.array([r["max_error_vs_exact"] for r in sel])
        lines.append(
            f"| {n} | {eps:g} | {label} | "
            + " | ".join(cells)
            + f" | {err.mean():.4f} | {mx.mean():.4f} |"
        )
    lines += [
        "",
        f"true theta (mu, beta1..3) = {TRUE_THETA.tolist()}",
        "",
        "| n | fit | time (s; DP fits: median of interleaved rounds) | QuantReg time / time |",
        "|---|---|---|---|",
    ]
    for t in timings:
        ratio = f"{t['quantreg_ratio']:.1f}x" if "quantreg_ratio" in t else "-"
        lines.append(f"| {t['n']} | {t['method']} | {t['time_s']:.3f} | {ratio} |")
    base.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    _plot(rows, base.with_suffix(".png"))


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["n"] for r in rows})
    fig, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes), 4.5), squeeze=False)
    for ax, n in zip(axes[0], sizes, strict=True):
        for label in METHODS:
            err = [
                np.mean(
                    [
                        r["l2_error_vs_exact"]
                        for r in rows
                        if (r["n"], r["epsilon"], r["method"]) == (n, eps, label)
                    ]
                )
                for eps in EPSILONS
            ]
            ax.loglog(EPSILONS, err, marker="o", label=label)
        ax.set_title(f"n = {n:,}")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("mean ||theta - theta_exact||_2")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="quick")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run(args.mode, args.out, args.seed)


if __name__ == "__main__":
    main()
