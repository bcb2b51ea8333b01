"""Record-level privacy of the main job (--privacy record): the theta step's sensitivity on
adversarial neighbours, the noise the machines add, the calibration against dp-accounting, an
audit of one machine's message stream that catches half the noise, and a neighbour's
membership attack on the messages of a real run, which must stay under the claimed epsilon.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant
from scipy import optimize, stats

from devtools.audit import audit_epsilon, extreme_rows, max_sensitivity, replace_one_pairs
from devtools.record_attack import theta_likelihood_ratio
from dpnet.decentralized import (
    ADMMConfig,
    GroupStructure,
    LocalData,
    NewtonThetaStep,
    RawShard,
    RecordNoise,
    StackedShards,
    admm,
    boundary,
    record,
)
from dpnet.decentralized.admm import initial_penalty
from dpnet.decentralized.batched import run_batched
from dpnet.decentralized.record import fixed_work, private_thetas
from dpnet.decentralized.theta import NO_ANCHORS
from dpnet.errors import ConfigError
from dpnet.losses import Logistic, UnbiasedLogistic
from dpnet.privacy import composed_gaussian_delta, composed_gaussian_multiplier

R, N_ROWS, DIM = 3.0, 6, 3  # row bound, rows of the shard, features (intercept added)
GROUPS = GroupStructure(np.arange(DIM + 1), np.arange(DIM), np.full(DIM, 0.1 / 6))


def _shard(rng: np.random.Generator, n: int = N_ROWS) -> tuple[np.ndarray, np.ndarray]:
    X = rng.standard_normal((n, DIM))
    X *= R / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), R)  # inside the bound
    return X, np.where(rng.random(n) < 0.5, 1.0, -1.0)


def _data(X: np.ndarray, y: np.ndarray, n_total: int, loss=None) -> LocalData:
    X_aug = np.hstack([X, np.ones((X.shape[0], 1))])
    return LocalData(X_aug, y, n_total, Logistic() if loss is None else loss)


def _exact_thetas(data: StackedShards, center: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """argmin f_j(theta) + (rho_j/2)||theta - center_j||^2 of every machine of a block, by the
    non-private Newton step from the centre, to a gradient norm of 1e-14."""
    return NewtonThetaStep(data, center, NO_ANCHORS, NO_ANCHORS)(
        center, rho, center, tol=1e-14
    ).theta


def _exact_theta(data: LocalData, center: np.ndarray, rho: float) -> np.ndarray:
    """:func:`_exact_thetas` of one machine."""
    return _exact_thetas(StackedShards.one(data), center[None], np.array([rho]))[0]


def test_theta_step_matches_an_independent_solver() -> None:
    """The exact theta step the sensitivity is about, against scipy's trust-region Newton
    solver on the same objective written out here (numpy's logaddexp and sigmoid, with its
    gradient and Hessian), solved to a gradient norm of 1e-12."""
    rng = np.random.default_rng(0)
    X, y = _shard(rng)
    data = _data(X, y, 40)
    center, rho = rng.standard_normal(DIM + 1), 0.3
    A = data.X_aug

    def objective(t: np.ndarray) -> float:
        return np.logaddexp(0.0, -y * (A @ t)).sum() / 40 + 0.5 * rho * np.sum((t - center) ** 2)

    def gradient(t: np.ndarray) -> np.ndarray:
        return A.T @ (-y / (1.0 + np.exp(y * (A @ t)))) / 40 + rho * (t - center)

    def hessian(t: np.ndarray) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-(A @ t)))
        return (A.T * (p * (1.0 - p) / 40)) @ A + rho * np.eye(len(t))

    ref = optimize.minimize(
        objective, np.zeros(DIM + 1), jac=gradient, hess=hessian, method="trust-exact",
        options={"gtol": 1e-13},
    )  # fmt: skip
    assert np.linalg.norm(gradient(ref.x)) < 1e-12
    np.testing.assert_allclose(_exact_theta(data, center, rho), ref.x, rtol=0, atol=1e-11)


@pytest.mark.parametrize("loss", [Logistic(), UnbiasedLogistic(0.8)])
def test_sensitivity_bound_holds_and_is_nearly_attained(loss, monkeypatch) -> None:
    """max over adversarial replace-one neighbours (rows on the sphere of radius R, +-R e_k,
    both labels) of ||theta*(D) - theta*(D')|| stays below 2 L sqrt(R^2 + 1) / (n rho), and a
    centre with a very negative intercept (every margin deep in the loss's linear part) brings
    it within R / sqrt(R^2 + 1) of the bound; the theta the machines release (the fixed-work
    step, before its noise) stays below the stated Delta on the same pairs."""
    monkeypatch.setattr(boundary, "release_theta", lambda theta, *a: theta)
    rng = np.random.default_rng(1)
    X, y = _shard(rng)
    n_total, rho = 50, 4.0
    noise = RecordNoise(1.0, R)
    bound = noise.numerator(n_total, loss.lipschitz_bound) / rho
    candidates = [(x, lab) for x, lab in extreme_rows(DIM, R, 1.0, rng, n_random=6) if lab != 0]
    for center in (rng.standard_normal(DIM + 1), np.r_[np.zeros(DIM), -40.0]):

        def theta_star(d: tuple[np.ndarray, np.ndarray], center=center) -> np.ndarray:
            return _exact_theta(_data(d[0], d[1], n_total, loss), center, rho)

        def theta_hat(d: tuple[np.ndarray, np.ndarray], center=center) -> np.ndarray:
            return _alone(noise, _data(d[0], d[1], n_total, loss), center, rho)

        worst = max_sensitivity(theta_star, replace_one_pairs(X, y, candidates, indices=[0, 3]))
        assert worst <= bound
        pairs = replace_one_pairs(X, y, candidates, indices=[0, 3])
        assert max_sensitivity(theta_hat, pairs) <= bound
    assert worst >= 0.99 * R / math.hypot(R, 1.0) * bound


def test_rows_beyond_the_bound_are_clipped_at_the_boundary() -> None:
    rng = np.random.default_rng(2)
    X = rng.standard_normal((5, DIM)) * 10.0
    raw = RawShard(X, np.ones(5), 5, np.arange(DIM), np.ones(DIM))
    private, _ = boundary.cross_boundary(raw, 1.0, rng, "machine 0", row_bound=R)
    np.testing.assert_allclose(np.linalg.norm(private.X, axis=1), R)
    np.testing.assert_allclose(
        private.X / np.linalg.norm(private.X, axis=1)[:, None],
        X / np.linalg.norm(X, axis=1)[:, None],
    )


def _block(data: LocalData, k: int = 1) -> StackedShards:
    return StackedShards.stack([data] * k)


def _alone(
    noise: RecordNoise, data: LocalData, center: np.ndarray, rho: float, rank: int = 0
) -> np.ndarray:
    """private_thetas of one machine (an MPI rank's block of one) in round 1."""
    one = StackedShards.one(data)
    return private_thetas(noise, one, center[None], np.array([rho]), 1, np.array([rank]))[0]


def test_the_release_gets_the_fixed_work_theta_and_the_stated_sensitivity(monkeypatch) -> None:
    """What private_thetas hands the release, for a machine alone (an MPI rank's block of one)
    and inside a block of two (the simulator's): the fixed-work theta, within 1e-3 of the
    noise's standard deviation from the exact theta step, and the sensitivity
    2 L sqrt(R^2 + 1) / (n c d_j), written out here, each machine with its own rank and round."""
    rng = np.random.default_rng(3)
    X, y = _shard(rng)
    n_total, c, d = 60, 0.7, 3
    data = _data(X, y, n_total, UnbiasedLogistic(0.75))
    center = rng.standard_normal(DIM + 1)
    noise = RecordNoise(5.0, R, seed=4)
    seen = []

    def spy(theta, l2_sensitivity, noise_multiplier, rng_, rank, round_):
        seen.append((theta.copy(), l2_sensitivity, noise_multiplier, rank, round_))
        return theta

    monkeypatch.setattr(boundary, "release_theta", spy)
    private_thetas(
        noise, StackedShards.one(data), center[None], np.array([c * d]), 7, np.array([2])
    )
    theta, sens, mult, rank, round_ = seen[0]
    lipschitz = 0.75 / (2 * 0.75 - 1)
    assert sens == pytest.approx(2 * lipschitz * math.sqrt(R**2 + 1) / (n_total * c * d))
    assert (mult, rank, round_) == (5.0, 2, 7)
    exact = _exact_theta(data, center, c * d)
    assert np.linalg.norm(theta - exact) <= 1e-3 * mult * sens  # ACCURACY of the noise's std

    rho = np.array([c * d, 2 * c * d])
    private_thetas(noise, _block(data, 2), np.stack([center, center]), rho, 7, np.array([0, 1]))
    assert [s[1] for s in seen[1:]] == pytest.approx([sens, sens / 2])
    assert [s[3:] for s in seen[1:]] == [(0, 7), (1, 7)]
    np.testing.assert_array_equal(seen[1][0], theta)  # a block computes each machine's alone


def _fewest_steps(rows: int, rho: float, row_bound: float, loss, n_total: int, s: float) -> int:
    """The least K >= 1 with q^K G <= 1e-3 s Delta rho, counted one step at a time
    (fixed_work's closed form, derived again from its definitions)."""
    r2 = row_bound**2 + 1
    smooth = rho + loss.curvature_bound * rows * r2 / n_total
    q = (smooth - rho) / (smooth + rho)
    gap = loss.lipschitz_bound * rows * math.sqrt(r2) / n_total  # G: the start's bound
    target = 1e-3 * s * 2 * loss.lipschitz_bound * math.sqrt(r2) / n_total
    k = 1
    while gap * q**k > target:
        k += 1
    return k


@pytest.mark.parametrize("loss", [Logistic(), UnbiasedLogistic(0.8)])
@pytest.mark.parametrize("rows,rho,row_bound", [(6, 0.05, 3.0), (40, 0.5, 1.0), (200, 0.02, 5.0)])
def test_the_fixed_count_ends_near_the_exact_step_on_the_hardest_shards(
    loss, rows, rho, row_bound
) -> None:
    """The fixed-work theta step ends within 1e-3 of the noise's standard deviation s Delta
    from the exact one (Lemma 1a) on shards built to be hard: every row at the bound along one
    direction (the gradient at the start as large as it can be), the centre deep in the loss's
    linear part or at its curved middle, and random rows; its count is the least K with
    q^K G <= 1e-3 s Delta rho, counted step by step here."""
    n_total, s = 4 * rows, 2.0
    noise = RecordNoise(s, row_bound)
    rng = np.random.default_rng(rows)
    direction = np.eye(DIM)[0] * row_bound
    shards = {
        "aligned": (np.tile(direction, (rows, 1)), np.ones(rows)),
        "random": _shard(rng, rows),
    }
    shards["random"][0][:] *= row_bound / R
    _, count = fixed_work(noise, loss, np.array([rows]), n_total, np.array([rho]))
    assert int(count[0]) == _fewest_steps(rows, rho, row_bound, loss, n_total, s)
    spread = 1e-3 * s * 2 * loss.lipschitz_bound * math.hypot(row_bound, 1.0) / n_total
    for X, y in shards.values():
        data = _data(X, y, n_total, loss)
        for center in (np.r_[np.zeros(DIM), -40.0], np.zeros(DIM + 1), rng.normal(size=DIM + 1)):
            found: list[np.ndarray] = []
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(boundary, "release_theta", lambda theta, *a, f=found: f.append(theta))
                _alone(noise, data, center, rho)
            exact = _exact_theta(data, center, rho)
            assert np.linalg.norm(found[0] - exact) <= spread / rho


@pytest.mark.parametrize("steps", [1, 3, 30])
def test_any_number_of_steps_keeps_the_exact_steps_sensitivity(steps, monkeypatch) -> None:
    """Lemma 1: K gradient steps from the same public centre end at most (1 - q^K) Delta apart
    for adversarial neighbours, whatever K (patched into fixed_work here); with the centre deep
    in the loss's linear part one step moves them R / sqrt(R^2 + 1) of its bound apart."""
    rng = np.random.default_rng(9)
    X, y = _shard(rng)
    n_total, rho = 50, 0.5
    noise = RecordNoise(1.0, R)
    step, _ = fixed_work(noise, Logistic(), np.array([N_ROWS]), n_total, np.array([rho]))
    monkeypatch.setattr(record, "fixed_work", lambda *a: (step, np.array([steps])))
    monkeypatch.setattr(boundary, "release_theta", lambda theta, *a: theta)
    q = 1.0 - float(step[0]) * rho
    bound = (1.0 - q**steps) * noise.numerator(n_total, 1.0) / rho
    candidates = [(x, lab) for x, lab in extreme_rows(DIM, R, 1.0, rng, n_random=6) if lab != 0]
    for center in (rng.standard_normal(DIM + 1), np.r_[np.zeros(DIM), -40.0]):

        def theta_k(d: tuple[np.ndarray, np.ndarray], center=center) -> np.ndarray:
            return _alone(noise, _data(d[0], d[1], n_total), center, rho)

        worst = max_sensitivity(theta_k, replace_one_pairs(X, y, candidates, indices=[0, 3]))
        assert worst <= bound * (1 + 1e-12)
    if steps == 1:
        assert worst >= 0.99 * R / math.hypot(R, 1.0) * bound


def test_the_work_of_a_round_is_the_same_for_every_shard(monkeypatch) -> None:
    """The rows the theta step's gradients read, per machine, for a shard and for its
    neighbour with one record replaced by an extreme one (and another label): the same count,
    fixed_work's, on a block of one and on a block of three shards of unequal size."""
    rng = np.random.default_rng(8)
    X, y = _shard(rng, 9)
    X1, y1 = X.copy(), y.copy()
    X1[4], y1[4] = -R * np.ones(DIM) / math.sqrt(DIM), -y[4]
    others = [_data(*_shard(rng, n), 40) for n in (5, 7)]
    read: list[np.ndarray] = []
    real = StackedShards.loss_gradient

    def counted(self, idx, margins, first=None):
        read.append(idx.copy())
        return real(self, idx, margins, first)

    monkeypatch.setattr(StackedShards, "loss_gradient", counted)
    monkeypatch.setattr(boundary, "release_theta", lambda theta, *a: theta)
    noise = RecordNoise(2.0, R)
    rho = np.array([0.3, 0.6, 0.9])
    work = []
    for shard in (_data(X, y, 40), _data(X1, y1, 40)):
        read.clear()
        block = StackedShards.stack([shard, *others])
        private_thetas(noise, block, rng.normal(size=(3, DIM + 1)), rho, 1, np.arange(3))
        per_machine = np.bincount(np.concatenate(read), minlength=3)
        read.clear()
        _alone(noise, shard, np.zeros(DIM + 1), float(rho[0]))
        work.append((per_machine.tolist(), len(read)))
    _, count = fixed_work(noise, Logistic(), np.array([9, 5, 7]), 40, rho)
    assert work[0] == work[1] == (count.tolist(), count[0])


def test_theta_noise_is_the_stated_gaussian() -> None:
    """theta~ - theta^ over 4000 draws (fresh seeds, as a run's rounds): mean 0, standard
    deviation s * Delta to 3 %, Gaussian by Kolmogorov-Smirnov."""
    rng = np.random.default_rng(5)
    X, y = _shard(rng)
    data = _data(X, y, 30)
    z_nbhd, c = rng.standard_normal((2, DIM + 1)), 0.5
    mult = 3.0
    center = z_nbhd.mean(axis=0)
    exact = _exact_theta(data, center, c * 2)  # the fixed-work theta: within 1e-3 s Delta
    std = mult * RecordNoise(mult, R).numerator(30, 1.0) / (c * 2)
    draws = np.stack(
        [_alone(RecordNoise(mult, R, seed=s), data, center, c * 2) for s in range(4000)]
    )
    z = ((draws - exact) / std).ravel()
    assert abs(z.mean()) < 4 / math.sqrt(z.size)
    assert z.std() == pytest.approx(1.0, rel=0.03)
    assert stats.kstest(z, "norm").pvalue > 1e-3


@pytest.mark.parametrize("epsilon,rounds", [(0.5, 10), (1.0, 100), (4.0, 300)])
def test_calibration_against_dp_accounting(epsilon: float, rounds: int) -> None:
    """The multiplier of T composed Gaussian releases for (epsilon, 1e-5): dp-accounting's
    PLD accountant on SelfComposed(Gaussian(s), T) gives epsilon back (to its discretisation),
    its RDP accountant a larger one, and the exact delta at epsilon is 1e-5."""
    delta = 1e-5
    s = composed_gaussian_multiplier(epsilon, delta, rounds)
    event = dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(s), rounds)
    pld = PLDAccountant(value_discretization_interval=1e-4).compose(event).get_epsilon(delta)
    rdp = RdpAccountant().compose(event).get_epsilon(delta)
    assert pld == pytest.approx(epsilon, abs=2e-3)
    assert rdp > epsilon
    assert composed_gaussian_delta(s, rounds, epsilon) == pytest.approx(delta, rel=1e-6)


def test_record_noise_refuses_bad_parameters() -> None:
    with pytest.raises(ConfigError, match="row_bound"):
        RecordNoise(1.0, 0.0)
    with pytest.raises(ConfigError, match="noise_multiplier"):
        RecordNoise(math.inf, 1.0)


# ---- audits and attacks ------------------------------------------------------------------


def _neighbours(rng: np.random.Generator) -> tuple[LocalData, LocalData]:
    """A shard and its adversarial neighbour: row 0 = R e_0 replaced by -R e_0 (label +1)."""
    X, y = _shard(rng, 4)
    X[0], y[0] = R * np.eye(DIM)[0], 1.0
    X1 = X.copy()
    X1[0] = -X[0]
    return _data(X, y, 8), _data(X1, y, 8)


def _stream_statistics(
    noise: RecordNoise,
    assumed: float,
    pair: tuple[LocalData, LocalData],
    truth: int,
    trials: int,
    rounds: int,
    rho: float,
) -> np.ndarray:
    """Likelihood-ratio statistic of an observer of one machine's messages over ``rounds``
    rounds, the machine's rows being pair[truth], for ``trials`` independent runs (stacked as
    machines of the simulator). Each round the machine releases its theta through the real
    batched path (the fixed-work theta step, its own stream per trial and round); the first centre
    has a very negative intercept (the sensitivity nearly attained), the next round's centre is
    the released theta (an adaptive, public post-processing). The observer knows
    both candidate shards and the centres, computes both exact thetas and sums
    log N(theta~; theta_1, v) - log N(theta~; theta_0, v), v the variance it believes
    (``assumed`` multiplier)."""
    stacks = [StackedShards.stack([d] * trials) for d in pair]
    rho_vec = np.full(trials, rho)
    center = np.tile(np.r_[np.zeros(DIM), -40.0], (trials, 1))  # margins in the linear part
    llr = np.zeros(trials)
    std = assumed * noise.numerator(8, 1.0) / rho
    for t in range(1, rounds + 1):
        released = private_thetas(noise, stacks[truth], center, rho_vec, t, np.arange(trials))
        exact = [_exact_thetas(s, center, rho_vec) for s in stacks]
        llr += (
            ((released - exact[0]) ** 2).sum(axis=1) - ((released - exact[1]) ** 2).sum(axis=1)
        ) / (2 * std**2)
        center = released
    return llr


def _audit(stat0: np.ndarray, stat1: np.ndarray, delta: float):
    """audit_epsilon on statistics computed beforehand (one per trial and dataset)."""
    queues = {0: iter(stat0), 1: iter(stat1)}
    return audit_epsilon(
        lambda d, rng: next(queues[d]),
        0,
        1,
        n_trials=stat0.size,
        rng=np.random.default_rng(0),
        delta=delta,
    )


@pytest.mark.slow
@pytest.mark.parametrize("fraction,caught", [(1.0, False), (0.5, True)])
def test_audit_of_one_machines_message_stream(fraction: float, caught: bool) -> None:
    """Three rounds of one machine's releases, calibrated to (1, 1e-3) over the three rounds,
    audited with the project's harness on the optimal statistic (20,000 runs per neighbour):
    the real noise stays under epsilon, half of it is caught. (delta = 1e-3: at 1e-5 the
    events that separate half the noise from the full have probabilities no affordable
    number of runs resolves.)"""
    epsilon, delta, rounds, trials = 1.0, 1e-3, 3, 20_000
    s = composed_gaussian_multiplier(epsilon, delta, rounds)
    pair = _neighbours(np.random.default_rng(6))
    stats_ = [
        _stream_statistics(
            RecordNoise(s * fraction, R, seed=100 + truth), s, pair, truth, trials, rounds, 50.0
        )
        for truth in (0, 1)
    ]
    result = _audit(*stats_, delta)
    assert (result.epsilon_lower > epsilon) is caught
    if not caught:
        assert result.epsilon_lower > 0.4 * epsilon  # the audit has power


@pytest.mark.slow
def test_a_neighbours_membership_attack_stays_under_epsilon(monkeypatch) -> None:
    """End to end: three machines on a path run the record-private ADMM (the simulator, the
    real release path); machine 0 holds D or D' (one record replaced adversarially). Machine
    1, its neighbour, with every other machine colluding, sees machine 0's thetas and knows
    the inputs of its theta step (they are functions of released messages): it computes the
    exact theta under both hypotheses and thresholds the likelihood ratio. Over 500 runs per
    hypothesis its lower bound on epsilon stays below the claimed 2; the same attack on runs
    with 1/20 of the noise finds epsilon > 2 (the attack is real)."""
    epsilon, delta, rounds = 2.0, 1e-5, 4
    s = composed_gaussian_multiplier(epsilon, delta, rounds)
    rng = np.random.default_rng(7)
    pair = _neighbours(rng)
    others = [_data(*_shard(rng, 4), 8) for _ in range(2)]
    graph = nx.path_graph(3)
    seen: list = []
    real = admm.private_thetas

    def observed(noise, data, center, rho, round_, ranks):
        out = real(noise, data, center, rho, round_, ranks)
        seen.append((center[0].copy(), float(rho[0]), out[0].copy()))
        return out

    monkeypatch.setattr(admm, "private_thetas", observed)
    one = [StackedShards.stack([d]) for d in pair]
    results = {}
    for fraction, runs in ((1.0, 500), (0.05, 200)):
        statistics = []
        for truth in (0, 1):
            llr = np.empty(runs)
            for k in range(runs):
                seen.clear()
                noise = RecordNoise(s * fraction, R, seed=10_000 * truth + k + int(1e6 * fraction))
                config = ADMMConfig(
                    c=1.0, max_rounds=rounds, tol=1e-300, record=noise, adapt_c=False
                )
                run_batched([pair[truth], *others], GROUPS, config, graph)
                assumed = s * fraction * noise.numerator(8, 1.0)
                total = theta_likelihood_ratio(seen, one, lambda rho, a=assumed: a / rho)
                llr[k] = total
            statistics.append(llr)
        results[fraction] = _audit(*statistics, delta).epsilon_lower
    print(f"attack's epsilon lower bounds: {results}")
    assert results[1.0] <= epsilon
    assert results[0.05] > epsilon


def test_the_starting_penalty_grows_with_the_noise_up_to_three_times() -> None:
    """Under record privacy c_0 is the spectral start times clip(s/12, 1, 3), s public."""
    graph = nx.cycle_graph(8)
    plain = initial_penalty(ADMMConfig(), graph)
    for s, factor in ((6.0, 1.0), (24.0, 2.0), (60.0, 3.0)):
        noisy = initial_penalty(ADMMConfig(record=RecordNoise(s, R)), graph)
        assert noisy == pytest.approx(factor * plain, rel=5e-3)  # both rounded to 3 digits
    assert initial_penalty(ADMMConfig(c=0.7, record=RecordNoise(60.0, R)), graph) == 0.7


def test_over_relaxation_defaults_to_the_value_measured_for_each_mode(monkeypatch) -> None:
    """Record privacy keeps alpha = 1.5, where its defaults were measured (docs/privacy.md);
    label privacy takes ADMMConfig's; --relaxation wins in either, on the CLI and in the
    estimator alike."""
    from dpnet import estimators
    from dpnet.cli import admm_config, parse_config
    from dpnet.decentralized.record import RECORD_RELAXATION

    record = ["--privacy", "record", "--epsilon", "1", "--row-bound", "3"]
    assert RECORD_RELAXATION == 1.5 != ADMMConfig().relaxation
    assert admm_config(parse_config([]), None).relaxation == ADMMConfig().relaxation
    assert admm_config(parse_config(record), None).relaxation == RECORD_RELAXATION
    assert admm_config(parse_config([*record, "--relaxation", "1.2"]), None).relaxation == 1.2
    with pytest.raises(ConfigError, match="relaxation"):
        parse_config(["--relaxation", "2"])
    made: list[ADMMConfig] = []
    settings = estimators.fit_settings  # the solver settings both front doors build

    def kept(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        made.append(settings(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(estimators, "fit_settings", kept)
    X = np.random.default_rng(0).standard_normal((80, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    for privacy, alpha in (("label", ADMMConfig().relaxation), ("record", RECORD_RELAXATION)):
        extra = {"epsilon": 1.0, "row_bound": 3.0} if privacy == "record" else {}
        estimators.DecentralizedGroupLassoLogistic(
            privacy=privacy, n_machines=2, max_rounds=3, **extra
        ).fit(X, y)
        assert made[-1].relaxation == alpha


def test_the_estimator_is_record_private_on_both_backends() -> None:
    """privacy='record' from Python: the same noisy fit on the simulator and on threads (each
    machine's own streams), 100 rounds by default, the budget in privacy_ and the ledger, the
    objective withheld; and it refuses what the mode cannot take."""
    from dpnet.data import make_group_logistic
    from dpnet.estimators import DecentralizedGroupLassoLogistic

    data = make_group_logistic(6000, n_groups=6, rng=np.random.default_rng(11))
    params = dict(privacy="record", epsilon=2.0, row_bound=6.0, n_machines=4, random_state=3)
    fits = {
        b: DecentralizedGroupLassoLogistic(0.02, backend=b, **params).fit(data.X, data.y)
        for b in ("simulated", "threads")
    }
    sim, thr = fits["simulated"], fits["threads"]
    assert sim.n_iter_ == thr.n_iter_ == 100
    assert np.abs(sim.coef_ - thr.coef_).max() <= 1e-12
    assert sim.privacy_["rounds_budget"] == 100 and sim.privacy_["delta"] == 1e-5
    assert sim.privacy_["ledger"]["total"]["pld_epsilon"] == pytest.approx(2.0, abs=2e-3)
    assert math.isnan(sim.objective_)
    plain = DecentralizedGroupLassoLogistic(0.02, n_machines=4).fit(data.X, data.y)
    loose = DecentralizedGroupLassoLogistic(0.02, **{**params, "epsilon": 32.0})
    # rows clipped to 6 (median norm 6.2): at epsilon 32 the noise is small, the clip remains
    assert loose.fit(data.X, data.y).score(data.X, data.y) > plain.score(data.X, data.y) - 0.01
    assert sim.score(data.X, data.y) > 0.7
    with pytest.raises(ValueError, match="row_bound"):
        DecentralizedGroupLassoLogistic(privacy="record", epsilon=1.0).fit(data.X, data.y)
    with pytest.raises(ValueError, match="row_bound applies"):
        DecentralizedGroupLassoLogistic(row_bound=1.0).fit(data.X, data.y)


def test_the_results_file_of_a_record_private_run(tmp_path, capsys) -> None:
    """What a --privacy record run writes and prints: the budget and the ledger (one Gaussian
    entry per machine over the rounds of the budget, the held-out count), no objective
    anywhere, the held-out accuracy from the noisy count, no max_rounds warning."""
    import json

    from dpnet.run import main

    out = tmp_path / "r.json"
    argv = ["--privacy", "record", "--epsilon", "1", "--row-bound", "6", "--machines", "3"]
    argv += ["--seed", "2", "--max-rounds", "20", "--output", str(out), "--progress-every", "5"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    report = json.loads(out.read_text())
    privacy = report["privacy"]
    assert (privacy["epsilon_per_machine"], privacy["delta"], privacy["rounds_budget"]) == (
        1.0,
        1e-5,
        20,
    )
    assert privacy["noise_multiplier"] == pytest.approx(composed_gaussian_multiplier(1, 1e-5, 20))
    assert privacy["exact_delta_at_epsilon"] == pytest.approx(1e-5, rel=1e-6)
    labels = [r["label"] for r in privacy["ledger"]["releases"]]
    assert labels[:3] == [
        f"Gaussian noise on machine {j}'s theta in each of 20 rounds" for j in range(3)
    ]
    assert "agreement count" in labels[3] and len(labels) == 4
    assert privacy["ledger"]["total"]["pld_epsilon"] == pytest.approx(1.0, abs=2e-3)
    assert report["objective"]["on_randomized_labels"] is None
    assert all(h["objective"] is None for h in report["history"])
    assert report["test_accuracy"]["source"] == "held-out private rows, noisy agreement count"
    assert "objective not released" in captured.out and "record-level" in captured.out
    assert "objective" not in captured.err and "warning" not in captured.err


def test_the_held_out_count_carries_laplace_noise_of_scale_one_over_epsilon() -> None:
    """The held-out agreement count under record privacy (sensitivity 1): its noise over 4000
    fresh streams has mean 0 and standard deviation sqrt(2)/epsilon to 5 % (the discrete
    Laplace of scale ~1/epsilon); half of it would fail."""
    from dpnet.cli import EvaluationSet, accuracy_estimate
    from dpnet.cli.evaluation import NOISY_COUNT

    rng = np.random.default_rng(12)
    X = rng.standard_normal((400, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    coef, epsilon = np.array([1.0, 0.5, 0.0]), 0.5
    exact = float(np.count_nonzero(np.where(X @ coef >= 0, 1.0, -1.0) == y))
    evaluation = EvaluationSet(X, y, NOISY_COUNT, 1.0, epsilon)
    noise = []
    for s in range(4000):
        estimate, event = accuracy_estimate(evaluation, coef, 0.0, np.random.default_rng(s))
        noise.append(estimate["unbiased_estimate"] * 400 - exact)
    noise = np.array(noise)
    assert event.epsilon == epsilon
    assert abs(noise.mean()) < 4 * noise.std() / math.sqrt(noise.size)
    assert noise.std() == pytest.approx(math.sqrt(2) / epsilon, rel=0.05)


def test_a_row_bound_whose_square_overflows_is_refused() -> None:
    """R = 1e300 ended in an OverflowError (R^2 in the theta step's work count) or numpy
    overflow warnings (issue 45, item 8); now a one-line ConfigError, for the library's
    RecordNoise and the estimator alike; R = MAX_ROW_BOUND is accepted."""
    import warnings

    from dpnet.decentralized.record import MAX_ROW_BOUND
    from dpnet.estimators import DecentralizedGroupLassoLogistic

    RecordNoise(1.0, MAX_ROW_BOUND)
    with pytest.raises(ConfigError, match="row_bound must be at most 1e\\+100"):
        RecordNoise(1.0, 1e300)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 4))
    y = np.where(X[:, 0] > 0, 1, 0)
    model = DecentralizedGroupLassoLogistic(
        privacy="record", epsilon=1.0, row_bound=1e300, n_machines=2, classes=(0, 1)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ConfigError, match="row_bound must be at most"):
            model.fit(X, y)
