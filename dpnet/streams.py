"""The random streams of a run and their seed layout: the one place it is written down.

**The randomness rule** (docs/privacy.md, "The randomness rule"): the random draws of a
mechanism come from a stream used for that mechanism alone, created at the draw and dropped
after it; no state, seed, uniform or counter of it is printed, written, sent or kept. A PCG64
state can be advanced backwards (``bit_generator.advance(2**128 - n)``), so a stream state
stored after the flips is as good as the raw labels. Every other random choice (the data
split, the CV folds) has a stream of its own whose entropy is not the mechanism's.

Each function below returns a *new* Generator, so a caller cannot hold on to a mechanism's
stream beyond the call it passes it to.

Seeded runs (``--seed S``, ``random_state=S``): every stream is a child of
``SeedSequence(S)``, reproducible, and the guarantee does not hold against anyone who knows S:

    =============  =========================================================
    child          stream
    =============  =========================================================
    (0,)           rank 0's data stream: synthetic rows, the train/test split
    (j + 1,)       machine j's randomized response (a mechanism)
    (J + 1,)       the held-out rows' randomized response (a mechanism, rank 0)
    (J + 1, 1)     the noise on the held-out rows' agreement count (a mechanism, rank 0,
                   ``--privacy record``)
    (j + 1, 0)     machine j's cross-validation folds
    (j + 1, 1, t)  machine j's Gaussian noise on its round-t theta (a mechanism,
                   ``--privacy record``: one stream per draw)
    (j + 1, 2)     machine j's Gaussian noise on its column sums and sums of squares (a
                   mechanism, ``--privacy record --standardize``)
    (J + 2, k)     rank 0's baseline k of ``--baselines`` (0 median, 1 rdp-admm): the seed
                   of its data and mechanisms (:func:`baseline_seed`)
    =============  =========================================================

Unseeded runs: every stream draws fresh OS entropy on the machine that uses it, on its own:
no stream's entropy is derived from another's (a fold stream spawned from the flip stream would
carry the flip stream's entropy in its SeedSequence), and none ever leaves the machine.
"""

from __future__ import annotations

import numpy as np

from dpnet.errors import PrivacyError


def _stream(seed: int | None, *child: int) -> np.random.Generator:
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=child))


def data_stream(seed: int | None) -> np.random.Generator:
    """Rank 0's stream for synthetic rows and the train/test split (not a mechanism)."""
    return _stream(seed, 0)


def machine_flip_stream(seed: int | None, rank: int) -> np.random.Generator:
    """Machine ``rank``'s randomized-response stream: pass it straight to the mechanism."""
    return _stream(seed, rank + 1)


def holdout_flip_stream(seed: int | None, n_machines: int) -> np.random.Generator:
    """The held-out rows' randomized-response stream (rank 0): pass it straight to the
    mechanism."""
    return _stream(seed, n_machines + 1)


def holdout_count_stream(seed: int | None, n_machines: int) -> np.random.Generator:
    """The noise on the held-out rows' agreement count under record-level privacy (rank 0):
    pass it straight to the mechanism."""
    return _stream(seed, n_machines + 1, 1)


def machine_fold_stream(seed: int | None, rank: int) -> np.random.Generator:
    """Machine ``rank``'s cross-validation folds (not a mechanism: fold membership is a
    function of this stream and the row count only)."""
    return _stream(seed, rank + 1, 0)


def machine_theta_stream(seed: int | None, rank: int, round_: int) -> np.random.Generator:
    """Machine ``rank``'s stream for the noise on the theta it sends in round ``round_``
    (record-level privacy): one stream per draw, so no stream outlives its release."""
    return _stream(seed, rank + 1, 1, round_)


def machine_columns_stream(seed: int | None, rank: int) -> np.random.Generator:
    """Machine ``rank``'s stream for the noise on its column sums and sums of squares
    (record-level privacy with standardization): pass it straight to the release."""
    return _stream(seed, rank + 1, 2)


def estimator_stream(random_state: object) -> np.random.Generator:
    """A new stream for one ``fit`` of a DP estimator, from its ``random_state``: an int
    (reproducible: whoever knows it can recompute the noise) or None (fresh OS entropy).

    A Generator or RandomState is refused (PrivacyError): it would stay in the estimator's
    parameters after the draws, and its state, pickled with a fitted estimator, rewinds to
    every draw of the noise."""
    return _stream(check_seed(random_state, "random_state"))


def check_seed(value: object, name: str) -> int | None:
    """``value`` if it is None or an int >= 0, else PrivacyError naming ``name``."""
    if value is None:
        return None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise PrivacyError(
        f"{name} must be an int >= 0 or None, got {type(value).__name__}: a generator passed "
        "in would keep the mechanism's stream, whose state rewinds to every draw"
    )


def child_seeds(seed: int | None, count: int) -> list[int | None]:
    """Integer seeds of children 0..count-1 of ``SeedSequence(seed)``, for estimators fitted
    side by side on streams of their own (None: every one draws its own OS entropy)."""
    if seed is None:
        return [None] * count
    return [
        int(np.random.SeedSequence(seed, spawn_key=(i,)).generate_state(1, np.uint64)[0])
        for i in range(count)
    ]


def baseline_seed(seed: int | None, n_machines: int, k: int) -> int | None:
    """The integer seed of rank 0's baseline ``k`` (child (J + 2, k)), from which its
    estimators spawn their own streams: no stream of the job's is derived from it, nor it
    from one of theirs (None: OS entropy)."""
    if seed is None:
        return None
    state = np.random.SeedSequence(seed, spawn_key=(n_machines + 2, k)).generate_state(1, np.uint64)
    return int(state[0])
