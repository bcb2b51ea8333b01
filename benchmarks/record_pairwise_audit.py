"""What a machine at graph distance k observes of another machine's record: an empirical audit.

The record-level guarantee of ``--privacy record`` (docs/privacy.md) is a worst case: the same
(epsilon, delta) against every other machine, colluding or not. A machine far from machine 0
sees machine 0's record only through its own neighbours' messages, which mix machine 0's noisy
thetas with every machine in between's noise. This script measures that, as an empirical
audit (a lower bound on what each observer could learn, not a guarantee):

- a path 0 - 1 - 2 - 3, machine 0 holding D or D' (one record R e_0 replaced by -R e_0), the
  other machines fixed shards; the record-private ADMM with its defaults, T rounds, on the
  simulator (the real release path, every machine's own noise streams);
- observer k (machine k) sees only the messages it receives: its neighbours' released thetas
  (and Z's, which are functions of released thetas; the test reads the thetas) in every round;
- on one half of the runs it fits the best linear test (Fisher's discriminant with a ridge:
  the mean difference of its observations under D and D', whitened by their pooled
  covariance); on the other half :func:`dpnet.audit.audit_epsilon` turns that test into a
  lower bound on epsilon at delta, with Clopper-Pearson confidence 0.95;
- the strongest observer knows the inputs of machine 0's theta steps and uses the likelihood
  ratio of its thetas (as in tests/test_record_privacy.py): on this path machine 1 alone is
  one (machine 0's centre is computed from Z_0, Z_1 and the thetas machine 1 receives).

    python -m benchmarks.record_pairwise_audit [--runs N] [--epsilon E] [--rounds T]

Writes benchmarks/out/record_pairwise_audit.csv and prints the table.
"""

from __future__ import annotations

import argparse
import time

import networkx as nx
import numpy as np

from benchmarks.common import OUT_DIR, md_table, write_csv
from dpnet.audit import audit_epsilon
from dpnet.decentralized import batched
from dpnet.decentralized.admm import ADMMConfig
from dpnet.decentralized.batched import StackedShards, run_batched
from dpnet.decentralized.record import RecordNoise
from dpnet.decentralized.steps import GroupStructure, LocalData
from dpnet.losses.margin import Logistic
from dpnet.privacy.gaussian import composed_gaussian_multiplier
from tests.record_attack import theta_likelihood_ratio

R, DIM, ROWS, J, DELTA = 3.0, 3, 8, 4, 1e-5
GROUPS = GroupStructure(np.arange(DIM + 1), np.arange(DIM), np.full(DIM, 0.01 / (2 * J)))


def shard(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.standard_normal((ROWS, DIM))
    X *= R / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), R)
    return X, np.where(rng.random(ROWS) < 0.5, 1.0, -1.0)


def local(X: np.ndarray, y: np.ndarray) -> LocalData:
    return LocalData(np.hstack([X, np.ones((X.shape[0], 1))]), y, J * ROWS, Logistic())


def problem() -> tuple[tuple[LocalData, LocalData], list[LocalData]]:
    """Machine 0's two neighbouring shards and the other machines' fixed shards."""
    rng = np.random.default_rng(21)
    X, y = shard(rng)
    X[0], y[0] = R * np.eye(DIM)[0], 1.0
    X1 = X.copy()
    X1[0] = -X[0]
    return (local(X, y), local(X1, y)), [local(*shard(rng)) for _ in range(J - 1)]


def simulate(truth: int, runs: int, epsilon: float, rounds: int, seed0: int) -> dict:
    """Per run: each observer's view (its neighbours' thetas and Z's, all rounds) and the
    colluders' likelihood-ratio statistic of machine 0's thetas."""
    pair, others = problem()
    graph = nx.path_graph(J)
    s = composed_gaussian_multiplier(epsilon, DELTA, rounds)
    one = [StackedShards.stack([d]) for d in pair]
    thetas: list[np.ndarray] = []
    inputs: list[tuple[np.ndarray, float]] = []
    real_release = batched.private_thetas_batched

    def release(noise, data, center, rho, theta_prev, round_):
        out = real_release(noise, data, center, rho, theta_prev, round_)
        thetas.append(out.copy())
        inputs.append((center[0].copy(), float(rho[0])))
        return out

    views = {k: [] for k in range(1, J)}
    llr = np.empty(runs)
    batched.private_thetas_batched = release
    try:
        for r in range(runs):
            thetas.clear(), inputs.clear()
            noise = RecordNoise(s, R, seed=seed0 + r)
            config = ADMMConfig(max_rounds=rounds, tol=1e-300, record=noise, adapt_c=False)
            run_batched([pair[truth], *others], GROUPS, config, graph)
            th = np.stack(thetas)  # (rounds, J, dim)
            for k in range(1, J):
                nbrs = [i for i in graph.neighbors(k)]
                views[k].append(th[:, nbrs].ravel())  # the Z's are functions of thetas
            observed = [(c, rho, t) for (c, rho), t in zip(inputs, th[:, 0], strict=True)]
            scale = s * noise.numerator(J * ROWS, 1.0)
            total = theta_likelihood_ratio(observed, one, lambda rho, a=scale: a / rho)
            llr[r] = total
    finally:
        batched.private_thetas_batched = real_release
    return {"views": {k: np.array(v) for k, v in views.items()}, "llr": llr}


def fisher_statistics(v0: np.ndarray, v1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fit w on the first half of each, return w . x on the second halves."""
    h0, h1 = v0.shape[0] // 2, v1.shape[0] // 2
    a, b = v0[:h0], v1[:h1]
    cov = np.cov(np.vstack([a - a.mean(0), b - b.mean(0)]).T)
    cov += 1e-6 * np.trace(cov) / cov.shape[0] * np.eye(cov.shape[0])
    w = np.linalg.solve(cov, b.mean(0) - a.mean(0))
    return v0[h0:] @ w, v1[h1:] @ w


def lower_bound(s0: np.ndarray, s1: np.ndarray) -> float:
    queues = {0: iter(s0), 1: iter(s1)}
    return audit_epsilon(
        lambda d, rng: next(queues[d]),
        0,
        1,
        n_trials=min(s0.size, s1.size),
        rng=np.random.default_rng(0),
        delta=DELTA,
    ).epsilon_lower


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000, help="runs per hypothesis")
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    start = time.perf_counter()
    sims = [simulate(t, args.runs, args.epsilon, args.rounds, 10**6 * (t + 1)) for t in (0, 1)]
    rows = [
        {
            "observer": "machine 1, likelihood ratio of machine 0's thetas (knows their inputs)",
            "distance": 1,
            "epsilon_lower": lower_bound(sims[0]["llr"], sims[1]["llr"]),
        }
    ]
    for k in range(1, J):
        s0, s1 = fisher_statistics(sims[0]["views"][k], sims[1]["views"][k])
        rows.append(
            {
                "observer": f"machine {k}, linear test of its neighbours' thetas",
                "distance": k,
                "epsilon_lower": lower_bound(s0, s1),
            }
        )
    for row in rows:
        row |= {"epsilon_claimed": args.epsilon, "delta": DELTA, "rounds": args.rounds}
        row |= {"runs_per_hypothesis": args.runs}
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    write_csv(rows, OUT_DIR / "record_pairwise_audit.csv")
    print(
        md_table(
            ["observer", "distance", "epsilon lower bound (95 %)", "claimed"],
            [
                [r["observer"], r["distance"], f"{r['epsilon_lower']:.2f}", f"{args.epsilon:g}"]
                for r in rows
            ],
        )
    )
    print(f"{time.perf_counter() - start:.0f} s; wrote {OUT_DIR / 'record_pairwise_audit.csv'}")


if __name__ == "__main__":
    main()
