"""With the noise off, the Rényi-DP ADMM methods reach the L1-regularised optimum computed by
independent solvers: scikit-learn's saga (logistic) and L-BFGS-B on the split w = u - v
(huberized hinge; no packaged solver has this loss). Tolerance: 1e-3 relative objective."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from dpnet.baselines.rdp_admm import (
    ADMMObjPClassifier,
    DPADMMClassifier,
    DPSGDClassifier,
    MPADMMClassifier,
    SSADMMClassifier,
)
from dpnet.baselines.rdp_admm.common import get_loss, objective
from dpnet.losses import (
    huberized_hinge_dloss,
    huberized_hinge_gradient,
    huberized_hinge_loss,
    huberized_hinge_objective,
)

LAM = 1e-3


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    n, p = 1500, 8
    X = rng.standard_normal((n, p)) / np.sqrt(p + 3)
    X[:, -1] = 1.0 / np.sqrt(p + 3)
    X /= np.maximum(np.linalg.norm(X, axis=1), 1.0)[:, None]
    w = 4.0 * rng.standard_normal(p)
    y = np.where(rng.random(n) < expit(X @ w), 1.0, -1.0)
    return X, y


def reference(loss: str, X: np.ndarray, y: np.ndarray) -> float:
    n, p = X.shape
    if loss == "logistic":
        ref = LogisticRegression(
            C=1.0 / (n * LAM),
            l1_ratio=1.0,
            solver="saga",
            fit_intercept=False,
            tol=1e-12,
            max_iter=100_000,
        ).fit(X, y)
        return objective(get_loss("logistic"), X, y, ref.coef_.ravel(), LAM)

    def fun(uv: np.ndarray) -> tuple[float, np.ndarray]:
        w = uv[:p] - uv[p:]
        g = huberized_hinge_gradient(X, y, w)
        return huberized_hinge_objective(X, y, w) + LAM * uv.sum(), np.concatenate(
            [g + LAM, -g + LAM]
        )

    res = minimize(
        fun,
        np.zeros(2 * p),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0, None)] * (2 * p),
        options={"ftol": 1e-15, "gtol": 1e-12},
    )
    return float(res.fun)


def estimators(loss: str) -> list:
    off = {"lam": LAM, "loss": loss, "epsilon": None, "random_state": 0}
    return [
        SSADMMClassifier(n_epochs=100, eta0=16.0, **off),
        DPSGDClassifier(n_epochs=60, eta0=8.0, **off),
        MPADMMClassifier(n_epochs=1500, **off),
        DPADMMClassifier(n_iter=2000, **off),
    ]


@pytest.mark.parametrize("loss", ["logistic", "huberized_hinge"])
def test_noise_off_reaches_reference_optimum(loss: str, data) -> None:
    X, y = data
    f_ref = reference(loss, X, y)
    for est in estimators(loss):
        est.fit(X, y)
        assert est.privacy_["private"] is False
        gap = (objective(get_loss(loss), X, y, est.coef_, LAM) - f_ref) / f_ref
        assert -1e-6 < gap < 1e-3, (type(est).__name__, gap)
        assert est.history_[-1] == pytest.approx(f_ref, rel=1e-3)


def test_objp_noise_off_approaches_optimum(data) -> None:
    X, y = data
    f_ref = reference("huberized_hinge", X, y)
    est = ADMMObjPClassifier(LAM, loss="huberized_hinge", epsilon=None, n_iter=200).fit(X, y)
    assert (objective(get_loss("huberized_hinge"), X, y, est.coef_, LAM) - f_ref) / f_ref < 1e-3


def test_huberized_hinge_matches_definition_and_derivative() -> None:
    m = np.array([-2.0, 0.4, 0.5, 1.0, 1.5, 1.6, 3.0])
    h = 0.5
    expected = np.array([3.0, 0.6, 0.5, 0.125, 0.0, 0.0, 0.0])  # 1-m | (1.5-m)^2/2 | 0
    np.testing.assert_allclose(huberized_hinge_loss(m, h), expected, atol=1e-15)
    fd = (huberized_hinge_loss(m + 1e-6, h) - huberized_hinge_loss(m - 1e-6, h)) / 2e-6
    np.testing.assert_allclose(huberized_hinge_dloss(m, h), fd, atol=1e-6)
