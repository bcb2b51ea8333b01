"""The seed layout of dpnet.streams and the randomness rule at the estimators' door."""

from __future__ import annotations

import numpy as np
import pytest

from dpnet import streams
from dpnet.baselines.median import DPMedianRegressor
from dpnet.baselines.rdp_admm import SSADMMClassifier
from dpnet.errors import PrivacyError
from dpnet.estimators import DecentralizedGroupLassoLogistic

SEED, J = 11, 4


def _draws(gen: np.random.Generator) -> np.ndarray:
    return gen.random(8)


def _child(k: int) -> np.random.SeedSequence:
    """Child k of SEED, fresh (a SeedSequence counts the children it has spawned)."""
    return np.random.SeedSequence(SEED).spawn(k + 1)[k]


def test_seeded_layout_is_the_documented_children_of_the_seed():
    """Independent reference: numpy's own spawn tree of SeedSequence(SEED)."""
    children = np.random.SeedSequence(SEED).spawn(J + 2)
    expected = {
        "data": np.random.default_rng(children[0]),
        "holdout flips": np.random.default_rng(children[J + 1]),
        **{f"flips {j}": np.random.default_rng(children[j + 1]) for j in range(J)},
        **{f"folds {j}": np.random.default_rng(children[j + 1]).spawn(1)[0] for j in range(J)},
        **{f"columns {j}": np.random.default_rng(_child(j + 1).spawn(3)[2]) for j in range(J)},
    }
    got = {
        "data": streams.data_stream(SEED),
        "holdout flips": streams.holdout_flip_stream(SEED, J),
        **{f"flips {j}": streams.machine_flip_stream(SEED, j) for j in range(J)},
        **{f"folds {j}": streams.machine_fold_stream(SEED, j) for j in range(J)},
        **{f"columns {j}": streams.machine_columns_stream(SEED, j) for j in range(J)},
    }
    for name in expected:
        assert np.array_equal(_draws(got[name]), _draws(expected[name])), name
    firsts = [_draws(g)[0] for g in expected.values()]
    assert len(set(firsts)) == len(firsts)


def test_every_call_is_a_new_stream():
    """A mechanism's stream cannot be held on to through the layout: each call starts anew."""
    used = streams.machine_flip_stream(SEED, 0)
    used.random(100)
    fresh = [_draws(streams.machine_flip_stream(SEED, 0)) for _ in range(2)]
    assert np.array_equal(*fresh) and not np.array_equal(fresh[0], _draws(used))


def test_unseeded_streams_have_entropy_of_their_own():
    """Without a seed no stream's entropy is another's: a fold stream spawned from the flip
    stream would carry the flip stream's entropy in its SeedSequence."""
    gens = [
        streams.machine_flip_stream(None, 0),
        streams.machine_fold_stream(None, 0),
        streams.holdout_flip_stream(None, J),
        streams.data_stream(None),
        streams.machine_flip_stream(None, 0),
    ]
    entropies = [g.bit_generator.seed_seq.entropy for g in gens]
    assert len(set(entropies)) == len(entropies)
    assert all(g.bit_generator.seed_seq.spawn_key == () for g in gens)


def test_child_seeds_are_the_children_and_none_stays_none():
    seeds = streams.child_seeds(SEED, 3)
    children = np.random.SeedSequence(SEED).spawn(3)
    assert seeds == [int(c.generate_state(1, np.uint64)[0]) for c in children]
    assert streams.child_seeds(None, 3) == [None, None, None]


@pytest.mark.parametrize(
    "bad", [np.random.default_rng(0), np.random.RandomState(0), True, -1, 1.5, "7"]
)
def test_a_generator_or_non_seed_is_refused(bad):
    with pytest.raises(PrivacyError, match="random_state must be an int >= 0 or None"):
        streams.estimator_stream(bad)


@pytest.mark.parametrize(
    "estimator",
    [
        DPMedianRegressor(method="objective", epsilon=1.0, lam=0.01),
        SSADMMClassifier(epsilon=1.0),
        DecentralizedGroupLassoLogistic(epsilon=1.0, n_machines=2),
    ],
    ids=["median", "rdp-admm", "decentralized"],
)
def test_dp_estimators_refuse_a_generator_random_state(estimator):
    """A Generator in the parameters would keep the mechanism's stream after the fit (and in
    every pickle of the fitted estimator): refused before any draw."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (40, 3))  # rows inside every estimator's default bound
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    generator = np.random.default_rng(5)
    state = generator.bit_generator.state
    with pytest.raises(PrivacyError, match="random_state"):
        estimator.set_params(random_state=generator).fit(X, y)
    assert generator.bit_generator.state == state  # nothing was drawn from it
