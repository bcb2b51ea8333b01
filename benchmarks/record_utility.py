"""Utility of record-level privacy: test accuracy and objective gap against epsilon.

dpnet's decentralized job under ``--privacy record`` (its defaults: rounds, penalty, stop
rule; the simulated backend, which gives the MPI backend's results) on Adult (a9a) and MEMset
for J in {1, 5, 20}, side by side in one run with the central-DP baselines a user would pick
instead -- DP-SGD and ssADMM of ``dpnet.baselines.rdp_admm`` (L1-logistic, all rows on one
node, their tuned defaults) -- at the same (epsilon, delta = 1e-5), and the non-private
optimum of the same group-lasso objective (skglm, the solver of record).

Row bounds are exact and data independent: a9a rows hold at most 14 ones (R = sqrt(14)),
MEMset rows exactly 7 (R = sqrt(7)); the baselines get rows (x, 1) / sqrt(R^2 + 1), norm <= 1.
The objective gap is F(theta) - F* of the group-lasso logistic objective on the training rows
(the benchmark may look at the raw data; the runs do not release it), with F evaluated at each
method's coefficients. The test rows are a separate public file (a9a.t; MEMset's test split).

    python -m benchmarks.record_utility [--data-dir DIR] [--quick]
    python -m benchmarks.record_utility --from-csv   # table and figure from the last CSV

Writes benchmarks/out/record_utility.{csv,md,png} and prints the table.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    OUT_DIR,
    add_data_dir_argument,
    md_table,
    resolve_data_dir,
    write_csv,
)
from devtools.reference import group_logistic_objective, group_logistic_optimum
from dpnet.baselines.rdp_admm import DPSGDClassifier, SSADMMClassifier
from dpnet.baselines.rdp_admm.experiment import TUNED_SETTINGS
from dpnet.data import GroupData, load_dataset, load_memset
from dpnet.run import main as dpnet_main

DELTA = 1e-5
EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
MACHINES = (1, 5, 20)
LAMBDA = {"adult": 1e-3, "memset": 1e-2}  # public choices (MEMset: paper 3's)
ROW_BOUND = {"adult": math.sqrt(14.0), "memset": math.sqrt(7.0)}
BASELINES = {"DP-SGD": DPSGDClassifier, "ssADMM": SSADMMClassifier}


def load(name: str, data_dir: Path) -> tuple[GroupData, GroupData]:
    if name == "adult":
        train = load_dataset(data_dir / "adult" / "a9a.train.libsvm.gz", n_features=123)
        test = load_dataset(data_dir / "adult" / "a9a.test.libsvm.gz", n_features=123)
        return train, test
    return load_memset(data_dir / "memset", rng=np.random.default_rng(0))


def accuracy(X: np.ndarray, y: np.ndarray, theta: np.ndarray) -> float:
    return float(np.mean(np.where(X @ theta[:-1] + theta[-1] >= 0, 1.0, -1.0) == y))


def run_dpnet(
    train: GroupData, test: GroupData, name: str, J: int, epsilon: float, seed: int, tmp: Path
) -> tuple[np.ndarray, float]:
    """One --privacy record run with the CLI's defaults: (theta, seconds)."""
    out = tmp / "r.json"
    argv = [
        "--backend", "simulated", "--machines", str(J), "--quiet",
        "--data", str(tmp / "train.npz"), "--test-data", str(tmp / "test.npz"),
        "--privacy", "record", "--epsilon", str(epsilon), "--delta", str(DELTA),
        "--row-bound", repr(ROW_BOUND[name]), "--lam", str(LAMBDA[name]),
        "--seed", str(seed), "--output", str(out),
    ]  # fmt: skip
    start = time.perf_counter()
    code = dpnet_main(argv)
    seconds = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"dpnet exited with {code}")
    report = json.loads(out.read_text())
    return np.append(report["coef"], report["intercept"]), seconds


def run_baseline(
    method: str, train: GroupData, name: str, epsilon: float, seed: int
) -> tuple[np.ndarray, float]:
    """A central baseline on rows (x, 1) / sqrt(R^2 + 1): (theta in the original scale, s)."""
    scale = math.hypot(ROW_BOUND[name], 1.0)
    X = np.hstack([train.X, np.ones((train.n_samples, 1))]) / scale
    estimator = BASELINES[method](
        lam=LAMBDA[name],
        epsilon=epsilon,
        delta=DELTA,
        row_bound=1.0,
        random_state=seed,
        **TUNED_SETTINGS["logistic"][method],
    )
    start = time.perf_counter()
    estimator.fit(X, train.y)
    return np.asarray(estimator.coef_) / scale, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_dir_argument(parser)
    parser.add_argument("--quick", action="store_true", help="epsilon 1 and 4, one seed")
    parser.add_argument(
        "--from-csv", action="store_true", help="redo the table and the figure from the CSV"
    )
    args = parser.parse_args()
    if args.from_csv:
        report(read_csv(OUT_DIR / "record_utility.csv"))
        return
    data_dir = resolve_data_dir(args.data_dir)
    if data_dir is None:
        return
    epsilons = (1.0, 4.0) if args.quick else EPSILONS
    seeds = (0,) if args.quick else (0, 1, 2)
    rows: list[dict[str, Any]] = []
    for name in ("adult", "memset"):
        train, test = load(name, data_dir)
        theta_star = group_logistic_optimum(train.X, train.y, train.groups, LAMBDA[name])

        def objective(theta: np.ndarray, name=name, train=train) -> float:
            return group_logistic_objective(train.X, train.y, train.groups, LAMBDA[name], theta)

        f_star = objective(theta_star)
        rows.append(_row(name, "non-private (skglm)", 1, math.inf, 0, theta_star, test, 0.0))
        rows[-1]["objective_gap"] = 0.0
        with tempfile.TemporaryDirectory() as folder:
            tmp = Path(folder)
            np.savez(tmp / "train.npz", X=train.X, y=train.y, groups=train.groups)
            np.savez(tmp / "test.npz", X=test.X, y=test.y, groups=test.groups)
            for epsilon in epsilons:
                for seed in seeds:
                    for J in MACHINES:
                        theta, sec = run_dpnet(train, test, name, J, epsilon, seed, tmp)
                        rows.append(_row(name, "dpnet record", J, epsilon, seed, theta, test, sec))
                        rows[-1]["objective_gap"] = objective(theta) - f_star
                    for method in BASELINES:
                        theta, sec = run_baseline(method, train, name, epsilon, seed)
                        rows.append(_row(name, method, 1, epsilon, seed, theta, test, sec))
                        rows[-1]["objective_gap"] = objective(theta) - f_star
                    print(f"{name} epsilon {epsilon} seed {seed} done", flush=True)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    write_csv(rows, OUT_DIR / "record_utility.csv")
    report(rows)


def read_csv(path: Path) -> list[dict[str, Any]]:
    import csv

    with path.open() as fh:
        rows: list[dict[str, Any]] = list(csv.DictReader(fh))
    for row in rows:
        for key in ("epsilon", "delta", "accuracy", "seconds", "objective_gap"):
            row[key] = float(row[key])
        row["J"], row["seed"] = int(row["J"]), int(row["seed"])
    return rows


def report(rows: list[dict[str, Any]]) -> None:
    """The table (printed and written) and the figure of ``rows``."""
    summary = summarise(rows)
    table = md_table(
        ["data", "method", "J", "epsilon", "accuracy", "objective gap", "seconds"],
        [
            [
                s["data"], s["method"], s["J"], _eps_text(s["epsilon"]),
                f"{s['accuracy']:.4f} ± {s['accuracy_sd']:.4f}",
                f"{s['objective_gap']:.4f}", f"{s['seconds']:.1f}",
            ]
            for s in summary
        ],
    )  # fmt: skip
    (OUT_DIR / "record_utility.md").write_text(table + "\n")
    print(table)
    plot(summary, OUT_DIR / "record_utility.png")
    print(f"wrote {OUT_DIR / 'record_utility.csv'}, .md and .png")


def _row(
    name: str, method: str, J: int, epsilon: float, seed: int, theta: np.ndarray,
    test: GroupData, seconds: float,
) -> dict[str, Any]:  # fmt: skip
    return {
        "data": name,
        "method": method,
        "J": J,
        "epsilon": epsilon,
        "delta": DELTA,
        "seed": seed,
        "accuracy": accuracy(test.X, test.y, theta),
        "seconds": seconds,
    }


def _eps_text(epsilon: float) -> str:
    return "∞" if math.isinf(epsilon) else f"{epsilon:g}"


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean over seeds per (data, method, J, epsilon)."""
    keys = list(dict.fromkeys((r["data"], r["method"], r["J"], r["epsilon"]) for r in rows))
    out = []
    for data, method, J, epsilon in keys:
        group = [
            r
            for r in rows
            if (r["data"], r["method"], r["J"], r["epsilon"]) == (data, method, J, epsilon)
        ]
        acc = np.array([r["accuracy"] for r in group])
        out.append(
            {
                "data": data,
                "method": method,
                "J": J,
                "epsilon": epsilon,
                "accuracy": float(acc.mean()),
                "accuracy_sd": float(acc.std(ddof=1)) if acc.size > 1 else 0.0,
                "objective_gap": float(np.mean([r["objective_gap"] for r in group])),
                "seconds": float(np.mean([r["seconds"] for r in group])),
            }
        )
    return out


def plot(summary: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(s["data"] for s in summary))
    fig, axes = plt.subplots(2, len(datasets), figsize=(6 * len(datasets), 8), squeeze=False)
    for col, data in enumerate(datasets):
        part = [s for s in summary if s["data"] == data]
        lines = dict.fromkeys((s["method"], s["J"]) for s in part if math.isfinite(s["epsilon"]))
        for method, J in lines:
            pts = [s for s in part if (s["method"], s["J"]) == (method, J)]
            label = f"{method} J={J}" if method == "dpnet record" else f"{method} (central)"
            eps = [s["epsilon"] for s in pts]
            axes[0, col].semilogx(eps, [s["accuracy"] for s in pts], "o-", label=label)
            axes[1, col].loglog(
                eps, [max(s["objective_gap"], 1e-6) for s in pts], "o-", label=label
            )
        best = [s for s in part if not math.isfinite(s["epsilon"])]
        if best:
            axes[0, col].axhline(best[0]["accuracy"], color="k", ls="--", label="non-private")
        axes[0, col].set(title=f"{data}: test accuracy (delta = 1e-5)", xlabel="epsilon")
        axes[1, col].set(title=f"{data}: objective gap F - F*", xlabel="epsilon")
        ticks = sorted({s["epsilon"] for s in part if math.isfinite(s["epsilon"])})
        for ax in axes[:, col]:
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
        axes[0, col].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
