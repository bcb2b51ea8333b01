"""Randomized response inside the main job: flip rate, independent machine streams, epsilon."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from dpnet.cli import RunConfig, parse_config
from dpnet.data import make_group_logistic
from dpnet.errors import ConfigError
from dpnet.estimators import DecentralizedGroupLassoLogistic
from dpnet.privacy import randomized_response
from dpnet.streams import machine_flip_stream


def test_machine_streams_differ_and_are_reproducible():
    draws = [machine_flip_stream(123, j).random(64) for j in range(8)]
    for i in range(8):
        for j in range(i + 1, 8):
            assert not np.array_equal(draws[i], draws[j])
    assert np.array_equal(draws[3], machine_flip_stream(123, 3).random(64))
    # without a seed each machine draws fresh OS entropy
    fresh = [machine_flip_stream(None, 0).random(8) for _ in range(2)]
    assert not np.array_equal(*fresh)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_each_machine_flips_with_probability_one_minus_p(epsilon):
    p = math.exp(epsilon) / (1 + math.exp(epsilon))
    n = 20_000
    y = np.where(np.arange(n) % 3 == 0, 1.0, -1.0)
    flips = []
    for j in range(5):
        noisy, _ = randomized_response(y, keep_prob=p, rng=machine_flip_stream(5, j))
        k = int(np.count_nonzero(noisy != y))
        assert stats.binomtest(k, n, 1 - p).pvalue > 1e-3
        # flips are label-independent: same rate among +1 and -1 labels
        pos = y == 1
        rate_pos = np.mean(noisy[pos] != y[pos])
        rate_neg = np.mean(noisy[~pos] != y[~pos])
        assert abs(rate_pos - rate_neg) < 4 * math.sqrt(
            p * (1 - p) * (1 / pos.sum() + 1 / (~pos).sum())
        )
        flips.append(noisy != y)
    assert not np.array_equal(flips[0], flips[1])


def test_reported_epsilon_and_no_flip_counts():
    data = make_group_logistic(3000, rng=np.random.default_rng(0))
    eps = 0.8
    model = DecentralizedGroupLassoLogistic(
        0.15,
        epsilon=eps,
        topology="ring",
        n_machines=5,
        random_state=4,
        tol=1e-6,
        groups=data.groups,
    ).fit(data.X, data.y)
    privacy = model.privacy_
    p = math.exp(eps) / (1 + math.exp(eps))
    assert privacy["epsilon"] == pytest.approx(eps, rel=1e-12) and privacy["epsilon"] <= eps
    assert privacy["keep_prob"] == pytest.approx(p, rel=1e-12)
    assert "NOT protected" in privacy["guarantee"]
    ledger = privacy["ledger"]
    assert ledger["relation"] == "replace_one"
    assert set(ledger["per_machine_pure_epsilon"]) == {"0", "1", "2", "3", "4"}
    for value in ledger["per_machine_pure_epsilon"].values():
        assert value == pytest.approx(eps, rel=1e-9)
    # parallel composition over disjoint shards: the run is eps-label-DP, not 5 eps
    assert ledger["total"]["pure_epsilon"] == pytest.approx(eps, rel=1e-9)
    # flip counts are raw-label statistics: outside the release (oracle file only)
    assert "flipped" not in json.dumps(privacy)


def test_keep_prob_option_and_epsilon_inf():
    assert RunConfig(keep_prob=0.75).label_epsilon == pytest.approx(math.log(3))
    assert RunConfig(epsilon=math.inf).keep_probability == 1.0
    assert math.isinf(RunConfig(epsilon=math.inf).label_epsilon)


def test_private_by_default():
    """The default is label privacy at epsilon = 1 (it was inf: no privacy, worded as if
    private); --keep-prob alone names the budget instead; both given are refused."""
    assert RunConfig().label_epsilon == pytest.approx(1.0)
    assert RunConfig().keep_probability == pytest.approx(math.e / (1 + math.e))
    assert parse_config([]).privacy_mode.private
    assert parse_config(["--keep-prob", "0.75"]).label_epsilon == pytest.approx(math.log(3))
    with pytest.raises(ConfigError, match="either --epsilon or --keep-prob"):
        parse_config(["--epsilon", "1", "--keep-prob", "0.75"])
    record = parse_config(["--privacy", "record", "--row-bound", "2"])
    assert record.privacy_mode.spend() == (1.0, 1e-5)
    with pytest.raises(ConfigError, match="needs --row-bound"):
        parse_config(["--privacy", "record"])


def test_the_results_give_the_epsilon_asked_and_the_one_spent(tmp_path):
    """``epsilon_per_machine`` printed 0.999999999999999 for --epsilon 1 with nothing to say
    that 1 was asked: the keep probability is the double just below e/(1 + e), whose own
    budget is what is spent."""
    from dpnet.run import main

    out = tmp_path / "r.json"
    assert (
        main(
            [
                "--machines",
                "3",
                "--max-rounds",
                "3",
                "--quiet",
                "--epsilon",
                "1",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    privacy = json.loads(out.read_text())["privacy"]
    spent = math.log(privacy["keep_prob"] / (1 - privacy["keep_prob"]))
    assert privacy["epsilon_requested"] == 1.0
    assert privacy["epsilon_per_machine"] == spent and 1 - 1e-14 < spent <= 1.0


def test_unbounded_unbiased_objective_is_reported_as_diverged():
    """At epsilon = 0.1 the flip-corrected loss l(m) - k m (k = 9.5) has no minimiser on this
    data: the run must say so instead of claiming convergence on a run-away iterate."""
    data = make_group_logistic(2000, rng=np.random.default_rng(0))

    def fitted(epsilon: float) -> DecentralizedGroupLassoLogistic:
        return DecentralizedGroupLassoLogistic(
            0.1, epsilon=epsilon, loss="unbiased", n_machines=5, random_state=3, groups=data.groups
        ).fit(data.X, data.y)

    diverged = fitted(0.1)
    assert diverged.stop_reason_ == "diverged"
    assert np.linalg.norm(diverged.machine_coefs_, axis=1).max() > 1e3
    bounded = fitted(3.0)
    assert bounded.stop_reason_ == "converged"


@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_held_out_rows_are_flipped_at_the_claimed_rate(epsilon):
    """The held-out rows' randomized response (rank 0's own stream, its own ledger partition)
    flips with probability 1 - p: half the flips (a weaker guarantee than recorded) fails."""
    from dpnet.cli import prepare_problem

    config = RunConfig(
        epsilon=epsilon, n_samples=200, n_test=20_000, seed=5, oracle_output="unused.json"
    ).validate()
    setup = prepare_problem(config, 5)
    flipped = int(np.count_nonzero(setup.public.evaluation.y != setup.holdout_raw))
    p = config.keep_probability
    assert stats.binomtest(flipped, 20_000, 1 - p).pvalue > 1e-3
    assert stats.binomtest(flipped, 20_000, (1 - p) / 2).pvalue < 1e-6
    assert setup.public.holdout_event.noise_parameter == pytest.approx(2 * (1 - p))


def test_a_non_private_run_says_so_on_every_surface(tmp_path, capsys):
    """--epsilon inf printed "randomized response, epsilon = inf label-DP per machine" and
    "(randomized held-out labels)": nothing was randomized. Now every surface says 'not
    private'; the default run (epsilon 1) keeps its label-DP words."""
    from dpnet.run import main

    words = {}
    for name, extra in (("off", ["--epsilon", "inf"]), ("default", [])):
        out = tmp_path / f"{name}.json"
        argv = ["--machines", "3", "--max-rounds", "3", "--output", str(out), *extra]
        assert main(argv) == 0
        words[name] = (capsys.readouterr().out, json.loads(out.read_text()))
    summary, report = words["off"]
    assert "privacy: none, not private (epsilon inf): labels used as given" in summary
    assert "label-DP" not in summary and "randomized" not in summary
    assert report["privacy"]["guarantee"] == "not private (epsilon inf): labels used as given"
    assert report["test_accuracy"]["source"] == "held-out labels as given (not private)"
    assert report["config"]["epsilon"] is None
    summary, report = words["default"]
    assert "epsilon = 1 label-DP per machine" in summary
    assert "(randomized held-out labels, n = " in summary
    assert report["privacy"]["guarantee"].startswith("epsilon-label-DP per machine")
    assert report["privacy"]["epsilon_requested"] == 1.0 and report["config"]["epsilon"] == 1.0


def test_help_states_the_default():
    from dpnet.cli.config import build_parser

    text = " ".join(build_parser().format_help().split())
    assert "(default 1, or the budget of --keep-prob if given; inf = NOT private" in text
