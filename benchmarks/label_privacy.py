"""Accuracy of the label-private decentralized group-lasso logistic fit against epsilon
(paper 3, section 3.2, Fig. 6), naive logistic loss vs the unbiased (Natarajan et al.) loss,
and the non-private sparsity/accuracy trade-off over lambda on MEMset (Fig. 5).

    nice -n 10 python -m benchmarks.label_privacy                # 5 repeats
    nice -n 10 python -m benchmarks.label_privacy --mode full    # 50 repeats, as the paper

J = 5 machines on the paper's graph (paper5), in-process backend, c = 0.01 (the paper's
MEMset value; adapted by residual balancing). Every machine applies randomized response with
budget epsilon to its own labels (epsilon-label-DP per machine). MEMset: 16,000 train
(8,000 + 8,000) / 8,000 test rows drawn afresh in every repeat from
../shared/data/memset (skipped if absent; DPNET_DATA_DIR overrides). Synthetic: model III
with Bernoulli labels, --n-train / --n-test rows, fresh in every repeat. A repeat shares its
data between the non-private fit and every (epsilon, loss) fit; the RR draws differ.
For the unbiased loss, the recession slope of its objective along the fitted direction is
recorded: negative means the objective is unbounded below (no minimiser; the iterates run off).

Writes benchmarks/out/label_privacy_{mode}.csv (one row per fit),
label_privacy_{mode}_summary.csv, lambda_path_{mode}.csv and label_privacy_{mode}.png.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import EPS_GRID, MEMSET_PATH, OUT_DIR, write_csv
from dpnet.data import GroupData, load_memset, make_group_logistic, split_rows
from dpnet.estimators import DecentralizedGroupLassoLogistic
from dpnet.privacy import randomized_response
from dpnet.streams import machine_flip_stream

MODES = {"quick": 5, "full": 50}
LOSSES = ("logistic", "unbiased")
LAM_PATH = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3)
SELECT_RTOL = 1e-6
J = 5


def rr_labels(y: np.ndarray, keep_prob: float, seed: int) -> np.ndarray:
    """The labels the machines trained on: each machine's RR with its own stream, exactly as
    dpnet.cli.job.block_main draws them (the seed is known to the benchmark, not to an attacker
    who lacks it)."""
    out = y.copy()
    for rank, idx in enumerate(split_rows(len(y), J)):
        stream = machine_flip_stream(seed, rank)
        out[idx] = randomized_response(y[idx], keep_prob=keep_prob, rng=stream)[0]
    return out


def recession_slope(
    X: np.ndarray,
    y_rr: np.ndarray,
    groups: np.ndarray,
    lam: float,
    keep_prob: float,
    theta: np.ndarray,
) -> float:
    """lim_{t->inf} F_u(t d) / t along d = theta / ||theta|| of the unbiased objective
    F_u = (1/n) sum l_u(y~ x~^T theta) + (lam/2) sum_g ||beta_g||, l_u(m) = l(m) - k m with
    k = (1-p)/(2p-1): (1/n) sum [max(0, -m_i) - k m_i] + (lam/2) sum_g ||d_g||, m_i = y~ x~^T d.
    Negative: F_u is unbounded below along d, so there is no minimiser to converge to."""
    d = theta / np.linalg.norm(theta)
    m = y_rr * (X @ d[:-1] + d[-1])
    k = (1 - keep_prob) / (2 * keep_prob - 1)
    pen = sum(np.linalg.norm(d[:-1][groups == g]) for g in np.unique(groups))
    return float(np.mean(np.maximum(0.0, -m) - k * m) + lam / 2 * pen)


def fit_eval(
    train: GroupData,
    test: GroupData,
    *,
    lam: float,
    epsilon: float,
    loss: str,
    seed: int,
    tol: float,
    max_rounds: int,
) -> dict[str, Any]:
    """Fit on ``train`` with J = 5 on paper5, return test accuracy and solver diagnostics."""
    est = DecentralizedGroupLassoLogistic(
        lam,
        epsilon=epsilon,
        topology="paper5",
        n_machines=J,
        loss=loss,
        c=0.01,
        tol=tol,
        max_rounds=max_rounds,
        random_state=seed,
        groups=train.groups,
    )
    start = time.perf_counter()
    est.fit(train.X, train.y)
    seconds = time.perf_counter() - start
    norms = np.array([np.linalg.norm(est.coef_[train.groups == g]) for g in range(train.n_groups)])
    scale = max(1.0, float(np.linalg.norm(est.coef_)))
    slope = math.nan
    if loss == "unbiased" and math.isfinite(epsilon):
        p = math.exp(epsilon) / (1 + math.exp(epsilon))
        slope = recession_slope(
            train.X,
            rr_labels(train.y, p, seed),
            train.groups,
            lam,
            p,
            np.append(est.coef_, est.intercept_),
        )
    return {
        "accuracy": float(np.mean(est.predict(test.X) == test.y)),
        "rounds": est.n_iter_,
        "stop_reason": est.stop_reason_,
        "groups_selected": int(np.sum(norms > SELECT_RTOL * scale)),
        "nonzero_coefs": int(np.sum(np.abs(est.coef_) > SELECT_RTOL * scale)),
        "coef_norm": float(np.linalg.norm(est.coef_)),
        "intercept": est.intercept_,
        "recession_slope": slope,
        "objective_on_rr_labels": est.objective_,
        # an oracle (raw labels): the benchmark is a simulation, not a release
        "flip_fraction": float(
            np.mean(rr_labels(train.y, est.privacy_["keep_prob"], seed) != train.y)
        )
        if math.isfinite(epsilon)
        else 0.0,
        "seconds": seconds,
    }


def data_sources(
    n_train: int, n_test: int, seed: int, memset_path: Path = MEMSET_PATH
) -> dict[str, Callable[[int], Any]]:
    """name -> (repeat -> (train, test)); MEMset only when its file is present."""

    def synthetic(rep: int) -> tuple[GroupData, GroupData]:
        rng = np.random.default_rng([seed, rep, 1])
        return (make_group_logistic(n_train, rng=rng), make_group_logistic(n_test, rng=rng))

    sources: dict[str, Callable[[int], Any]] = {}
    if memset_path.is_file():
        sources["memset"] = lambda rep: load_memset(
            memset_path, rng=np.random.default_rng([seed, rep, 0])
        )
    else:
        print(f"MEMset not found at {memset_path}: skipping it", flush=True)
    sources["synthetic"] = synthetic
    return sources


def epsilon_sweep(
    sources: dict[str, Callable[[int], Any]],
    repeats: int,
    lams: dict[str, float],
    seed: int,
    tol: float,
    max_rounds: int,
) -> list[dict[str, Any]]:
    rows = []
    for name, draw in sources.items():
        for rep in range(repeats):
            train, test = draw(rep)
            common = {"lam": lams[name], "tol": tol, "max_rounds": max_rounds}
            fits = [("non-private", math.inf, "logistic")] + [
                (loss, eps, loss) for eps in EPS_GRID for loss in LOSSES
            ]
            for k, (method, eps, loss) in enumerate(fits):
                res = fit_eval(
                    train,
                    test,
                    epsilon=eps,
                    loss=loss,
                    seed=seed * 1_000_003 + rep * 1000 + k,
                    **common,
                )
                rows.append(
                    {
                        "dataset": name,
                        "repeat": rep,
                        "method": method,
                        "epsilon": eps,
                        "lam": lams[name],
                        **res,
                    }
                )
            last = rows[-2 * len(EPS_GRID) - 1 :]
            print(
                f"{name} repeat {rep}: non-private {last[0]['accuracy']:.4f}; eps 0.1 naive "
                f"{last[1]['accuracy']:.4f}, unbiased {last[2]['accuracy']:.4f}; "
                f"{sum(r['seconds'] for r in last):.1f} s",
                flush=True,
            )
    return rows


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    keys = dict.fromkeys((r["dataset"], r["method"], r["epsilon"]) for r in rows)
    for dataset, method, eps in keys:
        sel = [
            r for r in rows if (r["dataset"], r["method"], r["epsilon"]) == (dataset, method, eps)
        ]
        acc = np.array([r["accuracy"] for r in sel])
        out.append(
            {
                "dataset": dataset,
                "method": method,
                "epsilon": eps,
                "runs": len(sel),
                "accuracy_mean": float(acc.mean()),
                "accuracy_sd": float(acc.std(ddof=1)) if len(acc) > 1 else math.nan,
                "accuracy_min": float(acc.min()),
                "groups_selected_mean": float(np.mean([r["groups_selected"] for r in sel])),
                "rounds_median": float(np.median([r["rounds"] for r in sel])),
                "hit_max_rounds": sum(r["stop_reason"] != "converged" for r in sel),
                "coef_norm_median": float(np.median([r["coef_norm"] for r in sel])),
                "coef_norm_max": float(np.max([r["coef_norm"] for r in sel])),
                "unbounded_runs": sum(r["recession_slope"] < 0 for r in sel),
                "seconds_mean": float(np.mean([r["seconds"] for r in sel])),
            }
        )
    return out


def lambda_path(
    draw: Callable[[int], Any], seed: int, tol: float, max_rounds: int
) -> list[dict[str, Any]]:
    """Non-private MEMset fits along LAM_PATH on the repeat-0 split (paper's Fig. 5)."""
    train, test = draw(0)
    rows = []
    for lam in LAM_PATH:
        res = fit_eval(
            train,
            test,
            lam=lam,
            epsilon=math.inf,
            loss="logistic",
            seed=seed,
            tol=tol,
            max_rounds=max_rounds,
        )
        rows.append({"lam": lam, **res})
        print(
            f"lambda {lam:g}: accuracy {res['accuracy']:.4f}, {res['groups_selected']} of "
            f"{train.n_groups} groups, {res['nonzero_coefs']} nonzero coefficients, "
            f"{res['rounds']} rounds",
            flush=True,
        )
    return rows


def plot(summary: list[dict[str, Any]], path_rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in summary))
    panels = len(datasets) + (1 if path_rows else 0)
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.2), squeeze=False)
    for ax, name in zip(axes[0], datasets, strict=False):
        for method, style in (("logistic", "o-"), ("unbiased", "s-")):
            sel = [r for r in summary if r["dataset"] == name and r["method"] == method]
            ax.errorbar(
                [r["epsilon"] for r in sel],
                [r["accuracy_mean"] for r in sel],
                yerr=[r["accuracy_sd"] for r in sel],
                fmt=style,
                capsize=3,
                label="naive logistic loss" if method == "logistic" else "unbiased loss",
            )
        base = next(r for r in summary if r["dataset"] == name and r["method"] == "non-private")
        ax.axhline(base["accuracy_mean"], color="k", ls="--", label="non-private")
        ax.set(
            xlabel="epsilon (label-DP per machine)",
            ylabel="test accuracy",
            title=f"{name}: J=5 paper5, {base['runs']} repeats (mean +- sd)",
        )
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    if path_rows:
        ax = axes[0][-1]
        lams = [r["lam"] for r in path_rows]
        ax.semilogx(lams, [r["accuracy"] for r in path_rows], "o-", label="test accuracy")
        ax.set(xlabel="lambda", ylabel="test accuracy", title="MEMset, non-private: lambda path")
        twin = ax.twinx()
        twin.semilogx(
            lams,
            [r["nonzero_coefs"] for r in path_rows],
            "s--",
            color="C1",
            label="nonzero coefficients",
        )
        twin.set_ylabel("nonzero coefficients (of 28)")
        ax.legend(loc="lower left", fontsize=8)
        twin.legend(loc="upper right", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="quick")
    parser.add_argument("--repeats", type=int, default=None, help="override the mode's count")
    parser.add_argument("--lam-memset", type=float, default=0.01)
    parser.add_argument("--lam-synthetic", type=float, default=0.1)
    parser.add_argument("--n-train", type=int, default=2000, help="synthetic training rows")
    parser.add_argument("--n-test", type=int, default=2000, help="synthetic test rows")
    parser.add_argument("--tol", type=float, default=1e-5)
    parser.add_argument("--max-rounds", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--datasets", default="memset,synthetic", help="comma-separated subset of memset, synthetic"
    )
    parser.add_argument("--skip-path", action="store_true", help="no lambda path")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    repeats = args.repeats or MODES[args.mode]
    wanted = args.datasets.split(",")
    sources = {
        k: v for k, v in data_sources(args.n_train, args.n_test, args.seed).items() if k in wanted
    }
    path_rows = (
        []
        if args.skip_path or "memset" not in sources
        else lambda_path(sources["memset"], args.seed, args.tol, args.max_rounds)
    )
    rows = epsilon_sweep(
        sources,
        repeats,
        {"memset": args.lam_memset, "synthetic": args.lam_synthetic},
        args.seed,
        args.tol,
        args.max_rounds,
    )
    summary = summarise(rows)
    stem = (
        f"label_privacy_{args.mode}"
        + ("" if args.repeats is None else f"_r{repeats}")
        + ("" if len(wanted) == 2 else f"_{'_'.join(wanted)}")
    )
    write_csv(rows, args.out / f"{stem}.csv")
    write_csv(summary, args.out / f"{stem}_summary.csv")
    if path_rows:
        write_csv(path_rows, args.out / f"lambda_path_{args.mode}.csv")
    plot(summary, path_rows, args.out / f"{stem}.png")
    for r in summary:
        print(
            f"{r['dataset']:9s} {r['method']:11s} eps {r['epsilon']:<4} accuracy "
            f"{r['accuracy_mean']:.4f} +- {r['accuracy_sd']:.4f} (min {r['accuracy_min']:.4f})"
            f", groups {r['groups_selected_mean']:.1f}, rounds {r['rounds_median']:.0f}, "
            f"max-rounds hits {r['hit_max_rounds']}, |coef| max {r['coef_norm_max']:.3g}, "
            f"unbounded {r['unbounded_runs']}"
        )
    print(f"wrote {args.out / stem}.csv, _summary.csv, .png")


if __name__ == "__main__":
    main()
