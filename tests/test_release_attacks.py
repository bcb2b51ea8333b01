"""The three attacks of the privacy review, run against what the main job releases.

Each trial draws a secret bit b, runs the job (through its CLI entry point, at epsilon = 1) on
D_b, where D_0 and D_1 differ in one label only, and lets an attacker who knows the features
and every other label guess b from the files the job wrote. Against an epsilon-label-DP
release no attacker beats e^eps / (1 + e^eps) = 0.731 per trial on average, so 29 or more
correct guesses of 30 has probability < 1e-3 (binomial tail). The same attack, given the
oracle file (the values that used to be in the results), must reach that count: it shows the
attack has the power to catch the leaks it was written for. Trials use fixed seeds, so the
test is deterministic; the attacker never uses the seed.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dpnet.data import train_test_split_indices
from dpnet.run import main

pytestmark = pytest.mark.slow  # statistical: many runs of a mechanism or of the job

TRIALS = 30
EPSILON = 1.0
KEEP = math.exp(EPSILON) / (1 + math.exp(EPSILON))
THRESHOLD = 29  # P(Binomial(30, 0.731) >= 29) < 1e-3
LAM = 0.1


def test_threshold_is_what_the_docstring_says():
    assert stats.binom.sf(THRESHOLD - 1, TRIALS, KEEP) < 1e-3
    assert stats.binom.sf(THRESHOLD - 2, TRIALS, KEEP) >= 1e-3


def _objective(X: np.ndarray, y: np.ndarray, coef: np.ndarray, intercept: float) -> float:
    """The job's objective with one group per column (its default groups)."""
    margins = y * (X @ coef + intercept)
    return float(np.logaddexp(0.0, -margins).mean() + 0.5 * LAM * np.abs(coef).sum())


def _run(tmp: Path, X: np.ndarray, y: np.ndarray, seed: int, extra: list[str]) -> tuple[dict, dict]:
    np.savez(tmp / "d.npz", X=X, y=y)
    assert (
        main(
            [
                "--data",
                str(tmp / "d.npz"),
                "--epsilon",
                str(EPSILON),
                "--seed",
                str(seed),
                "--lam",
                str(LAM),
                "--quiet",
                "--output",
                str(tmp / "r.json"),
                "--oracle-output",
                str(tmp / "o.json"),
                *extra,
            ]
        )
        == 0
    )
    return (
        json.loads((tmp / "r.json").read_text()),
        json.loads((tmp / "o.json").read_text())["fields"],
    )


def _play(tmp_path: Path, make_trial: Callable[[np.random.Generator, int], tuple]) -> tuple:
    """(correct guesses from the release, correct guesses from release + oracle)."""
    from_release = from_oracle = 0
    for t in range(TRIALS):
        rng = np.random.default_rng([2024, t])
        secret = int(rng.integers(2))
        guess_release, guess_oracle = make_trial(rng, secret, tmp_path, 100 + t)
        from_release += guess_release == secret
        from_oracle += guess_oracle == secret
    return from_release, from_oracle


def _candidates(y: np.ndarray, row: int) -> list[np.ndarray]:
    """D_0 and D_1: the label of ``row`` is -1 in D_0 and +1 in D_1."""
    return [np.where(np.arange(len(y)) == row, value, y) for value in (-1.0, 1.0)]


def test_objective_on_true_labels_attack(tmp_path, capsys):
    """Recompute the released model's objective on both neighbours: the one matching a
    true-label objective is the data set (20/20 in the review)."""

    def trial(rng, secret, tmp, seed):
        X = rng.standard_normal((20, 3))
        y = np.where(rng.random(20) < 0.5, 1.0, -1.0)
        cands = _candidates(y, 0)
        report, oracle = _run(tmp, X, cands[secret], seed, ["--test-fraction", "0"])
        coef, intercept = np.array(report["coef"]), report["intercept"]
        values = [_objective(X, c, coef, intercept) for c in cands]

        def closest(target):
            return int(np.argmin([abs(v - target) for v in values]))

        return (
            closest(report["objective"]["on_randomized_labels"]),
            closest(oracle["objective_on_true_labels"]["value"]),
        )

    from_release, from_oracle = _play(tmp_path, trial)
    capsys.readouterr()
    assert from_release < THRESHOLD, f"release: {from_release}/{TRIALS} correct"
    assert from_oracle >= THRESHOLD, f"oracle: {from_oracle}/{TRIALS} correct"


def test_flip_count_attack(tmp_path, capsys):
    """One row per machine: the released objective on randomized labels identifies every
    randomized label (2^5 candidates); a flip count then gives the raw one (30/30)."""

    def trial(rng, secret, tmp, seed):
        X = rng.standard_normal((5, 2))
        y = np.where(rng.random(5) < 0.5, 1.0, -1.0)
        report, oracle = _run(tmp, X, _candidates(y, 0)[secret], seed, ["--test-fraction", "0"])
        coef, intercept = np.array(report["coef"]), report["intercept"]
        target = report["objective"]["on_randomized_labels"]
        noisy = min(
            (np.array(v) for v in itertools.product((-1.0, 1.0), repeat=5)),
            key=lambda v: abs(_objective(X, v, coef, intercept) - target),
        )
        raw_from_oracle = noisy[0] * (-1.0 if oracle["labels_flipped"]["value"][0] else 1.0)
        return int(noisy[0] > 0), int(raw_from_oracle > 0)

    from_release, from_oracle = _play(tmp_path, trial)
    capsys.readouterr()
    assert from_release < THRESHOLD, f"release: {from_release}/{TRIALS} correct"
    assert from_oracle >= THRESHOLD, f"oracle: {from_oracle}/{TRIALS} correct"


def test_held_out_accuracy_attack(tmp_path, capsys):
    """The target is a held-out row (the split is label-independent, so the attacker may know
    it). Raw-label accuracy counts the target's correctness exactly; the released accuracy
    is computed from randomized labels and only shifts the odds."""
    n, fraction = 24, 0.25

    def trial(rng, secret, tmp, seed):
        X = rng.standard_normal((n, 3))
        y = np.where(X[:, 0] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
        split_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
        _, test = train_test_split_indices(n, fraction, split_rng)
        row, others = int(test[0]), test[1:]
        cands = _candidates(y, row)
        report, oracle = _run(tmp, X, cands[secret], seed, ["--test-fraction", str(fraction)])
        pred = np.where(X @ np.array(report["coef"]) + report["intercept"] >= 0, 1.0, -1.0)
        right_others = int(np.sum(pred[others] == y[others]))
        # oracle: the raw-label accuracy gives the target's correctness exactly
        right_target = (
            round(oracle["test_accuracy_on_raw_labels"]["value"] * len(test)) - right_others
        )
        guess_oracle = int((pred[row] if right_target else -pred[row]) > 0)
        # release: the agreement count implied by the debiased estimate, against its mean
        # under each candidate label of the target
        acc = report["test_accuracy"]
        agree = (acc["unbiased_estimate"] * (2 * KEEP - 1) + 1 - KEEP) * len(test)
        base = np.sum(np.where(pred[others] == y[others], KEEP, 1 - KEEP))
        means = [base + (KEEP if pred[row] == c[row] else 1 - KEEP) for c in cands]
        guess_release = int(np.argmin([abs(agree - m) for m in means]))
        return guess_release, guess_oracle

    from_release, from_oracle = _play(tmp_path, trial)
    capsys.readouterr()
    assert from_release < THRESHOLD, f"release: {from_release}/{TRIALS} correct"
    assert from_oracle >= THRESHOLD, f"oracle: {from_oracle}/{TRIALS} correct"
