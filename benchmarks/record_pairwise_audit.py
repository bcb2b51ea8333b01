"""What a machine at graph distance k learns of another machine's record: an empirical audit.

The record-level guarantee of ``--privacy record`` (docs/privacy.md) is the same
(epsilon, delta) against every other machine, near or far; no distance discount is claimed.
This script measures what each machine of a path learns from **every message it receives**,
as an empirical lower bound (what these attacks learn, not what every attack could):

- a path 0 - 1 - 2 - 3; machine u = 3 (the far end from rank 0) holds D or D' (one record
  R e_0 replaced by -R e_0), the others fixed shards; the record-private ADMM (its defaults,
  c fixed as under ``--privacy record``), T rounds, on the simulator (:func:`run_batched`:
  the real release path, every machine's own noise streams);
- the views are **reconstructed from the simulator's per-round state exactly as the round
  loop sends them** (the simulator has no message hook): the round loop's
  (:func:`dpnet.decentralized.admm.run_block`'s) ``private_thetas`` and :func:`z_update` are
  wrapped (called through, whatever they compute) to keep every round's released thetas,
  their centres and penalties, and the Z's; the stop statistics are what the round loop
  computes from them (released loss withheld + group penalty, scaled residual, primal, dual,
  ||theta||), passed through one
  :class:`TreeAggregator` per machine, outgoing before receive, as in the round loop.
  tests/test_record_pairwise_audit.py checks these views against the buffers the real round
  loop (threads) receives, to the simulator's rounding (relative 1e-7);
- machine k's view, per round: from each neighbour i the two buffers the round loop
  exchanges, Z_i and [theta_i, the stop-statistics part: U_i, down index, G]; its own
  sent theta_k and Z_k; rank 0 (machine 0) also the final gather of every machine's result
  (theta and Z of the last round; the rest of a MachineResult is public or the same G's,
  and its timings are outside the guarantee and not simulated).

The attacks, per observer:

- Fisher: the best linear test of the full view (the mean difference under D and D'
  whitened by the pooled covariance, with a small ridge), fitted on half of the runs;
- distance 1 (machine 2): the likelihood ratio of u's received thetas, with u's theta-step
  inputs (centre, rho) replayed from the thetas it knows (u's centre depends only on the
  thetas of machines 1, 2, 3);
- distance 2 (machine 1): a reconstruction: Z_2 = S(u_2) / (3c) with
  u_2 = sum_{i in {1,2,3}} (c theta_i - V_2i), the V_2i sums of earlier Z_2 and thetas, so
  theta_u(t) = the sum over machine 2's closed neighbourhood, rebuilt from Z_2(t + 1) (the
  group soft-threshold inverted: exact wherever Z_2's group is non-zero, the intercept
  always), minus theta_1 (own) and theta_2 (received). Then the same likelihood ratio as at
  distance 1, over rounds 1 .. T - 1;
- distance 3 (rank 0): theta_2 rebuilt from Z_1 the same way; u's group penalty
  sum_g t_g ||theta_u,g|| of every round s <= T - 3 read off the up-wave U_1 (the sum over
  machines 1, 2, 3 minus the two it knows) and u's ||theta||, residuals through the maxima;
  u's last theta and Z from the final gather. The test: Fisher on that reconstructed view.

Each statistic is turned into a lower bound on epsilon at delta by :func:`audit_epsilon`
(Clopper-Pearson, 95 %) on runs not used to fit it. Beside it: mu, the separation of the
statistic's means under D and D' in pooled standard deviations, and the epsilon at delta of
mu-GDP (a point estimate, which assumes the statistic Gaussian; the claimed guarantee is
mu = 1 / gaussian_sigma(epsilon, delta)).

    python -m benchmarks.record_pairwise_audit [--runs N] [--epsilon E] [--rounds T]

Writes benchmarks/out/record_pairwise_audit.csv and prints the table; the defaults (4000 runs
per hypothesis, epsilon 8, T = 10) take about 6 minutes on one core. The table is in
docs/privacy.md, "Beyond the worst case: what a machine at distance k observes".
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import OUT_DIR, md_table, write_csv
from devtools.record_pairwise_audit import (
    DELTA,
    fisher_statistics,
    gdp_epsilon,
    lower_bound,
    separation,
    simulate,
)
from dpnet.privacy import composed_gaussian_multiplier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000, help="runs per hypothesis")
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    start = time.perf_counter()
    sims = [simulate(t, args.runs, args.epsilon, args.rounds, 10**6 * (t + 1)) for t in (0, 1)]
    tests = [
        (2, 1, "likelihood ratio of u's received thetas, centres replayed", "llr_d1", False),
        (2, 1, "Fisher, full view", ("full", 2), True),
        (1, 2, "likelihood ratio of u's thetas rebuilt from Z_2", "llr_d2", False),
        (1, 2, "Fisher, full view", ("full", 1), True),
        (0, 3, "Fisher, rebuilt view (theta_2, u's penalty, final gather)", "recon_d3", True),
        (0, 3, "Fisher, full view with the final gather", ("full", 0), True),
    ]
    rows = []
    for machine, distance, name, key, fitted in tests:
        x0, x1 = (
            (sims[0][key[0]][key[1]], sims[1][key[0]][key[1]])
            if isinstance(key, tuple)
            else (sims[0][key], sims[1][key])
        )
        s0, s1 = fisher_statistics(x0, x1) if fitted else (x0, x1)
        mu = separation(s0, s1)
        rows.append(
            {
                "observer": f"machine {machine}",
                "distance": distance,
                "test": name,
                "epsilon_lower": lower_bound(s0, s1),
                "mu": mu,
                "epsilon_of_mu": gdp_epsilon(mu),
            }
        )
    claimed_mu = 1.0 / composed_gaussian_multiplier(args.epsilon, DELTA, 1)
    for row in rows:
        row |= {"epsilon_claimed": args.epsilon, "mu_claimed": claimed_mu, "delta": DELTA}
        row |= {"rounds": args.rounds, "runs_per_hypothesis": args.runs}
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    write_csv(rows, OUT_DIR / "record_pairwise_audit.csv")
    print(
        md_table(
            ["observer", "distance", "test", "ε lower bound (95 %)", "μ", "ε of μ-GDP"],
            [
                [
                    r["observer"],
                    r["distance"],
                    r["test"],
                    f"{r['epsilon_lower']:.2f}",
                    f"{r['mu']:.2f}",
                    f"{r['epsilon_of_mu']:.2f}",
                ]
                for r in rows
            ],
        )
    )
    print(
        f"claimed: ε = {args.epsilon:g}, δ = {DELTA:g} (μ = {claimed_mu:.2f}); largest "
        f"reconstruction error {max(s['error'] for s in sims):.1e} (the noise on u's theta: "
        f"standard deviation {sims[0]['noise_std']:.2f})"
    )
    print(f"{time.perf_counter() - start:.0f} s; wrote {OUT_DIR / 'record_pairwise_audit.csv'}")


if __name__ == "__main__":
    main()
