"""Speed of the DP median-regression fits against statsmodels QuantReg on the same data.

    python -m benchmarks.median_speed                  # n = 5,000,000, d = 3, 3 timings each
    python -m benchmarks.median_speed --n 1000000 --repeats 5

Prints the median time of each fit over --repeats runs and its ratio to QuantReg (timed the
same number of times), and writes benchmarks/out/median_speed.csv. A timing on a loaded
machine is noisy: repeat and take the median rather than trusting one run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import statsmodels.api as sm

from benchmarks.common import write_csv
from dpnet.baselines.median import PAPER_PARAMS, DPMedianRegressor, simulate_median_data

FITS = {
    "Alg1 objective": {"method": "objective"},
    "Alg2 irls": {"method": "irls"},
    "Alg3 coordinate (zero start)": {"method": "coordinate", "init": "zero"},
}


def _median_time(fit, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fit()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X, y = simulate_median_data(args.n, rng=rng)
    X_const = sm.add_constant(X)
    t_qr = _median_time(lambda: sm.QuantReg(y, X_const).fit(q=0.5), args.repeats)
    rows = [{"fit": "statsmodels QuantReg", "n": args.n, "median_s": t_qr, "ratio": 1.0}]
    print(f"n = {args.n}: statsmodels QuantReg {t_qr:.2f} s (median of {args.repeats})")
    for label, kw in FITS.items():
        t = _median_time(
            lambda kw=kw: DPMedianRegressor(
                epsilon=1.0, random_state=int(rng.integers(2**63)), **{**PAPER_PARAMS, **kw}
            ).fit(X, y),
            args.repeats,
        )
        rows.append({"fit": label, "n": args.n, "median_s": t, "ratio": t_qr / t})
        print(f"  {label:30s} {t:7.2f} s   QuantReg / fit = {t_qr / t:5.1f}x")
    write_csv(rows, args.out / "median_speed.csv")


if __name__ == "__main__":
    main()
