"""Speed and error of the DP median-regression fits, with their defaults, against statsmodels
QuantReg(q=0.5) on the same data, side by side in one run.

    python -m benchmarks.median_speed                  # n = 1,000,000, d = 3, eps = 1, 3 timings
    python -m benchmarks.median_speed --n 5000000 --repeats 5 --error-runs 20

Data: the paper's simulation (:func:`simulate_median_data`). Each DP fit is
``DPMedianRegressor(method=m, epsilon=eps)`` with every other parameter at its default, except
``y_bound=10`` for the coordinate method (it has no default; 10 exceeds the true line's
range, so clipping y keeps the conditional median). Each repeat runs every fit once, in turn
(fresh noise each run), so a change of load lands on all of them. Prints each fit's median
time, the median over repeats of its ratio fit / QuantReg within the repeat, and its
max-coordinate error |theta - theta_exact|_inf, theta = (mu, beta), against the certified
exact ridge-LAD fit at the same lam (the target of the DP fits; the ridge moves beta_3 by ~0.08
from QuantReg's lam = 0 fit, which is shown for reference): the worst of the timed runs, and
the median, 95th percentile and worst over --error-runs further untimed fits of each DP method
(fresh noise each, same data), so that an error claim does not rest on the timed draws alone.
Writes benchmarks/out/median_speed.csv. Timings on a loaded machine are noisy: the medians
and the ratios (both timed in the same run) are what to compare.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np
import statsmodels.api as sm

from benchmarks.common import timed_together, write_csv
from dpnet.baselines.median import DPMedianRegressor, simulate_median_data
from dpnet.baselines.median.numerics import exact_lad

Y_BOUND = 10.0
FITS: dict[str, dict] = {
    "Alg1 objective (default)": {"method": "objective"},
    "Alg2 irls (default)": {"method": "irls"},
    "Alg3 coordinate (default)": {"method": "coordinate", "y_bound": Y_BOUND},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--error-runs", type=int, default=20, help="untimed fits per DP method")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    X, y = simulate_median_data(args.n, rng=rng)
    lam = DPMedianRegressor().lam
    exact = exact_lad(X, y, lam)  # rows already in the unit ball; y clipping does not move it
    X_const = sm.add_constant(X)
    fits: dict[str, Callable[[], np.ndarray]] = {
        "statsmodels QuantReg (lam=0)": lambda: np.asarray(
            sm.QuantReg(y, X_const).fit(q=0.5).params
        )
    }
    for label, kw in FITS.items():

        def fit(kw: dict = kw) -> np.ndarray:
            est = DPMedianRegressor(epsilon=args.epsilon, random_state=int(rng.integers(2**63)))
            est.set_params(**kw).fit(X, y)
            return np.r_[est.intercept_, est.coef_]

        fits[label] = fit
    print(
        f"n = {args.n}, eps = {args.epsilon:g}, {args.repeats} repeats, every fit once per "
        "repeat in turn; time: median; fit/QuantReg: median of the ratios within a repeat; "
        f"errors: max_j |theta_j - exact ridge-LAD (lam = {lam:g})_j|, worst timed run; then "
        f"median / 95th percentile / worst over {args.error_runs} untimed runs"
    )
    head = f"  {'fit':30s} {'time (s)':>9s} {'fit/QuantReg':>13s} {'max err':>8s}"
    print(head + f" {'err med':>8s} {'err p95':>8s} {'err max':>8s}")
    rows = []
    for label, timed in timed_together(fits, args.repeats).items():
        err = max(float(np.abs(th - exact).max()) for th in timed["outputs"])
        row = {
            "fit": label,
            "median_s": timed["median_s"],
            "ratio_to_quantreg": timed["ratio"],
            "max_err_vs_exact": err,
        }
        line = f"  {label:30s} {timed['median_s']:9.2f} {timed['ratio']:13.3f} {err:8.4f}"
        if label in FITS and args.error_runs > 0:
            errs = [float(np.abs(fits[label]() - exact).max()) for _ in range(args.error_runs)]
            row |= {
                "error_runs": args.error_runs,
                "err_median": float(np.median(errs)),
                "err_p95": float(np.percentile(errs, 95)),
                "err_max": max(errs),
            }
            line += f" {row['err_median']:8.4f} {row['err_p95']:8.4f} {row['err_max']:8.4f}"
        rows.append(row)
        print(line, flush=True)
    write_csv(
        [{"n": args.n, "epsilon": args.epsilon, "repeats": args.repeats, **row} for row in rows],
        args.out / "median_speed.csv",
    )


if __name__ == "__main__":
    main()
