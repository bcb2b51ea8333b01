"""Bad input gets one-line errors naming the problem; scikit-learn style API; the rank-0 entry
point records every fit in the ledger and returns JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import sparse
from sklearn.exceptions import DataConversionWarning, NotFittedError

import dpnet
from dpnet.baselines.rdp_admm import (
    TUNED_SETTINGS,
    ADMMObjPClassifier,
    DPADMMClassifier,
    DPSGDClassifier,
    MPADMMClassifier,
    SSADMMClassifier,
    make_estimators,
    run_rdp_admm_baselines,
)
from dpnet.baselines.rdp_admm.data import coverage, make_synthetic, true_model
from dpnet.errors import ConfigError, DataError, PrivacyError
from dpnet.privacy import PrivacyLedger

ALL = [SSADMMClassifier, DPSGDClassifier, MPADMMClassifier, DPADMMClassifier, ADMMObjPClassifier]


def data(n: int = 50) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 3))
    X /= 2 * np.linalg.norm(X, axis=1, keepdims=True)
    return X, np.where(X[:, 0] > 0, 1, -1)


@pytest.mark.parametrize("cls", ALL)
def test_bad_data(cls) -> None:
    X, y = data()
    est = cls(epsilon=None)
    with pytest.raises(DataError, match="NaN"):
        est.fit(np.where(X > 0.4, np.nan, X), y)
    with pytest.raises(DataError, match="infinity"):
        est.fit(np.where(X > 0.4, np.inf, X), y)
    with pytest.raises(DataError, match="Only binary classification is supported"):
        est.fit(X, np.arange(len(y)) % 3)
    with pytest.raises(DataError, match="two classes, got 1 class"):
        est.fit(X, np.full(len(y), "yes"))
    with pytest.raises(DataError, match="Unknown label type: continuous"):
        est.fit(X, X[:, 0])
    with pytest.raises(DataError, match="inconsistent numbers of samples"):
        est.fit(X, y[:-1])
    with pytest.raises(TypeError, match="[Ss]parse"):
        est.fit(sparse.csr_matrix(X), y)
    with pytest.raises(NotFittedError):
        est.predict(X)
    est.fit(X, y)
    with pytest.raises(DataError, match="3 features"):
        est.predict(X[:, :2])


@pytest.mark.parametrize("cls", ALL)
def test_labels_come_back_as_the_users_labels(cls) -> None:
    """classes_ in the user's labels; {0, 1} and {-1, +1} are public, so a one-class y within
    them still gets both classes (classes_ reveals nothing about the rows)."""
    X, y = data(200)
    kw = {"epsilon": None, "random_state": 0}
    for labels in (("no", "yes"), (0, 1), (-1, 1), (2, 7), (False, True)):
        yy = np.where(y > 0, labels[1], labels[0])
        est = cls(**kw).fit(X, yy)
        assert list(est.classes_) == list(labels) and est.n_features_in_ == 3
        assert set(est.predict(X)) <= set(labels)
        assert est.score(X, yy) > 0.85
        with pytest.warns(DataConversionWarning):
            column = cls(**kw).fit(X, yy[:, None])
        np.testing.assert_array_equal(column.coef_, est.coef_)
    assert list(cls(**kw).fit(X, np.zeros(len(y))).classes_) == [0.0, 1.0]
    assert list(cls(**kw).fit(X, np.full(len(y), -1)).classes_) == [-1, 1]


@pytest.mark.parametrize("cls", ALL)
def test_bad_parameters(cls) -> None:
    X, y = data()
    with pytest.raises(ConfigError, match="lam"):
        cls(lam=-1.0, epsilon=None).fit(X, y)
    with pytest.raises(ConfigError, match="loss"):
        cls(loss="hinge", epsilon=None).fit(X, y)
    with pytest.raises(ConfigError, match="epsilon"):
        cls(epsilon=-1.0).fit(X, y)
    with pytest.raises(ConfigError, match="delta"):
        cls(epsilon=1.0, delta=0.0).fit(X, y)


def test_bad_noise_and_sampling() -> None:
    X, y = data()
    with pytest.raises(ConfigError, match="either epsilon or noise_multiplier"):
        SSADMMClassifier(epsilon=1.0, noise_multiplier=1.0).fit(X, y)
    with pytest.raises(ConfigError, match="noise_multiplier"):
        MPADMMClassifier(epsilon=None, noise_multiplier=-1.0).fit(X, y)
    with pytest.raises(ConfigError, match="sampling"):
        SSADMMClassifier(epsilon=None, sampling="shuffle").fit(X, y)
    with pytest.raises(ConfigError, match="batch_size"):
        DPSGDClassifier(epsilon=None, batch_size=500).fit(X, y)
    with pytest.raises(ConfigError, match="perturb"):
        MPADMMClassifier(epsilon=None, perturb="z").fit(X, y)
    with pytest.raises(PrivacyError, match="Jacobian"):
        ADMMObjPClassifier(epsilon=0.01, n_iter=10, rho=0.01).fit(X, y)
    with pytest.raises(ConfigError, match="n_iter"):
        DPADMMClassifier(epsilon=None, n_iter=0).fit(X, y)


def test_sklearn_style_api() -> None:
    X, y = data(200)
    est = SSADMMClassifier(1e-3, epsilon=None, n_epochs=5, eta0=8.0, random_state=0)
    assert est.fit(X, y) is est
    assert est.get_params()["eta0"] == 8.0 and est.set_params(rho=0.3).rho == 0.3
    assert set(np.unique(est.predict(X))) <= {-1, 1}
    np.testing.assert_allclose(est.decision_function(X), X @ est.coef_)
    assert est.score(X, y) > 0.9  # separable by the first feature
    same = SSADMMClassifier(1e-3, epsilon=None, n_epochs=5, eta0=8.0, rho=0.3, random_state=0)
    np.testing.assert_array_equal(same.fit(X, y).coef_, est.fit(X, y).coef_)
    assert dpnet.SSADMMClassifier is SSADMMClassifier
    with pytest.raises(ValueError, match="Invalid parameter 'alpha'"):
        est.set_params(alpha=1.0)


def test_synthetic_design_and_coverage() -> None:
    X, y = make_synthetic(20_000, rng=np.random.default_rng(0))
    assert X.shape == (20_000, 101) and np.linalg.norm(X, axis=1).max() <= 1 + 1e-12
    assert abs(np.mean(y == 1) - 0.5) < 0.02  # paper: majority frequency 0.500
    s = X[:, :100] * np.sqrt(15.0**2 + 1)  # undo the data-independent scaling
    c = np.corrcoef(s[:, :4], rowvar=False)
    np.testing.assert_allclose(c[0, 1:], [0.5, 0.25, 0.125], atol=0.03)
    assert coverage(np.append(true_model(), 9.0), 20) == 1.0
    reverse = np.arange(100, 0, -1.0)[::-1]  # largest magnitudes on the irrelevant features
    assert coverage(reverse, 20) == 0.0 and coverage(reverse, 90) == 0.5


def test_run_rdp_admm_baselines_records_every_fit() -> None:
    ledger = PrivacyLedger(1e-8)
    out = run_rdp_admm_baselines(epsilon=1.0, delta=1e-8, seed=0, ledger=ledger)
    json.dumps(out)
    assert set(out["methods"]) == {"ssADMM", "DP-SGD", "mpADMM", "DP-ADMM", "ADMM-objP"}
    assert len(ledger.releases) == 5 and all(r.machine is None for r in ledger.releases)
    for name, res in out["methods"].items():
        eps = res["privacy"]["epsilon"]
        assert (eps == "inf") if name == "ADMM-objP" else (eps <= 1.0), name
        assert 0.5 < res["test_accuracy"] <= 1.0
    assert "guarantee_caveat" in out["methods"]["ADMM-objP"]["privacy"]
    # ADMM-objP has no established guarantee: the ledger's total is inf, not 5 epsilons' worth
    assert ledger.epsilon() == math.inf and ledger.pure_epsilon() == math.inf
    # the four accounted fits at epsilon = 1 on the same rows compose to more than 1, less than 4
    assert 1.0 < out["accounted_fits"]["epsilon"] < 4.0
    assert set(out["not_established"]) == {"ADMM-objP"}
    assert out["true_model_test_accuracy"] > 0.9
    assert not math.isnan(out["methods"]["ssADMM"]["test_objective"])


@pytest.mark.parametrize("loss", ["logistic", "huberized_hinge"])
def test_make_estimators_applies_the_synthetic_tuned_settings(loss: str) -> None:
    ests = make_estimators(lam=1e-3, epsilon=0.5, delta=1e-7, seed=3, loss=loss)
    for name, setting in TUNED_SETTINGS[loss].items():
        params = ests[name].get_params()
        assert {k: params[k] for k in setting} == setting, name
        assert (params["lam"], params["loss"], params["epsilon"], params["delta"]) == (
            1e-3,
            loss,
            0.5,
            1e-7,
        )
    short = make_estimators(
        lam=1e-3, epsilon=0.5, delta=1e-7, seed=3, loss=loss, n_epochs=3, full_batch_epochs=7
    )
    assert short["ssADMM"].n_epochs == short["DP-SGD"].n_epochs == 3
    assert short["mpADMM"].n_epochs == short["DP-ADMM"].n_iter == 7
    with pytest.raises(ConfigError, match="loss"):
        make_estimators(lam=1e-3, epsilon=0.5, delta=1e-7, seed=3, loss="hinge")


def test_each_method_draws_its_own_noise_stream() -> None:
    """Sharing one seed between fits (or with the data) would correlate their noise, which
    sequential composition does not allow."""
    seeds = [
        e.random_state for e in make_estimators(lam=1e-3, epsilon=0.5, delta=1e-7, seed=3).values()
    ]
    assert len(set(seeds)) == 5 and 3 not in seeds
    data_stream = np.random.default_rng(np.random.SeedSequence(3).spawn(1)[0]).random(4)
    for s in seeds:
        assert not np.array_equal(np.random.default_rng(s).random(4), data_stream)
    assert seeds == [
        e.random_state for e in make_estimators(lam=1e-3, epsilon=0.5, delta=1e-7, seed=3).values()
    ]
    unseeded = make_estimators(lam=1e-3, epsilon=0.5, delta=1e-7, seed=None)
    assert all(e.random_state is None for e in unseeded.values())


@pytest.mark.parametrize("cls", ALL)
def test_rows_beyond_the_bound_are_clipped_to_it(cls) -> None:
    """Rows outside the public ball were refused, so no default estimator fitted standardized
    data; now each row is scaled onto the ball, x * min(1, R / ||x||), as diffprivlib does
    (per record: the guarantee holds for the rows given)."""
    X, y = data()
    wide = 4 * X  # norms 2: every row beyond R = 1
    wide[::3] /= 8  # a third within the ball, left as they are
    norms = np.linalg.norm(wide, axis=1, keepdims=True)
    on_the_ball = wide / np.maximum(norms, 1.0)  # the clipped rows, computed here
    fitted = cls(epsilon=1.0, random_state=0).fit(wide, y)
    reference = cls(epsilon=1.0, random_state=0).fit(on_the_ball, y)
    np.testing.assert_array_equal(fitted.coef_, reference.coef_)
    assert not np.array_equal(fitted.coef_, cls(epsilon=1.0, random_state=1).fit(wide, y).coef_)
