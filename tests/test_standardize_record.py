"""Standardization under record privacy (``--privacy record --standardize``,
``privacy="record", standardize=True``).

Every machine releases the sums of its rows' columns and squared columns, its rows first scaled
to the public row bound R, each vector with Gaussian noise calibrated to its replace-one L2
sensitivity (2R and sqrt(2) R^2); the machines standardize from the released sums alone. The
two releases take ``STANDARDIZE_SHARE`` of the budget's Gaussian-DP mu^2, the thetas the rest:
the fit stays exactly (epsilon, delta)-DP (docs/privacy.md, "Standardization under record
privacy"). Checked here: the sensitivities on adversarial neighbours (attained, never
exceeded), the noise law, an audit that catches half the noise, the ledger, the budget file
and the composition, the command line and the estimator, and the accuracy it buys on a badly
scaled problem. Release invariance: tests/test_release_invariance.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, stats

from devtools.audit import audit_epsilon, extreme_rows, max_sensitivity, replace_one_pairs
from dpnet import streams
from dpnet.data.partition import split_rows
from dpnet.decentralized import boundary, columns
from dpnet.decentralized.machine import privacy_ledger
from dpnet.estimators import DecentralizedGroupLassoLogistic
from dpnet.privacy.budget import BudgetAccountant
from dpnet.privacy.budget_file import read_budget
from dpnet.privacy.discrete import gaussian_grid
from dpnet.privacy.gaussian import composed_gaussian_delta, gaussian_sigma
from dpnet.privacy.modes import CLI, STANDARDIZE_SHARE, RecordPrivacy, privacy_mode
from dpnet.run import main
from tests.varied_randomness import fixed_column_sums, fixed_theta

R = 3.0


def _mode(epsilon: float = 1.0, row_bound: float = R, delta: float = 1e-5) -> RecordPrivacy:
    mode = privacy_mode(
        "record",
        epsilon=epsilon,
        delta=delta,
        row_bound=row_bound,
        keep_prob=None,
        spelling=CLI,
        standardize=True,
    )
    assert isinstance(mode, RecordPrivacy)
    return mode


def _exact_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """The release without its noise: what the mechanism adds noise to, through the real
    clipping path."""
    monkeypatch.setattr(boundary, "release_column_sums", lambda sums, *a: sums)


def test_the_budget_splits_so_that_the_fit_stays_exactly_epsilon_delta():
    """mu^2 of T thetas and the two column releases adds up to the budget's: 1 / s_1^2."""
    for epsilon, rounds in ((0.5, 10), (1.0, 100), (4.0, 300)):
        mode = _mode(epsilon)
        single = gaussian_sigma(epsilon, 1e-5, 1.0)
        s, m = mode.noise_multiplier(rounds), mode.column_noise_multiplier
        assert m is not None
        assert rounds / s**2 == pytest.approx((1 - STANDARDIZE_SHARE) / single**2, rel=1e-12)
        assert 2 / m**2 == pytest.approx(STANDARDIZE_SHARE / single**2, rel=1e-12)
        assert mode.gdp_mu(rounds) == pytest.approx(1 / single, rel=1e-12)
        assert mode.exact_delta(rounds) == pytest.approx(1e-5, rel=1e-9)
        plain = RecordPrivacy(epsilon, R)  # without standardization: the rounds take it all
        assert plain.column_noise_multiplier is None
        assert plain.noise_multiplier(rounds) == math.sqrt(rounds) * single


def test_sensitivities_hold_on_adversarial_neighbours_and_are_attained(monkeypatch):
    """Replace one record of a shard by records on the bound (+-R e_k, random directions) and
    beyond it (scaled to R first): the sums move by <= 2R, the squares by <= sqrt(2) R^2, and
    both are attained (x' = -x; x = R e_k, x' = R e_l). R^2, a tempting bound for the squares,
    is exceeded."""
    _exact_sums(monkeypatch)
    mode = _mode()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 3))
    candidates = extreme_rows(3, R, 1.0, rng, n_random=8)
    candidates += [(5 * R * np.eye(3)[k], 1.0) for k in range(3)]  # outside: scaled to R

    def released(part: str):
        def statistic(data):
            release = columns.release_column_sums(data[0], mode, 0, seed=0)
            return getattr(release, part)

        return statistic

    pairs = list(replace_one_pairs(X, np.ones(6), candidates, indices=[2]))
    on_sums, on_squares = columns.column_sensitivities(R)
    assert (on_sums, on_squares) == (2 * R, math.sqrt(2) * R * R)
    worst_sums = max_sensitivity(released("sums"), pairs)
    worst_squares = max_sensitivity(released("squares"), pairs)
    assert worst_sums <= on_sums * (1 + 1e-12) and worst_sums == pytest.approx(on_sums)
    assert worst_squares <= on_squares * (1 + 1e-12)
    assert worst_squares == pytest.approx(on_squares) and worst_squares > R * R


def test_the_released_noise_follows_the_calibrated_gaussian_and_half_is_rejected(monkeypatch):
    """Noise of every coordinate on the grid of the mechanism and distributed as N(0, (m
    (Delta + sqrt(d) g))^2) (the grid Gaussian's, Delta each vector's sensitivity): KS, 3,000
    releases; the same test rejects the noise of a release that adds half of it."""
    mode = _mode(epsilon=2.0)
    m = mode.column_noise_multiplier
    assert m is not None
    X = np.random.default_rng(1).standard_normal((20, 2)) * [4.0, 0.5]
    clipped = np.asarray(X) * np.minimum(1.0, R / np.linalg.norm(X, axis=1))[:, None]
    exact = {"sums": clipped.sum(axis=0), "squares": (clipped * clipped).sum(axis=0)}
    real = boundary.release_column_sums
    for fraction, honest in ((1.0, True), (0.5, False)):
        monkeypatch.setattr(
            boundary,
            "release_column_sums",
            lambda v, s, mm, rng, r, w, f=fraction: real(v, s, mm * f, rng, r, w),
        )
        draws = [columns.release_column_sums(X, mode, 0, seed) for seed in range(3000)]
        monkeypatch.undo()
        for part, sensitivity in zip(
            ("sums", "squares"), columns.column_sensitivities(R), strict=True
        ):
            grid = gaussian_grid(sensitivity, 2)
            released = np.stack([getattr(d, part) for d in draws])
            assert np.all(released / grid == np.rint(released / grid))  # on the grid
            noise = (released - exact[part]).ravel()
            sd = m * (sensitivity + math.sqrt(2) * grid)
            p = stats.kstest(noise, "norm", args=(0.0, sd)).pvalue
            assert (p > 1e-3) if honest else (p < 1e-6), (part, fraction, p)


def _claimed_epsilon(mu: float, delta: float) -> float:
    return optimize.brentq(lambda e: composed_gaussian_delta(1 / mu, 1, e) - delta, 0.0, 60.0)


@pytest.mark.slow
@pytest.mark.parametrize(("fraction", "caught"), [(1.0, False), (0.5, True)])
def test_audit_of_the_column_release_catches_half_the_noise(monkeypatch, fraction, caught):
    """The two releases of one machine are (sqrt(2) / m)-GDP; the audit of the real release
    (the project's harness, 10,000 runs per neighbour, the likelihood-ratio direction of the
    most distinguishable pair x = R e_1, x' = R e_2) stays below the epsilon of that curve at
    delta = 0.01 with the calibrated noise and exceeds it with half of it."""
    mode = _mode(epsilon=16.0, row_bound=1.0)
    m = mode.column_noise_multiplier
    assert m is not None
    delta = 1e-2
    claimed = _claimed_epsilon(math.sqrt(2) / m, delta)
    on_sums, on_squares = columns.column_sensitivities(1.0)
    d0, d1 = np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]])
    direction = np.concatenate([(d1 - d0)[0] / on_sums, (d1**2 - d0**2)[0] / on_squares])
    real = boundary.release_column_sums
    monkeypatch.setattr(
        boundary,
        "release_column_sums",
        lambda v, s, mm, rng, r, w: real(v, s, mm * fraction, rng, r, w),
    )

    def mechanism(X, rng):
        monkeypatch.setattr(streams, "machine_columns_stream", lambda seed, rank: rng)
        release = columns.release_column_sums(X, mode, 0, None)
        return np.concatenate([release.sums / on_sums, release.squares / on_squares])

    result = audit_epsilon(
        mechanism,
        d0,
        d1,
        n_trials=10000,
        rng=np.random.default_rng(5),
        delta=delta,
        statistic=lambda v: float(v @ direction),
    )
    assert (result.epsilon_lower > claimed) is caught, (result.epsilon_lower, claimed)


def _record_args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--privacy", "record", "--row-bound", "20", "--epsilon", "2", "--machines", "3",
        "--data", str(tmp_path / "d.npz"), "--test-fraction", "0", "--max-rounds", "8",
        "--seed", "7", "--backend", "simulated", "--standardize", "--quiet", *extra,
    ]  # fmt: skip


def _badly_scaled(seed: int, rows: int, scale: float = 8.0) -> tuple[np.ndarray, np.ndarray]:
    """Four unit columns, the first multiplied by ``scale``; labels from the unit columns."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((rows, 4))
    y = (Z @ [1.5, -1.5, 1.0, 0.0] + rng.logistic(size=rows) > 0).astype(int)
    return Z * [scale, 1.0, 1.0, 1.0], y


def test_ledger_budget_file_and_composition_agree(tmp_path):
    """The run's ledger records, per machine, the two column releases and the T thetas; they
    compose (GDP, the closed form) to exactly (epsilon, delta), the PLD accountant finds
    epsilon (to its discretisation) and the budget file is charged exactly (epsilon, delta)."""
    X, y = _badly_scaled(0, 300)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    out = tmp_path / "r.json"
    budget = tmp_path / "budget-{rank}.json"
    args = _record_args(tmp_path, "--output", str(out), "--budget-file", str(budget))
    assert main([*args, "--budget-cap", "10,1e-3"]) == 0
    report = json.loads(out.read_text())
    privacy = report["privacy"]
    mode = _mode(epsilon=2.0, row_bound=20.0)
    m, s = mode.column_noise_multiplier, mode.noise_multiplier(8)
    assert privacy["standardization"]["noise_multiplier"] == m
    assert privacy["noise_multiplier"] == s
    releases = privacy["ledger"]["releases"]
    for j in range(3):
        mine = [r for r in releases if r["machine"] == j]
        assert [r["event"]["type"] for r in mine] == ["SelfComposedDpEvent"] * 2
        kinds = {r["event"]["count"]: r["event"]["event"]["noise_multiplier"] for r in mine}
        assert kinds == {2: m, 8: s}
    mu2 = 8 / s**2 + 2 / m**2
    assert composed_gaussian_delta(1 / math.sqrt(mu2), 1, 2.0) == pytest.approx(1e-5, rel=1e-9)
    assert privacy["exact_delta_at_epsilon"] == pytest.approx(1e-5, rel=1e-9)
    total = privacy["ledger"]["total"]
    assert total["pld_epsilon"] == pytest.approx(2.0, abs=2e-3)
    assert total["epsilon"] >= 2.0  # RDP: an upper bound, looser
    for j in range(3):
        state = read_budget(str(budget).replace("{rank}", str(j)))
        assert state is not None and state.charges == 1
        assert state.spent == pytest.approx((2.0, 1e-5), rel=1e-12)


def test_the_ledger_of_a_standardized_machine_is_its_releases():
    """privacy_ledger records a column release only when a machine made one."""
    from dpnet.decentralized.machine import MachineRelease, ThetaBudget

    with_columns = MachineRelease(None, 1.0, ThetaBudget(10.0, 5, 4.0))  # type: ignore[arg-type]
    without = MachineRelease(None, 1.0, ThetaBudget(10.0, 5))  # type: ignore[arg-type]
    labels = [r.label for r in privacy_ledger([with_columns, without], delta=1e-5).releases]
    assert labels == [
        "Gaussian noise on machine 0's column sums and sums of squares (standardization)",
        "Gaussian noise on machine 0's theta in each of 5 rounds",
        "Gaussian noise on machine 1's theta in each of 5 rounds",
    ]


def test_the_command_line_and_the_estimator_give_the_same_fit(tmp_path):
    """Both front doors: the same released centre and scale, the same noise multipliers and
    the same model (the same seed, rows, machines and streams)."""
    X, y = _badly_scaled(1, 240)
    np.savez(tmp_path / "d.npz", X=X, y=2 * y - 1)
    out = tmp_path / "cli.json"
    assert main([*_record_args(tmp_path, "--output", str(out))]) == 0
    report = json.loads(out.read_text())
    model = DecentralizedGroupLassoLogistic(
        privacy="record", row_bound=20.0, epsilon=2.0, n_machines=3, max_rounds=8,
        random_state=7, standardize=True, classes=(0, 1),
    ).fit(X, y)  # fmt: skip
    assert report["privacy"]["noise_multiplier"] == model.privacy_["noise_multiplier"]
    assert (
        report["privacy"]["standardization"]["noise_multiplier"]
        == model.privacy_["column_noise_multiplier"]
    )
    rows = [X[i] for i in split_rows(len(X), 3)]
    public = columns.public_columns(_mode(2.0, 20.0), rows, len(X), standardize=True, seed=7)
    assert public is not None and public.scale is not None
    assert report["standardization"] == {
        "center": public.shift.tolist(),
        "scale": public.scale.tolist(),
    }
    np.testing.assert_allclose(report["coef"], model.coef_, rtol=0, atol=1e-12)
    assert report["intercept"] == pytest.approx(model.intercept_, abs=1e-9)


def test_own_files_on_threads_release_what_rank_0_releases_for_one_file(tmp_path):
    """Every machine loading its own file (the set-up exchange of released sums, threads)
    gives the centre, scale and model that rank 0 gives releasing each machine's sums with
    that machine's stream from one file (the simulator)."""
    X, y = _badly_scaled(2, 240)
    np.savez(tmp_path / "d.npz", X=X, y=2 * y - 1)
    for j, rows in enumerate(split_rows(len(X), 3)):
        np.savez(tmp_path / f"part-{j}.npz", X=X[rows], y=2 * y[rows] - 1)
    reports = []
    for name, layout in (
        ("one", []),
        ("own", ["--data", str(tmp_path / "part-{rank}.npz"), "--backend", "threads"]),
    ):
        out = tmp_path / f"{name}.json"
        assert main([*_record_args(tmp_path, "--output", str(out)), *layout]) == 0
        reports.append(json.loads(out.read_text()))
    one, own = reports
    assert own["data_layout"] != one["data_layout"]
    assert own["standardization"] == one["standardization"]
    np.testing.assert_allclose(own["coef"], one["coef"], rtol=0, atol=1e-12)


def test_no_seed_draws_other_column_noise_every_run():
    """Without a seed the column stream is fresh OS entropy: two releases differ."""
    X = np.random.default_rng(2).standard_normal((30, 3))
    first = columns.release_column_sums(X, _mode(), 0, None)
    second = columns.release_column_sums(X, _mode(), 0, None)
    assert not np.array_equal(first.sums, second.sums)


@pytest.mark.slow
def test_standardizing_a_badly_scaled_problem_fits_a_better_model():
    """A column 8 times the others' scale, R = 20 (the raw rows' bound), epsilon = 2 over 30
    rounds: the standardized fit's coefficients point nearer the true direction and predict
    better on fresh rows than the fit on the columns as given (two noise seeds each)."""
    X, y = _badly_scaled(3, 1500)
    test_X, test_y = _badly_scaled(4, 4000)
    truth = np.array([1.5, -1.5, 1.0, 0.0])  # on the unit-scale columns
    found = {}
    for standardize in (False, True):
        cosines, accuracies = [], []
        for seed in (1, 2):
            model = DecentralizedGroupLassoLogistic(
                lam=1e-3, privacy="record", epsilon=2.0, row_bound=20.0, max_rounds=30,
                standardize=standardize, classes=(0, 1), random_state=seed,
            ).fit(X, y)  # fmt: skip
            scaled = model.coef_ * [8.0, 1.0, 1.0, 1.0]
            cosines.append(scaled @ truth / np.linalg.norm(scaled) / np.linalg.norm(truth))
            accuracies.append(float(np.mean(model.predict(test_X) == test_y)))
        found[standardize] = (np.mean(cosines), np.mean(accuracies))
    assert found[True][0] > found[False][0] + 0.05, found
    assert found[True][1] > found[False][1] + 0.02, found


def test_one_raw_record_changes_nothing_the_estimator_releases_with_standardize(monkeypatch):
    """The estimator's front door (privacy="record", standardize=True) with the released
    column sums and thetas held fixed (tests.varied_randomness's stand-ins): one raw record
    replaced (its row far beyond the bound, its label flipped) changes no fitted attribute."""
    monkeypatch.setattr(boundary, "release_column_sums", fixed_column_sums)
    monkeypatch.setattr(boundary, "release_theta", fixed_theta)
    X, y = _badly_scaled(1, 240)

    def fitted(X: np.ndarray, y: np.ndarray) -> dict[str, str]:
        # an accountant of its own: the process's default one would sum both fits
        model = DecentralizedGroupLassoLogistic(
            privacy="record", row_bound=20.0, epsilon=2.0, n_machines=3, max_rounds=8,
            random_state=7, standardize=True, classes=(0, 1),
            accountant=BudgetAccountant(math.inf, math.inf),
        ).fit(X, y)  # fmt: skip
        return {k: repr(v) for k, v in vars(model).items() if k.endswith("_")}

    X2, y2 = X.copy(), y.copy()
    X2[100] = -50.0 * X2[100]
    y2[100] = 1 - y2[100]
    before, after = fitted(X, y), fitted(X2, y2)
    assert before.keys() == after.keys() and "coef_" in before
    assert {k for k in before if before[k] != after[k]} == set()
