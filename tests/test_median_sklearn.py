"""DPMedianRegressor under scikit-learn's estimator checks, clone, Pipeline and model selection."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_regression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import parametrize_with_checks

from dpnet.baselines.median import DPMedianRegressor, simulate_median_data
from dpnet.baselines.median.numerics import exact_lad

ESTIMATORS = [
    DPMedianRegressor(method="objective", random_state=0),
    DPMedianRegressor(method="irls", random_state=0),
    DPMedianRegressor(method="coordinate", y_bound=10.0, n_splits=4, random_state=0),
]

# check name -> why it cannot pass with differential privacy
EXPECTED_FAILED = {
    "check_non_transformer_estimators_n_iter": (
        "n_iter_ is not released: the iteration counts of the IRLS and Newton solvers (and of "
        "Alg. 3's private start) depend on the data and are not covered by the epsilon-DP "
        "guarantee"
    ),
}


def _expected_failed_checks(estimator: DPMedianRegressor) -> dict[str, str]:
    return EXPECTED_FAILED


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_sklearn_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: e.method)
def test_poor_score_tag_is_due_to_privacy_only(estimator):
    """check_regressors_train's R^2 > 0.5 (skipped by the poor_score tag) fails with the
    defaults (x_bound = 1 clips its standardised rows of norm ~3; Laplace noise at n = 200,
    epsilon = 1) and passes with x_bound = 10 and negligible noise."""
    assert get_tags(estimator).regressor_tags.poor_score
    X, y = make_regression(200, 10, n_informative=1, bias=5.0, noise=20, random_state=42)
    X = StandardScaler().fit_transform(X)  # the data of check_regressors_train
    y = StandardScaler().fit_transform(y[:, None])[:, 0]
    assert clone(estimator).fit(X, y).score(X, y) < 0.5
    loose = clone(estimator).set_params(x_bound=10.0, epsilon=5e5)  # below the noiseless 7.7e5
    assert loose.fit(X, y).score(X, y) > 0.75


def test_clone_pipeline_cross_validation_and_grid_search():
    """Mechanics only: the scaler's statistics and the model selection read the data without
    privacy; only each DPMedianRegressor fit is an epsilon-DP release."""
    X, y = simulate_median_data(3000, rng=np.random.default_rng(3))
    model = DPMedianRegressor(method="objective", epsilon=2.0, random_state=1)
    twin = clone(model)
    assert twin is not model and twin.get_params() == model.get_params()
    assert not hasattr(twin, "coef_")

    mae = "neg_mean_absolute_error"
    exact = exact_lad(X, y, 0.002)
    exact_mae = np.mean(np.abs(exact[0] + X @ exact[1:] - y))
    # standardised rows have norm ~sqrt(3): x_bound = 3 keeps clipping rare
    pipe = make_pipeline(StandardScaler(), clone(model).set_params(x_bound=3.0))
    scores = cross_val_score(pipe, X, y, cv=3, scoring=mae)
    assert scores.shape == (3,) and -scores.mean() < exact_mae + 0.15

    search = GridSearchCV(model, {"epsilon": [0.01, 10.0]}, cv=3, scoring=mae).fit(X, y)
    assert search.best_params_ == {"epsilon": 10.0}
    assert search.best_estimator_.privacy_["total"]["pure_epsilon"] == pytest.approx(10.0)
