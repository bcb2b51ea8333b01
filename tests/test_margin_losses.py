"""The margin losses of :mod:`dpnet.losses.margin`: derivative and curvature against central
finite differences, the flip-corrected loss against the clean one in expectation (closed form),
convexity, curvature bounds, and the numbers of the functions they wrap."""

from __future__ import annotations

import numpy as np
import pytest

from dpnet.errors import ConfigError
from dpnet.losses import (
    HuberizedHinge,
    Logistic,
    MarginLoss,
    UnbiasedLogistic,
    huberized_hinge_dloss,
    huberized_hinge_loss,
    logistic_dloss,
    logistic_loss,
)

LOSSES = [
    Logistic(),
    UnbiasedLogistic(0.9),
    UnbiasedLogistic(0.6),
    UnbiasedLogistic(1.0),
    HuberizedHinge(0.5),
    HuberizedHinge(0.1),
]
M = np.linspace(-6.0, 6.0, 241)


def _smooth_points(loss: MarginLoss) -> np.ndarray:
    """Margins away from the huberized hinge's two knots 1 +- h (where l'' jumps)."""
    if isinstance(loss, HuberizedHinge):
        return M[np.minimum(np.abs(M - 1 - loss.h), np.abs(M - 1 + loss.h)) > 1e-3]
    return M


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
def test_derivative_and_curvature_match_finite_differences(loss: MarginLoss) -> None:
    m, e = _smooth_points(loss), 1e-5
    fd1 = (loss.value(m + e) - loss.value(m - e)) / (2 * e)
    np.testing.assert_allclose(loss.derivative(m), fd1, rtol=1e-6, atol=1e-8)
    fd2 = (loss.derivative(m + e) - loss.derivative(m - e)) / (2 * e)
    np.testing.assert_allclose(loss.curvature(m), fd2, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
def test_convex_with_the_stated_curvature_bound(loss: MarginLoss) -> None:
    curv = loss.curvature(M)
    assert np.all(curv >= 0.0) and np.all(curv <= loss.curvature_bound)
    assert curv.max() == pytest.approx(loss.curvature_bound, rel=1e-3)  # attained (near m = 0)
    assert np.all(np.diff(loss.value(M), 2) >= -1e-12)  # discrete convexity of the values
    assert np.all(np.diff(loss.derivative(M)) >= 0.0)  # l' non-decreasing


@pytest.mark.parametrize("p", [0.55, 0.7, 0.9, 1.0])
def test_unbiased_loss_equals_the_clean_loss_in_expectation(p: float) -> None:
    """A label kept w.p. p and flipped (m -> -m) otherwise: p l_p(m) + (1 - p) l_p(-m) = l(m),
    for the values and (by differentiating) the derivatives."""
    loss, clean = UnbiasedLogistic(p), Logistic()
    np.testing.assert_allclose(
        p * loss.value(M) + (1 - p) * loss.value(-M), clean.value(M), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(
        p * loss.derivative(M) - (1 - p) * loss.derivative(-M),
        clean.derivative(M),
        rtol=1e-12,
        atol=1e-12,
    )
    np.testing.assert_array_equal(loss.curvature(M), clean.curvature(M))


def test_closed_forms_and_wrapped_functions() -> None:
    """l(0) = log 2, l'(0) = -1/2, l''(0) = 1/4; l_p(0) = log 2 and l_p'(0) = -1/(2(2p - 1));
    the classes return the module functions' numbers bit for bit."""
    p = 0.75
    assert Logistic().value(np.array(0.0)) == pytest.approx(np.log(2.0), rel=1e-15)
    assert Logistic().curvature(np.array(0.0)) == 0.25
    assert UnbiasedLogistic(p).value(np.array(0.0)) == pytest.approx(np.log(2.0), rel=1e-15)
    assert UnbiasedLogistic(p).derivative(np.array(0.0)) == pytest.approx(-1.0, rel=1e-15)
    np.testing.assert_array_equal(Logistic().value(M), logistic_loss(M))
    np.testing.assert_array_equal(Logistic().derivative(M), logistic_dloss(M))
    np.testing.assert_array_equal(HuberizedHinge(0.3).value(M), huberized_hinge_loss(M, 0.3))
    np.testing.assert_array_equal(HuberizedHinge(0.3).derivative(M), huberized_hinge_dloss(M, 0.3))
    assert HuberizedHinge(0.5).curvature_bound == 1.0
    # keep probability 1 (no flips): the corrected loss is the logistic loss, bit for bit
    for method in ("value", "derivative", "curvature"):
        np.testing.assert_array_equal(
            getattr(UnbiasedLogistic(1.0), method)(M), getattr(Logistic(), method)(M)
        )


def test_losses_are_values_and_validate_their_parameters() -> None:
    assert Logistic() == Logistic() and len({UnbiasedLogistic(0.8), UnbiasedLogistic(0.8)}) == 1
    assert UnbiasedLogistic(0.8) != UnbiasedLogistic(0.9) and Logistic() != HuberizedHinge()
    for bad in (0.5, 0.3, 1.2, float("nan")):
        with pytest.raises(ConfigError, match="keep_prob"):
            UnbiasedLogistic(bad)
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ConfigError, match="width"):
            HuberizedHinge(bad)
    with pytest.raises(TypeError):
        MarginLoss()  # abstract


WIDE = np.concatenate([-np.logspace(3, -8, 60), [0.0, -0.0], np.logspace(-8, 3, 60)])


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
def test_the_value_and_its_derivatives_together_are_bitwise_each_alone(loss: MarginLoss) -> None:
    """A line search's point computes its value and derivative in one pass and a point
    rebuilt from stored margins (a checkpoint) computes them apart: they must be the same
    floats, on margins from -1000 to 1000, at +-inf and NaN."""
    m = np.concatenate([WIDE, [np.inf, -np.inf, np.nan]])
    with np.errstate(over="raise", divide="raise", invalid="raise"):  # no overflow, no 0/0
        finite = m[np.isfinite(m)]
        value, first = loss.value_and_derivative(finite)
        both = loss.derivatives(finite)
    assert np.array_equal(value, loss.value(finite))
    assert np.array_equal(first, loss.derivative(finite))
    assert np.array_equal(both[0], loss.derivative(finite))
    assert np.array_equal(both[1], loss.curvature(finite))
    value, first = loss.value_and_derivative(m)
    assert np.array_equal(value, loss.value(m), equal_nan=True)
    assert np.array_equal(first, loss.derivative(m), equal_nan=True)


def test_logistic_to_a_few_ulp_of_a_50_digit_reference() -> None:
    """l(m) = log(1 + e^-m), -sigma(-m) and sigma(m) sigma(-m) against mpmath at 50 digits,
    margins from -1000 to 1000 (no overflow, no lost tail: l(800) ~ 3.7e-348 underflows to
    the subnormal range, not to a rounding of 1)."""
    import mpmath

    mpmath.mp.dps = 50
    loss = Logistic()

    def exact(f):  # noqa: ANN001, ANN202
        return np.array([float(f(mpmath.mpf(float(x)))) for x in WIDE])

    value = exact(lambda x: mpmath.log1p(mpmath.exp(-x)))
    sig = exact(lambda x: 1 / (1 + mpmath.exp(x)))
    curv = exact(lambda x: mpmath.exp(x) / (1 + mpmath.exp(x)) ** 2)
    tiny = np.finfo(float).tiny  # below it the reference is subnormal: compare absolutely
    for got, want in ((loss.value(WIDE), value), (-loss.derivative(WIDE), sig),
                      (loss.curvature(WIDE), curv)):  # fmt: skip
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(float).eps, atol=4 * tiny)
