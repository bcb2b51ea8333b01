"""The flop counter of benchmarks/flop_count.py (read by benchmarks/machine_replay.py):
closed-form counts for each kind of call, and a counted theta step that is bitwise the
uncounted one."""

import numpy as np
import scipy.linalg.blas

from benchmarks.flop_count import counting_flops
from dpnet.decentralized import steps


def _data(n: int = 60, p: int = 5, seed: int = 0) -> steps.LocalData:
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n, p)), np.ones((n, 1))])
    return steps.LocalData(X, rng.choice([-1.0, 1.0], n), n_total=n)


def test_each_kind_of_call_counts_its_closed_form() -> None:
    data = _data()
    n, d = data.X_aug.shape
    with counting_flops() as (counted, flops):
        X = counted(data).X_aug
        X @ np.ones(d)
        X.T @ np.ones(n)
        hess = steps.weighted_gram(X, np.ones(n)) + np.eye(d)
        factor, _ = steps.dpotrf(hess)
        steps.dpotrs(factor, np.ones(d))
    assert flops == {
        "products": 2 * (2 * n * d),
        "matrices": n * d * (d + 1),
        "factors": d**3 / 3,
        "solves": 2 * d**2,
    }
    assert steps.dsyrk is scipy.linalg.blas.dsyrk  # the names are restored


def test_a_counted_theta_step_is_the_uncounted_one() -> None:
    data = _data()
    d = data.X_aug.shape[1]
    args = (np.zeros((3, d)), np.full((3, d), 0.1), np.zeros(d), 0.5)
    plain = steps.ChordNewton(data, None)(*args)
    with counting_flops() as (counted, flops):
        solve = steps.ChordNewton(counted(data), None)(*args)
    assert np.array_equal(solve.theta, plain.theta) and solve.loss == plain.loss
    n = data.X_aug.shape[0]
    assert flops["matrices"] >= n * d * (d + 1) and flops["products"] % (2 * n * d) == 0
    assert flops["products"] >= 2 * (2 * n * d)  # a step's margins and its new gradient
