"""Experiments of Chen & Lee (Rényi-DP ADMM): test accuracy, test objective and feature-selection
coverage against epsilon for ssADMM, DP-SGD, mpADMM, DP-ADMM and ADMM-objP, with the
non-private optimum (L-BFGS-B on w = u - v, an independent solver) and the majority class.

    python -m benchmarks.rdp_admm_experiments --mode quick   # < 5 min on 2 cores
    python -m benchmarks.rdp_admm_experiments --mode large   # Adult, 10-fold CV x 2, ~35 CPU-min
    python -m benchmarks.rdp_admm_experiments --mode full    # paper grid, 10 folds x 10 repeats

Settings: ``dpnet.baselines.rdp_admm.make_estimators`` (paper values and TUNED_SETTINGS, chosen
by benchmarks/rdp_admm_tuning.py on synthetic data only; no setting was chosen on Adult).
Data: Adult (a9a train + test, 48,842 rows, intercept column, rows divided by the public bound
sqrt(15) = max ones per row incl. intercept), the paper's synthetic design (40,000 rows; quick:
10,000; seeds other than the tuning's) and optionally a user-supplied IPUMS-BR file
(--ipums PATH). Writes benchmarks/out/rdp_admm_runs_MODE.csv (one row per fit),
rdp_admm_summary_MODE.csv (mean and standard error over folds x repeats) and one PNG per data
set and loss; prints the tables and the paired ssADMM - DP-SGD differences.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from benchmarks.common import DATA_DIR, write_csv
from dpnet.baselines.rdp_admm import COVERAGE_KS, make_estimators
from dpnet.baselines.rdp_admm.common import get_loss, objective
from dpnet.baselines.rdp_admm.data import coverage, make_synthetic
from dpnet.data import load_adult, load_ipums, scale_rows

DELTA = 1e-8
LAMBDAS = (1e-4, 1e-3)
MODES = {
    "quick": {
        "epsilons": (0.1, 0.5, 1.0),
        "folds": 3,
        "repeats": 1,
        "n_synthetic": 10_000,
        "synthetic_sets": 1,
        "losses": ("logistic",),
    },
    "large": {
        "epsilons": (0.1, 0.3, 0.5, 0.7, 1.0),
        "folds": 10,
        "repeats": 2,
        "n_synthetic": 40_000,
        "synthetic_sets": 0,
        "losses": ("logistic",),
    },
    "full": {
        "epsilons": tuple(np.round(np.arange(0.1, 1.01, 0.1), 1)),
        "folds": 10,
        "repeats": 10,
        "n_synthetic": 40_000,
        "synthetic_sets": 10,
        "losses": ("logistic", "huberized_hinge"),
    },
}


def data_dir() -> Path:
    """The default data folder (benchmarks.common.DATA_DIR: $DPNET_DATA_DIR, else
    ../shared/data next to the repository)."""
    return DATA_DIR


def nonprivate_optimum(loss_name: str, X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """argmin mean l + lam ||w||_1 by L-BFGS-B on w = u - v, u, v >= 0."""
    loss, p = get_loss(loss_name), X.shape[1]

    def fun(uv: np.ndarray) -> tuple[float, np.ndarray]:
        w = uv[:p] - uv[p:]
        m = y * (X @ w)
        g = X.T @ (y * loss.derivative(m)) / len(y)
        return float(loss.value(m).mean() + lam * uv.sum()), np.concatenate([g + lam, lam - g])

    res = minimize(
        fun,
        np.zeros(2 * p),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0, None)] * (2 * p),
        options={"ftol": 1e-13, "maxiter": 5000},
    )
    return res.x[:p] - res.x[p:]


def datasets(cfg: dict, ipums: str | None, seed: int, data: Path | None = None):
    """(name, X, y, is_synthetic) for every data set of the run (Adult under ``data``,
    default data_dir())."""
    directory = (data or data_dir()) / "adult"
    if "adult" in cfg["datasets"]:
        if (directory / "a9a.train.libsvm.gz").exists():
            Xtr, ytr, Xte, yte = load_adult(directory)
            yield (
                "adult",
                scale_rows(np.vstack([Xtr, Xte]), math.sqrt(15.0)),
                np.concatenate([ytr, yte]),
                False,
            )
        else:
            print(f"Adult not found under {directory}; skipped")
    for k in range(cfg["synthetic_sets"] if "synthetic" in cfg["datasets"] else 0):
        X, y = make_synthetic(cfg["n_synthetic"], rng=np.random.default_rng(seed + 1000 + k))
        yield f"synthetic{k}", X, y, True
    if ipums:
        # public bounds (--ipums-bounds), never the data's own column extremes
        X, y = load_ipums(ipums, bounds=cfg["ipums_bounds"])
        X = np.hstack([X, np.ones((len(y), 1))])
        yield "ipums", scale_rows(X, math.sqrt(X.shape[1])), y, False


def run(cfg: dict, ipums: str | None, seed: int, data: Path | None = None) -> list[dict]:
    rows: list[dict] = []
    for name, X, y, synthetic in datasets(cfg, ipums, seed, data):
        losses = ("logistic",) if synthetic else cfg["losses"]
        for rep in range(cfg["repeats"]):
            perm = np.random.default_rng(seed + rep).permutation(len(y))
            # equal folds (drop < folds random rows): one training size, one calibration
            folds = np.split(perm[: len(y) - len(y) % cfg["folds"]], cfg["folds"])
            for f, test in enumerate(folds):
                train = np.setdiff1d(perm[: len(y) - len(y) % cfg["folds"]], test)
                Xtr, ytr, Xte, yte = X[train], y[train], X[test], y[test]
                majority = max(np.mean(yte == 1), np.mean(yte == -1))
                for loss_name in losses:
                    loss = get_loss(loss_name)
                    for lam in LAMBDAS:
                        base = {
                            "dataset": name.rstrip("0123456789") if synthetic else name,
                            "loss": loss_name,
                            "lambda": lam,
                            "repeat": rep,
                            "fold": f,
                        }
                        w = nonprivate_optimum(loss_name, Xtr, ytr, lam)
                        rows.append(
                            {
                                **base,
                                "method": "non-private",
                                "epsilon": math.inf,
                                **metrics(loss, Xte, yte, w, lam, synthetic),
                            }
                        )
                        rows.append(
                            {
                                **base,
                                "method": "majority",
                                "epsilon": math.inf,
                                "test_accuracy": majority,
                            }
                        )
                        for eps in cfg["epsilons"]:
                            ests = make_estimators(
                                lam=lam,
                                epsilon=float(eps),
                                delta=DELTA,
                                seed=seed + 7919 * rep + 104729 * f,
                                loss=loss_name,
                            )
                            for method, est in ests.items():
                                est.fit(Xtr, ytr)
                                rows.append(
                                    {
                                        **base,
                                        "method": method,
                                        "epsilon": float(eps),
                                        "epsilon_rdp": est.privacy_["epsilon"],
                                        "epsilon_pld": est.privacy_["epsilon_pld"],
                                        **metrics(loss, Xte, yte, est.coef_, lam, synthetic),
                                    }
                                )
                print(f"{name} repeat {rep} fold {f} done", flush=True)
    return rows


def metrics(loss, X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float, synthetic: bool) -> dict:
    out = {
        "test_accuracy": float(np.mean(np.where(X @ w > 0, 1.0, -1.0) == y)),
        "test_objective": objective(loss, X, y, w, lam),
    }
    if synthetic:
        out.update({f"xi_{k}": coverage(w, k) for k in COVERAGE_KS})
    return out


def summarise(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["dataset"], r["loss"], r["lambda"], r["method"], r["epsilon"])].append(r)
    keys = ["test_accuracy", "test_objective", *(f"xi_{k}" for k in COVERAGE_KS)]
    out = []
    for (ds, loss, lam, method, eps), rs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        s = {
            "dataset": ds,
            "loss": loss,
            "lambda": lam,
            "method": method,
            "epsilon": eps,
            "runs": len(rs),
        }
        for k in keys:
            v = np.array([r[k] for r in rs if k in r], dtype=float)
            if v.size:
                s[f"{k}_mean"] = float(v.mean())
                s[f"{k}_se"] = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0
        out.append(s)
    return out


def plot(summary: list[dict], out: Path, mode: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    combos = sorted({(s["dataset"], s["loss"]) for s in summary})
    for ds, loss in combos:
        synthetic = ds == "synthetic"
        metrics_ = ["test_accuracy", "test_objective"] + (["xi_30"] if synthetic else [])
        fig, axes = plt.subplots(
            len(metrics_), len(LAMBDAS), figsize=(10, 3.2 * len(metrics_)), squeeze=False
        )
        for j, lam in enumerate(LAMBDAS):
            sel = [s for s in summary if (s["dataset"], s["loss"], s["lambda"]) == (ds, loss, lam)]
            for i, m in enumerate(metrics_):
                ax = axes[i][j]
                for method in sorted({s["method"] for s in sel}):
                    pts = sorted(
                        (s["epsilon"], s.get(f"{m}_mean"))
                        for s in sel
                        if s["method"] == method and s.get(f"{m}_mean") is not None
                    )
                    if not pts:
                        continue
                    if math.isinf(pts[0][0]):
                        ax.axhline(
                            pts[0][1],
                            ls="--",
                            lw=1,
                            label=method,
                            color="grey" if method == "majority" else "black",
                        )
                    else:
                        ax.plot(*zip(*pts, strict=True), marker="o", label=method)
                ax.set_xlabel("epsilon (delta = 1e-8)")
                ax.set_ylabel(m)
                ax.set_title(f"{ds}, {loss}, lambda = {lam:g}")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / f"rdp_admm_{ds}_{loss}_{mode}.png", dpi=110)
        plt.close(fig)


def paired_comparison(rows: list[dict]) -> None:
    """ssADMM minus DP-SGD per fit pair (same fold, repeat, lambda, epsilon): mean +- se."""
    pairs: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        if r["method"] in ("ssADMM", "DP-SGD"):
            key = (r["dataset"], r["loss"], r["lambda"], r["epsilon"], r["repeat"], r["fold"])
            pairs[key][r["method"]] = r
    diffs: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for key, pair in pairs.items():
        a, b = pair["ssADMM"], pair["DP-SGD"]
        diffs[key[:4]].append(
            (a["test_accuracy"] - b["test_accuracy"], a["test_objective"] - b["test_objective"])
        )
    print("\nssADMM - DP-SGD, paired over folds x repeats: accuracy, objective (mean +- se)")
    for key in sorted(diffs):
        d = np.array(diffs[key])
        se = d.std(axis=0, ddof=1) / math.sqrt(len(d)) if len(d) > 1 else np.zeros(2)
        print(
            f"  {key[0]:9s} {key[1]:15s} lambda = {key[2]:g}, eps = {key[3]:g}: "
            f"{d[:, 0].mean():+.4f} +- {se[0]:.4f}, {d[:, 1].mean():+.4f} +- {se[1]:.4f}"
        )


def report(summary: list[dict], rows: list[dict]) -> None:
    """The checks of issue 5: ssADMM on Adult at eps = 1, lambda = 1e-4, and ssADMM vs DP-SGD."""

    def get(ds, loss, lam, method, eps):
        for s in summary:
            if (s["dataset"], s["loss"], s["lambda"], s["method"]) == (ds, loss, lam, method):
                if s["epsilon"] == eps or (math.isinf(eps) and math.isinf(s["epsilon"])):
                    return s
        return None

    for ds, loss in sorted({(s["dataset"], s["loss"]) for s in summary}):
        for lam in LAMBDAS:
            eps_list = sorted(
                {
                    s["epsilon"]
                    for s in summary
                    if s["dataset"] == ds and not math.isinf(s["epsilon"])
                }
            )
            print(f"\n{ds}, {loss}, lambda = {lam:g}: accuracy (objective) mean +- se")
            for method in ("ssADMM", "DP-SGD", "mpADMM", "DP-ADMM", "ADMM-objP"):
                cells = []
                for eps in eps_list:
                    s = get(ds, loss, lam, method, eps)
                    cells.append(
                        f"{s['test_accuracy_mean']:.4f}+-{s['test_accuracy_se']:.4f}"
                        f" ({s['test_objective_mean']:.4f})"
                        if s
                        else "-"
                    )
                print(f"  {method:10s} " + " | ".join(cells))
            for ref in ("non-private", "majority"):
                s = get(ds, loss, lam, ref, math.inf)
                if s:
                    print(f"  {ref:10s} {s['test_accuracy_mean']:.4f}")
    paired_comparison(rows)
    s = get("adult", "logistic", 1e-4, "ssADMM", 1.0)
    if s:
        verdict = "meets" if s["test_accuracy_mean"] >= 0.82 else "misses"
        print(
            f"\nAdult, eps = 1, lambda = 1e-4: ssADMM accuracy {s['test_accuracy_mean']:.4f}"
            f" ({verdict} the 0.82 goal)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=sorted(MODES), default="quick")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    ap.add_argument("--ipums", default=None, help="user-supplied IPUMS-BR file (optional)")
    ap.add_argument(
        "--ipums-bounds",
        default="0,1",
        help="public LOWER,UPPER feature bounds for --ipums (scaled to [0, 1])",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--datasets", default="adult,synthetic", help="comma-separated subset")
    ap.add_argument("--losses", default=None, help="override, e.g. huberized_hinge")
    ap.add_argument("--folds", type=int, default=None, help="override the mode's folds")
    ap.add_argument("--repeats", type=int, default=None, help="override the mode's repeats")
    args = ap.parse_args()
    cfg = {
        **MODES[args.mode],
        "datasets": tuple(args.datasets.split(",")),
        "ipums_bounds": tuple(float(b) for b in args.ipums_bounds.split(",")),
    }
    for key in ("folds", "repeats"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if args.losses:
        cfg["losses"] = tuple(args.losses.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    rows = run(cfg, args.ipums, args.seed)
    summary = summarise(rows)
    write_csv(rows, args.out / f"rdp_admm_runs_{args.mode}.csv")
    write_csv(summary, args.out / f"rdp_admm_summary_{args.mode}.csv")
    plot(summary, args.out, args.mode)
    report(summary, rows)
    print(f"\n{len(rows)} rows in {time.time() - start:.0f} s; outputs in {args.out}")


if __name__ == "__main__":
    main()
