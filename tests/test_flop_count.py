"""The flop counter of devtools/flop_count.py (read by benchmarks/machine_replay.py):
closed-form counts for each kind of call the Newton theta step (theta.NewtonThetaStep) makes,
and a counted theta step that is bitwise the uncounted one."""

import numpy as np
import scipy.linalg.blas
import scipy.linalg.lapack

from devtools.flop_count import counting_flops
from dpnet.decentralized import LocalData, StackedShards, theta


def _data(n: int = 60, p: int = 5, seed: int = 0) -> LocalData:
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n, p)), np.ones((n, 1))])
    return LocalData(X, rng.choice([-1.0, 1.0], n), n_total=n)


def test_each_kind_of_call_counts_its_closed_form() -> None:
    """Products with X~ (2 n d each), a Newton matrix by dsyrk (n d (d + 1)) and its
    Cholesky factor (d^3 / 3), made the way KeptMatrices.form makes them."""
    data = _data()
    n, d = data.X_aug.shape
    with counting_flops() as (counted, flops):
        X = counted(data).X_aug
        X @ np.ones(d)
        X.T @ np.ones(n)
        scaled = np.asarray(X) * 0.5
        hess = theta.dsyrk(1.0, scaled.T, lower=1)
        hess[np.diag_indices_from(hess)] += 1.0
        theta.dpotrf(hess, lower=1)
    assert flops["products"] == 2 * (2 * n * d)
    assert flops["matrices"] == n * d * (d + 1)
    assert flops["factors"] == d**3 / 3
    # the names are restored
    assert theta.dsyrk is scipy.linalg.blas.dsyrk
    assert theta.dpotrf is scipy.linalg.lapack.dpotrf


def test_a_counted_theta_step_is_the_uncounted_one(monkeypatch) -> None:  # noqa: ANN001
    """Counting changes no bit of a Newton theta step; it counts one Newton matrix per
    matrix the step forms (KeptMatrices.form), a factor and an inverse for each, and products
    with X~ in whole multiples of 2 n d: at least the start's margins and gradient, and for every
    matrix formed its own margins and its iteration's step margins and new gradient."""
    data = _data()
    n, d = data.X_aug.shape
    args = (np.full((1, d), 0.1), np.array([1.5]), np.zeros((1, d)))

    def step(shard: LocalData) -> theta.ThetaResult:
        block = StackedShards.one(shard)
        return theta.NewtonThetaStep(block, np.zeros((1, d)), theta.NO_ANCHORS, theta.NO_ANCHORS)(
            *args
        )

    plain = step(data)
    formed = [0]
    form = theta.KeptMatrices.form

    def counted_form(self, data, idx, at, rho) -> None:  # noqa: ANN001
        formed[0] += len(idx)
        form(self, data, idx, at, rho)

    monkeypatch.setattr(theta.KeptMatrices, "form", counted_form)
    with counting_flops() as (counted, flops):
        solve = step(counted(data))
    assert np.array_equal(solve.theta, plain.theta)
    assert np.array_equal(solve.loss, plain.loss)
    assert formed[0] >= 1
    assert flops["matrices"] == formed[0] * n * d * (d + 1)
    # per matrix its Cholesky factor (d^3 / 3) and the inverse from it (dpotri, 2 d^3 / 3)
    assert flops["factors"] == formed[0] * d**3
    assert flops["products"] % (2 * n * d) == 0
    assert flops["products"] >= (2 + 3 * formed[0]) * (2 * n * d)
