"""scikit-learn's own estimator checks, and what label privacy adds to them."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, GroupKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from dpnet.estimators import DecentralizedGroupLassoLogistic


@pytest.mark.slow
@parametrize_with_checks([DecentralizedGroupLassoLogistic(random_state=0)])  # as a user gets it
def test_sklearn_checks(estimator, check):
    check(estimator)


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    return X, X[:, 0] - X[:, 1] > 0


def test_predicts_the_users_labels():
    X, pos = _data()
    for labels in (("no", "yes"), (0, 1), (-1, 1), (2, 7)):
        y = np.where(pos, labels[1], labels[0])
        model = DecentralizedGroupLassoLogistic(0.01, epsilon=np.inf, random_state=0).fit(X, y)
        assert list(model.classes_) == list(labels)
        assert np.mean(model.predict(X) == y) > 0.9
        assert model.n_features_in_ == 4


def test_private_by_default():
    """The default is label privacy at epsilon = 1 (it was inf, with a guarantee-like text and
    epsilon None); epsilon=inf is asked for, and then the guarantee says plainly "not private"."""
    X, pos = _data()
    model = DecentralizedGroupLassoLogistic(classes=(0, 1), random_state=0).fit(X, pos.astype(int))
    assert model.get_params()["epsilon"] == 1.0
    assert model.privacy_["epsilon"] == pytest.approx(1.0)
    assert model.privacy_["keep_prob"] == pytest.approx(np.e / (1 + np.e))
    assert model.privacy_["guarantee"].startswith("epsilon-label-DP per machine")
    off = DecentralizedGroupLassoLogistic(epsilon=np.inf, random_state=0).fit(X, pos.astype(int))
    assert off.privacy_["epsilon"] is None and off.privacy_["keep_prob"] == 1.0
    assert off.privacy_["guarantee"] == "not private (epsilon inf): labels used as given"


def test_public_classes_let_a_one_class_shard_fit():
    """With classes declared (public), a training set holding one class is valid input."""
    X, _ = _data()
    model = DecentralizedGroupLassoLogistic(
        0.1, epsilon=1.0, classes=("no", "yes"), random_state=0
    ).fit(X, np.full(len(X), "yes"))
    assert model.privacy_["classes_public"] and set(model.predict(X)) <= {"no", "yes"}
    with pytest.raises(ValueError, match="Only binary classification"):
        DecentralizedGroupLassoLogistic().fit(X, np.full(len(X), "yes"))
    with pytest.raises(ValueError, match="outside classes"):
        DecentralizedGroupLassoLogistic(classes=(0, 1)).fit(X, np.arange(len(X)) % 3)


def test_works_with_clone_pipeline_and_model_selection():
    X, pos = _data(200)
    y = pos.astype(int)
    model = DecentralizedGroupLassoLogistic(0.01, epsilon=np.inf, tol=1e-6, random_state=1)
    assert clone(model).get_params() == model.get_params()
    pipe = make_pipeline(StandardScaler(), model)
    assert cross_val_score(pipe, X, y, cv=3).mean() > 0.9
    search = GridSearchCV(model, {"lam": [0.01, 0.5]}, cv=3).fit(X, y)
    assert search.best_params_ == {"lam": 0.01}


def test_probabilities_are_the_logistic_models():
    """predict_proba was missing; the reference is scikit-learn's LogisticRegression holding
    the same coefficients."""
    X, pos = _data()
    model = DecentralizedGroupLassoLogistic(0.01, random_state=0).fit(X, np.where(pos, "y", "n"))
    reference = LogisticRegression()
    reference.classes_, reference.n_features_in_ = model.classes_, model.n_features_in_
    reference.coef_, reference.intercept_ = model.coef_[None, :], np.array([model.intercept_])
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba, reference.predict_proba(X), rtol=1e-12, atol=1e-15)
    # log P = -log(1 + exp(-+d)), kept exact where 1 - P rounds (np.log(proba) loses it)
    decision = model.decision_function(X)
    exact = -np.logaddexp(0.0, np.column_stack([decision, -decision]))
    np.testing.assert_allclose(model.predict_log_proba(X), exact, rtol=1e-13)
    assert (model.classes_[proba.argmax(axis=1)] == model.predict(X)).all()


def test_feature_groups_are_a_parameter_and_row_groups_reach_the_splitter():
    """``fit(X, y, groups)`` took the *feature* groups, so GridSearchCV's row groups (routed
    to its splitter) could not reach a GroupKFold: now the feature groups are the model's."""
    X, pos = _data(200)
    y = pos.astype(int)
    model = DecentralizedGroupLassoLogistic(0.1, groups=[0, 0, 1, 1], random_state=1)
    search = GridSearchCV(model, {"lam": [0.1, 2.0]}, cv=GroupKFold(4))
    search.fit(X, y, groups=np.arange(200) % 4)
    assert search.best_params_ == {"lam": 0.1}
    assert search.best_estimator_.groups == [0, 0, 1, 1]
    # whole groups enter and leave: columns 0 and 1 are one group, 2 and 3 the other
    assert search.best_estimator_.selected_groups_.tolist() == [0]
    one_per_column = DecentralizedGroupLassoLogistic(0.1, random_state=1).fit(X, y)
    assert one_per_column.selected_groups_.tolist() == [0, 1]
    with pytest.raises(ValueError, match="one id per column"):
        DecentralizedGroupLassoLogistic(groups=[0, 1]).fit(X, y)
