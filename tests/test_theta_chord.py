"""The theta step on a kept Newton matrix (steps.ChordNewton), the default for tall shards."""

from __future__ import annotations

import numpy as np
import pytest

from dpnet.decentralized import steps
from dpnet.decentralized.steps import (
    ChordNewton,
    DescentPoint,
    LocalData,
    NewtonAnchor,
    theta_gradient,
    theta_step_newton,
)
from dpnet.losses.margin import Logistic, UnbiasedLogistic


def _rounds(n: int, p: int, k: int, seed: int = 0):  # noqa: ANN202
    """A shard and k theta-step inputs whose centre drifts as an ADMM run's does."""
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n, p)), np.ones((n, 1))])
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    z0 = rng.standard_normal((3, p + 1))
    drift = rng.standard_normal((3, p + 1))
    inputs = [(z0 + drift * 0.5**r, 0.01 * drift * 0.5**r) for r in range(k)]
    return X, y, inputs


def _count_forms(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    count = [0]
    form = ChordNewton._form

    def counted(self: ChordNewton, theta: np.ndarray, rho: float) -> NewtonAnchor:
        count[0] += 1
        return form(self, theta, rho)

    monkeypatch.setattr(ChordNewton, "_form", counted)
    return count


@pytest.mark.parametrize("loss", [Logistic(), UnbiasedLogistic(0.75)])
def test_every_round_reaches_the_newton_solution(loss, monkeypatch) -> None:  # noqa: ANN001
    """Same tolerance as Newton, fewer matrices: over 20 drifting rounds the chord steps end
    where the Newton steps do (gradient norm <= 1e-12 each), forming under a third of the
    matrices Newton forms (two or more per round; measured 14 against 49: at this tolerance
    most solves take more than CHORD_STEPS steps)."""
    X, y, inputs = _rounds(400, 12, 20)
    data = LocalData(X, y, 1600, loss)
    forms = _count_forms(monkeypatch)
    newton_forms = [0]
    direction = steps.newton_direction

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        newton_forms[0] += 1
        return direction(*args, **kwargs)

    monkeypatch.setattr(steps, "newton_direction", counted)
    chord, theta_c, theta_n, c = ChordNewton(data, None), np.zeros(13), np.zeros(13), 0.05
    for z_nbhd, v_in in inputs:
        theta_c, loss_c, _ = chord(z_nbhd, v_in, theta_c, c)
        theta_n, loss_n, _ = theta_step_newton(data, z_nbhd, v_in, theta_n, c)
        assert np.linalg.norm(theta_gradient(data, z_nbhd, v_in, theta_c, c)) <= 1e-11
        assert np.abs(theta_c - theta_n).max() <= 1e-10
        assert loss_c == pytest.approx(loss.value(y * (X @ theta_c)).sum() / 1600, rel=1e-13)
    assert 3 * forms[0] < newton_forms[0]


def test_a_new_penalty_shifts_the_kept_matrix(monkeypatch) -> None:  # noqa: ANN001
    """Residual balancing's change of c keeps the anchor theta_a: the kept data part is
    shifted by the new rho and factorized again, bitwise the factor a resumed run rebuilds
    from (theta_a, rho); the first step after the change is taken on it, without a new data
    matrix, and the solve still reaches the tolerance."""
    X, y, inputs = _rounds(200, 6, 2)
    data = LocalData(X, y, 800)
    chord = ChordNewton(data, None)
    theta, *_ = chord(*inputs[0], np.zeros(7), 0.05)
    assert chord.anchor is not None and chord.anchor.rho == 0.05 * 3
    theta_a = chord.anchor.theta.copy()
    forms = _count_forms(monkeypatch)
    chord(*inputs[1], theta, 0.1, max_iter=0)  # the shift alone: no step taken
    shifted = chord.anchor
    assert forms[0] == 0 and np.array_equal(shifted.theta, theta_a) and shifted.rho == 0.1 * 3
    rebuilt = ChordNewton(data, None)._form(theta_a, 0.1 * 3)
    assert np.array_equal(shifted.factor, rebuilt.factor)
    chord(*inputs[1], theta, 0.1, max_iter=1)  # one step: on the shifted matrix
    assert forms[0] == 1  # the rebuilt one above
    theta_c, *_ = chord(*inputs[1], theta, 0.1)
    assert np.linalg.norm(theta_gradient(data, *inputs[1], theta_c, 0.1)) <= 1e-11


def test_a_stored_anchor_goes_on_bitwise() -> None:
    """The loop state stores (theta_a, rho_a) and the last point's margins only; the
    factor and the loss derivatives rebuilt from them are the same, so a resumed run takes
    bitwise the steps of the uninterrupted one."""
    X, y, inputs = _rounds(300, 8, 6, seed=4)
    data = LocalData(X, y, 900)
    chord, theta = ChordNewton(data, None), np.zeros(9)
    for z_nbhd, v_in in inputs[:3]:
        theta, *_ = chord(z_nbhd, v_in, theta, 0.05)
    assert chord.anchor is not None
    assert chord.point is not None and np.array_equal(chord.point.theta, theta)
    resumed = ChordNewton(
        data,
        NewtonAnchor.from_array(chord.anchor.as_array()),
        DescentPoint.at(data, theta, chord.point.margin.copy()),
    )
    assert resumed.anchor is not None and resumed.anchor.factor is None
    theta_r = theta.copy()
    for z_nbhd, v_in in inputs[3:]:
        theta, loss, _ = chord(z_nbhd, v_in, theta, 0.05)
        theta_r, loss_r, _ = resumed(z_nbhd, v_in, theta_r, 0.05)
        assert np.array_equal(theta, theta_r) and loss == loss_r
    assert NewtonAnchor.from_array(np.empty(0)) is None


def test_a_non_finite_matrix_gives_a_non_finite_step() -> None:
    """Features of 1e200 overflow H: the step is NaN (the stop rule's 'non-finite'), never
    a finite step computed from an infinite matrix."""
    X, y, inputs = _rounds(50, 3, 1)
    X[:, 0] *= 1e200
    with np.errstate(all="ignore"):
        theta, *_ = ChordNewton(LocalData(X, y, 50), None)(*inputs[0], np.zeros(4), 0.05)
    assert not np.isfinite(theta).all()


def test_the_refresh_rule_is_the_one_the_simulator_reads() -> None:
    from dpnet.decentralized import batched

    assert batched.CHORD_CONTRACTION is steps.CHORD_CONTRACTION
    assert batched.CHORD_STEPS is steps.CHORD_STEPS
