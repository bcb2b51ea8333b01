"""Rounds to the 1e-4 and 1e-6 gaps in strong scaling under starting-penalty rules (batched
simulator, the job's data path).

    nice -n 10 python -m benchmarks.penalty_strong_scaling                 # the whole grid
    python -m benchmarks.penalty_strong_scaling --seeds 1 --runs 20:complete --rules spectral

Paper 3's Table 1 data (``benchmarks.scaling.job_argv``: synthetic model III, n = 10,000,
p = 48 in 16 groups, lambda = 0.1, privacy off, default solver) for data seeds ``--seeds``;
``--memset`` adds 10,000 rows of MEMset (5,000 per class of its training split, 7 groups of 4
one-hot columns), ``--adult`` 10,000 rows of Adult (a9a's training file, one group per
column, all-zero columns of the draw dropped), drawn per seed from ../shared/data
(``DPNET_DATA_DIR``), and ``--splice`` grplasso's 400 splice rows (MEMset's design) in an
order of the seed. Each is split over J machines as the job splits it (``--runs``
J:topology). For every rule of ``RULES`` the start c_0 is computed from the graph (J, its
Laplacian's extreme eigenvalues, its degree) and, for the curvature rules, from the features
only (:class:`Curvature`: the Gram of the centred columns and the ones column, all rows; public
under label privacy, no label enters), rounded to 3 significant digits and given as
``--c``; everything else (residual balancing, over-relaxation 1.5) is the default. Reported:
rounds from which the network objective stays within a relative gap of 1e-4 and of 1e-6 of
skglm's F* (runs end at a 1e-8 gap or ``--max-rounds``), and a table of seed means. Writes
benchmarks/out/<--output>.csv. docs/algorithms.md ("The penalty c", "Strong scaling") has the
results: the best start differs 4-8x between the data sets on the same graphs, so no rule of
the graph and sizes beats the spectral start on all of them; the features' curvature did
(``sqrtL-spec0.2``, the default under label privacy since 2026-12-03).

    nice -n 10 python -m benchmarks.penalty_strong_scaling --memset     # the docs' table

The curvature-scaled starts (docs/algorithms.md, "A start scaled by the features' curvature";
``CURVATURE_RULES`` on ``CURVATURE_RUNS``; ``benchmarks.penalty_curvature_weak`` has the
weak-scaling side):

    nice -n 19 python -m benchmarks.penalty_strong_scaling --curvature --memset --adult --splice
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from benchmarks.common import (
    DATA_DIR,
    OUT_DIR,
    batched_gaps,
    batched_to_optimum,
    first_round_within,
    reference_value,
    stacked_job,
    write_csv,
)
from benchmarks.scaling import job_argv
from dpnet.cli import parse_config, prepare_problem
from dpnet.decentralized import ADMMConfig, PublicColumns
from dpnet.decentralized.admm import CURVATURE_PENALTY_SCALE, PENALTY_SCALE, initial_penalty
from dpnet.decentralized.columns import ColumnMoments
from dpnet.network import build_topology, laplacian_extremes

GAPS = (1e-4, 1e-6)
NOT_PRIVATE = ("--epsilon", "inf")  # the non-private optimum (the job's default: epsilon 1)
N, N_GROUPS = 10_000, 16
RUNS = (
    "1:complete",
    "5:paper5",
    "5:complete",
    "10:complete",
    "20:complete",
    "40:complete",
    "10:ring",
    "20:ring",
    "16:grid",
    "20:random-regular",
    "40:erdos-renyi",
)


def spectral(graph: nx.Graph) -> float:
    """J sqrt(mu_2 mu_J) (1 for one machine): the current rule's denominator."""
    n_mach = graph.number_of_nodes()
    if n_mach == 1:
        return 1.0
    mu_2, mu_max = laplacian_extremes(graph)
    return n_mach * math.sqrt(mu_2 * mu_max)


def spectral_ratio(graph: nx.Graph) -> float:
    """mu_2 / mu_J (1 on a complete graph and for one machine, ~1.5e-4 on the 256-ring)."""
    if graph.number_of_nodes() == 1:
        return 1.0
    mu_2, mu_max = laplacian_extremes(graph)
    return mu_2 / mu_max


def closed_degree(graph: nx.Graph) -> float:
    """Mean closed-neighbourhood size 1 + 2|E| / J (J on a complete graph, 3 on a ring)."""
    return 1 + 2 * graph.number_of_edges() / graph.number_of_nodes()


def current(graph: nx.Graph) -> float:
    """The spectral start (``initial_penalty`` without the features' curvature: the default
    before 2026-12-03; the default under label privacy since is ``sqrtL-spec0.2``)."""
    return initial_penalty(ADMMConfig(), graph)


@dataclass(frozen=True)
class Curvature:
    """Public curvature measures of the features the machines fit (label privacy: the columns
    centred by their mean over all rows, then the ones column; all n rows; no label enters).
    ``gram_max``: lambda_max(X~^T X~) / n (4x the logistic loss's smoothness bound, 1 on
    centred binary or one-hot data, whose largest eigenvalue is the ones column's);
    ``gram_mean``: trace(X~^T X~) / (n (p + 1)) (the mean eigenvalue, 1 + the mean squared
    centred entry over p + 1); ``centred_max``: lambda_max of the centred columns' Gram / n
    (no ones column). ``gram_max`` is the job's ``columns.PublicColumns.curvature`` (every
    machine pools it at set-up since 2026-12-03)."""

    gram_max: float
    gram_mean: float
    centred_max: float

    @classmethod
    def of(cls, X: np.ndarray) -> Curvature:
        """Of the training rows ``X`` as given (all machines' rows)."""
        n = X.shape[0]
        aug = np.hstack([X - X.mean(axis=0), np.ones((n, 1))])
        gram = aug.T @ aug / n
        pooled = PublicColumns.pooled([ColumnMoments.of(X, 1)], n).curvature
        assert pooled is not None  # one machine's p^2 is within the pooled cap
        return cls(
            pooled,
            float(np.trace(gram) / gram.shape[0]),
            float(np.linalg.eigvalsh(gram[:-1, :-1])[-1]),
        )


HALF = CURVATURE_PENALTY_SCALE  # kappa' of the curvature rules: x 1/2 of the start on MEMset

# name -> c_0 from the graph and the features' public curvature (every rule is rounded to 3
# significant digits before use)
RULES: dict[str, Callable[[nx.Graph, Curvature], float]] = {
    "spectral": lambda g, k: current(g),
    # kappa x (mean closed degree)^0.2: x J^0.2 on complete graphs, x 1.25 on rings
    "deg0.2": lambda g, k: PENALTY_SCALE * closed_degree(g) ** 0.2 / spectral(g),
    # 2 kappa (mu_2 / mu_J)^0.1: x 2 on complete graphs, x 0.83 on the 256-ring
    "spec0.1": lambda g, k: 2 * PENALTY_SCALE * spectral_ratio(g) ** 0.1 / spectral(g),
    # a complete graph's J^2 replaced by J^1.5 (other graphs: the current start x sqrt(J))
    "sqrtJ": lambda g, k: PENALTY_SCALE * math.sqrt(g.number_of_nodes()) / spectral(g),
    # curvature-scaled starts, kappa' calibrated to x 1/2 of the current start on MEMset:
    # (a) the smoothness bound itself: x 8 on model III
    "L": lambda g, k: HALF * k.gram_max / spectral(g),
    # Shi et al.'s sqrt(m_f M_f) with M_f the public smoothness bound, m_f unknown and fixed:
    # x 1/2 on MEMset and Adult (gram_max = 1), x 2.0-2.1 on model III
    "sqrtL": lambda g, k: HALF * math.sqrt(k.gram_max) / spectral(g),
    # (b) the mean eigenvalue (x 1/2 on MEMset, x 0.30 on Adult, x 2.6 on model III)
    "sqrtT": lambda g, k: HALF * math.sqrt(k.gram_mean / 0.2008) / spectral(g),
    # (c) the centred columns alone (x 1/2 on MEMset, x 0.61 on Adult, x 2.6 on model III)
    "sqrtC": lambda g, k: HALF * math.sqrt(k.centred_max / 0.628) / spectral(g),
    # sqrtL x (mu_2 / mu_J)^0.1: as sqrtL on complete graphs, x 0.69 of it on the 20-ring
    "sqrtL-spec": lambda g, k: (
        HALF * math.sqrt(k.gram_max) * spectral_ratio(g) ** 0.1 / spectral(g)
    ),
    # sqrtL x (mu_2 / mu_J)^0.2: x 0.48 of sqrtL on the 20-ring, x 0.17 on the 256-ring
    # (the default under label privacy since 2026-12-03: the job's own formula)
    "sqrtL-spec0.2": lambda g, k: initial_penalty(ADMMConfig(feature_curvature=k.gram_max), g),
}


def times(factor: float) -> Callable[[nx.Graph, Curvature], float]:
    return lambda graph, k: factor * current(graph)


RULES |= {f"x{m:g}": times(m) for m in (0.25, 0.5, 1.5, 2, 4, 8, 16)}  # current x a constant
DEFAULT_RULES = ("spectral", "x0.5", "x2", "deg0.2", "spec0.1", "sqrtJ")
CURVATURE_RULES = ("spectral", "x0.5", "sqrtL", "sqrtT", "sqrtC", "sqrtL-spec", "sqrtL-spec0.2")
CURVATURE_RUNS = tuple(run for run in RUNS if run != "5:complete")


def f_star(argv: list[str]) -> tuple[float, Curvature, int]:
    """skglm's optimum and the features' public curvature (the job's training rows)."""
    config = parse_config(argv)
    train = prepare_problem(config, 1).shards
    assert train is not None
    assert train[0].columns is not None  # the fit centres the columns (label privacy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fstar = reference_value(train[0].X, train[0].y_raw, train[0].group_labels, config.lam)
    return fstar, Curvature.of(train[0].X), train[0].X.shape[0]


def run(argv: list[str], fstar: float, spec: str, c0: float, max_rounds: int) -> dict[str, Any]:
    n_mach, topology = int(spec.split(":")[0]), spec.split(":")[1]
    job = argv + ["--machines", str(n_mach), "--topology", topology]
    data, groups, config, graph = stacked_job(job, n_mach)
    config = replace(config, c=c0, max_rounds=max_rounds, tol=1e-12)
    result = batched_to_optimum(data, groups, config, graph, fstar)
    gaps = batched_gaps(result, fstar)
    out: dict[str, Any] = {f"rounds_to_{g:g}": first_round_within(*gaps, g) for g in GAPS}
    return out | {"rounds": result.rounds, "c_final": result.c_final, "adapted": result.n_adapted}


def data_sets(args: argparse.Namespace, tmp: Path) -> list[tuple[str, int, list[str]]]:
    """(name, seed, job argv) of every data set."""
    out = []
    for seed in args.seeds if args.synthetic else []:
        out.append(("model-III", seed, job_argv(N, N_GROUPS, seed, 1e-6, args.max_rounds)))
    if args.memset:
        from dpnet.data import load_memset

        for seed in args.seeds:
            train, _ = load_memset(
                DATA_DIR / "memset",
                n_train_pos=5000,
                n_train_neg=5000,
                rng=np.random.default_rng(seed),
            )
            path = tmp / f"memset{seed}.npz"
            np.savez(path, X=train.X, y=train.y, groups=train.groups)
            argv = ["--data", str(path), "--test-fraction", "0", "--seed", str(seed), *NOT_PRIVATE]
            out.append(("memset", seed, argv))
    if args.adult:
        from dpnet.data import load_adult

        X_all, y_all, _, _ = load_adult(DATA_DIR / "adult", intercept=False)
        for seed in args.seeds:
            pick = np.random.default_rng(seed).choice(len(y_all), size=N, replace=False)
            X = X_all[pick][:, X_all[pick].any(axis=0)]  # skglm fails on an all-zero column
            path = tmp / f"adult{seed}.npz"
            np.savez(path, X=X, y=y_all[pick], groups=np.arange(X.shape[1]))
            argv = ["--data", str(path), "--test-fraction", "0", "--seed", str(seed), *NOT_PRIVATE]
            out.append(("adult", seed, argv))
    if args.splice:
        X, y = splice(DATA_DIR / "splice_grplasso" / "splice_grplasso.csv.gz")
        for seed in args.seeds:  # all 400 rows, in an order of the seed
            order = np.random.default_rng(seed).permutation(len(y))
            path = tmp / f"splice{seed}.npz"
            np.savez(path, X=X[order], y=y[order], groups=np.repeat(np.arange(7), 4))
            argv = ["--data", str(path), "--test-fraction", "0", "--seed", str(seed), *NOT_PRIVATE]
            out.append(("splice", seed, argv))
    return out


def splice(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """grplasso's ``splice`` (400 MEMset rows, 200 per class) one-hot as ``load_memset``:
    7 positions x bases a, t, c, g; y 1 -> +1, 0 -> -1."""
    import gzip

    with gzip.open(path, "rt") as f:
        rows = [line.strip().split(",") for line in f][1:]
    bases = np.array([r[2:] for r in rows])
    X = (bases[:, :, None] == np.array(list("atcg"))).reshape(len(rows), 28).astype(float)
    return X, np.where(np.array([r[1] for r in rows]) == "1", 1.0, -1.0)


def fmt(value: Any) -> str:
    return "-" if value is None else str(value)


def markdown(rows: list[dict[str, Any]]) -> str:
    """Seed means of rounds to 1e-4 / 1e-6 per (data, J, topology) and rule ("-": a seed never
    reached the gap)."""
    rules = list(dict.fromkeys(r["rule"] for r in rows))
    cases = list(dict.fromkeys((r["data"], r["J"], r["topology"]) for r in rows))
    lines = [
        "| data | J | graph | " + " | ".join(rules) + " |",
        "|---|---|---|" + "---|" * len(rules),
    ]
    for data, n_mach, topology in cases:
        cells = []
        for rule in rules:
            runs = [
                r
                for r in rows
                if (r["data"], r["J"], r["topology"], r["rule"]) == (data, n_mach, topology, rule)
            ]
            means = []
            for gap in GAPS:
                got = [r[f"rounds_to_{gap:g}"] for r in runs]
                means.append("-" if None in got else f"{np.mean(got):.0f}")
            cells.append(" / ".join(means))
        lines.append(f"| {data} | {n_mach} | {topology} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=list(RUNS), help="J:topology")
    parser.add_argument("--rules", nargs="+", default=list(DEFAULT_RULES), choices=list(RULES))
    parser.add_argument(
        "--curvature", action="store_true", help="the curvature grid (CURVATURE_RUNS, _RULES)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--memset", action="store_true", help="MEMset rows too")
    parser.add_argument("--adult", action="store_true", help="Adult (a9a) rows too")
    parser.add_argument("--splice", action="store_true", help="grplasso's splice (400 rows) too")
    parser.add_argument(
        "--no-synthetic", dest="synthetic", action="store_false", help="MEMset only"
    )
    parser.add_argument("--max-rounds", type=int, default=1000)
    parser.add_argument("--output", default="penalty_strong_scaling")
    args = parser.parse_args()
    if args.curvature:
        args.runs, args.rules = list(CURVATURE_RUNS), list(CURVATURE_RULES)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, seed, argv in data_sets(args, Path(tmp)):
            fstar, curvature, n_rows = f_star(argv)
            print(f"{name} seed {seed}: {curvature}", flush=True)
            for spec in args.runs:
                n_mach, topology = int(spec.split(":")[0]), spec.split(":")[1]
                graph = build_topology(topology, n_mach, seed=0)  # the job's
                line = [f"{name} seed {seed} {spec:>18}"]
                done: dict[float, dict[str, Any]] = {}  # c_0 -> run (rules that coincide)
                for rule in args.rules:
                    start = time.perf_counter()
                    c0 = float(f"{RULES[rule](graph, curvature):.3g}")
                    if c0 not in done:
                        done[c0] = run(argv, fstar, spec, c0, args.max_rounds)
                    row = done[c0]
                    rows.append(
                        {"data": name, "seed": seed, "J": n_mach, "topology": topology}
                        | {"rows": n_rows, "rule": rule, "c0": c0}
                        | {f"curvature_{k}": v for k, v in vars(curvature).items()}
                        | row
                        | {"seconds": time.perf_counter() - start}
                    )
                    line.append(
                        f"{rule} c0={c0:.3g}: {fmt(row['rounds_to_0.0001'])}/"
                        f"{fmt(row['rounds_to_1e-06'])}"
                    )
                    write_csv(rows, OUT_DIR / f"{args.output}.csv")
                print("  ".join(line), flush=True)
    print(markdown(rows))


if __name__ == "__main__":
    main()
