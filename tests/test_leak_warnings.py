"""Issue 45: every leak around a private fit is warned. The estimator's ``score`` reads raw
held-out labels (warned after a private fit); a transformer fitted in front of it in a Pipeline
reads the private rows under record privacy, or may read the labels (warned by
``dpnet.pipeline``, from the steps' types only); ``dpnet.metrics.PrivateAccuracyScorer`` scores
privately, charged to the accountant."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
from scipy import stats
from sklearn.base import RegressorMixin, clone
from sklearn.feature_selection import SelectKBest
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    Normalizer,
    PolynomialFeatures,
    StandardScaler,
    TargetEncoder,
)

from devtools.audit import extreme_rows, max_sensitivity, replace_one_pairs
from dpnet.baselines.median import DPMedianRegressor
from dpnet.baselines.rdp_admm import (
    ADMMObjPClassifier,
    DPADMMClassifier,
    DPSGDClassifier,
    MPADMMClassifier,
    SSADMMClassifier,
)
from dpnet.errors import PrivacyError
from dpnet.estimators import DecentralizedGroupLassoLogistic
from dpnet.metrics import PrivateAccuracyScorer
from dpnet.pipeline import (
    PrivatePipeline,
    check_pipeline,
    leaking_steps,
    make_private_pipeline,
)
from dpnet.privacy import BudgetAccountant, BudgetExceeded, PrivacyLeakWarning, default_accountant
from dpnet.privacy.discrete import MAX_COUNT_EPSILON, laplace_grid
from dpnet.privacy.leaks import WarnsOnRawScore

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
FAST = {"backend": "simulated", "max_rounds": 5, "n_machines": 2, "classes": (0, 1)}
RECORD = {"privacy": "record", "row_bound": 4.0}


@pytest.fixture(autouse=True)
def fresh_default() -> Iterator[BudgetAccountant]:
    default_accountant().reset()
    yield default_accountant()
    default_accountant().reset()


def _data(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    return X, (X[:, 0] - X[:, 1] > 0).astype(int)


def _leaks(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, PrivacyLeakWarning)]


# --- score ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode,read", [({}, "the labels y"), (RECORD, "rows X and labels y")])
def test_score_after_a_private_fit_warns_and_is_the_plain_accuracy(mode, read):
    X, y = _data()
    model = DecentralizedGroupLassoLogistic(random_state=0, **FAST, **mode).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match=f"{read} as given") as record:
        accuracy = model.score(X, y)
    assert record[0].filename == __file__  # points at the caller
    assert accuracy == np.mean(model.predict(X) == y)


BASELINES = [
    DPMedianRegressor(method="irls", epsilon=1.0, random_state=0),
    DPMedianRegressor(method="coordinate", y_bound=10.0, n_splits=2, random_state=0),
    SSADMMClassifier(epsilon=1.0, random_state=0),
    DPSGDClassifier(epsilon=1.0, random_state=0),
    MPADMMClassifier(epsilon=1.0, random_state=0),
    DPADMMClassifier(epsilon=1.0, random_state=0),
    ADMMObjPClassifier(epsilon=1.0, random_state=0),
]
NOT_PRIVATE = [DPMedianRegressor(method="exact"), SSADMMClassifier(epsilon=None, random_state=0)]


def _baseline_data(model: object) -> tuple[np.ndarray, np.ndarray]:
    X, y = _data()
    if isinstance(model, RegressorMixin):
        return X, X @ np.array([1.0, -0.5, 0.2]) + 0.1 * np.random.default_rng(1).standard_normal(
            60
        )
    return X, y


def test_every_estimator_scores_through_the_one_warning():
    """One helper, not a copy: the estimator's and every baseline's score is the mixin's."""
    for model in [DecentralizedGroupLassoLogistic(), *BASELINES]:
        assert type(model).score is WarnsOnRawScore.score


@pytest.mark.parametrize("model", BASELINES, ids=lambda m: type(m).__name__)
def test_a_baselines_score_after_a_private_fit_warns_and_is_sklearns(model):
    """The single-node baselines (papers 1 and 2) protect whole rows; their scikit-learn score
    reads the rows and labels as given, so after a private fit it warns as the estimator's."""
    X, y = _baseline_data(model)
    model = clone(model).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="rows X and labels y as given") as record:
        value = model.score(X, y)
    assert record[0].filename == __file__  # points at the caller
    predicted = model.predict(X)
    plain = r2_score(y, predicted) if isinstance(model, RegressorMixin) else np.mean(predicted == y)
    assert value == pytest.approx(plain, abs=0, rel=1e-12)
    remedy = "no private R^2" if isinstance(model, RegressorMixin) else "PrivateAccuracyScorer"
    assert remedy in str(record[0].message)


@pytest.mark.parametrize("model", NOT_PRIVATE, ids=lambda m: type(m).__name__)
def test_a_baselines_score_after_a_fit_that_is_not_private_does_not_warn(model):
    X, y = _baseline_data(model)
    model = clone(model).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        model.score(X, y)


def test_score_after_a_fit_that_is_not_private_does_not_warn():
    X, y = _data()
    model = DecentralizedGroupLassoLogistic(epsilon=math.inf, random_state=0, **FAST).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        model.score(X, y)


def test_the_score_warning_depends_on_the_parameters_only():
    """The same warning text for any held-out rows: it is a function of public inputs."""
    X, y = _data()
    model = DecentralizedGroupLassoLogistic(random_state=0, **FAST).fit(X, y)
    texts = set()
    for held_out in (y, 1 - y, np.zeros_like(y)):
        with pytest.warns(PrivacyLeakWarning) as record:
            model.score(X, held_out)
        texts.add(_leaks(record)[0])
    assert len(texts) == 1


def test_grid_search_scoring_with_score_warns():
    X, y = _data()
    model = DecentralizedGroupLassoLogistic(random_state=0, **FAST)
    with pytest.warns(PrivacyLeakWarning, match="score compares"):
        GridSearchCV(model, {"lam": [0.05, 0.5]}, cv=2).fit(X, y)


# --- PrivateAccuracyScorer --------------------------------------------------------------------


class Threshold:
    """A fixed, public model: predicts 1 where the first feature is positive."""

    def predict(self, X):
        return (np.asarray(X)[:, 0] > 0).astype(int)


def test_grid_search_with_the_private_scorer_charges_every_fit_and_score():
    X, y = _data(120)
    budget = BudgetAccountant(20.0)
    model = DecentralizedGroupLassoLogistic(random_state=0, accountant=budget, **FAST)
    scorer = PrivateAccuracyScorer(0.5, accountant=budget, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        search = GridSearchCV(model, {"lam": [0.05, 0.5]}, cv=3, scoring=scorer).fit(X, y)
    labels = [c.label for c in budget.charges]
    assert labels.count("DecentralizedGroupLassoLogistic.fit") == 2 * 3 + 1  # and the refit
    assert labels.count("PrivateAccuracyScorer") == 2 * 3
    assert budget.spent[0] == pytest.approx(7 * 1.0 + 6 * 0.5)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    # cross_val_score too; and without an accountant the scorer charges the default
    cross_val_score(model.set_params(accountant=None), X, y, cv=2, scoring=scorer.__class__(1.0))
    assert [c.label for c in default_accountant().charges].count("PrivateAccuracyScorer") == 2


def test_the_scorer_is_refused_by_the_cap_before_it_compares_labels():
    X, y = _data()
    budget = BudgetAccountant(0.4)

    class Labels(np.ndarray):  # would show a comparison with the labels
        def __eq__(self, other):
            raise AssertionError("the labels were compared")

    with pytest.raises(BudgetExceeded):
        PrivateAccuracyScorer(0.5, accountant=budget)(Threshold(), X, y.view(Labels))
    assert budget.charges == ()


def test_the_scorer_refuses_what_would_break_its_guarantee():
    X, y = _data()
    for bad in (0.0, -1.0, math.inf, math.nan, MAX_COUNT_EPSILON * 1.001):
        with pytest.raises(PrivacyError, match="epsilon"):
            PrivateAccuracyScorer(bad)
    PrivateAccuracyScorer(MAX_COUNT_EPSILON)
    with pytest.raises(PrivacyError, match="random_state"):
        PrivateAccuracyScorer(1.0, random_state=np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(PrivacyError, match="sample_weight"):
        PrivateAccuracyScorer(1.0)(Threshold(), X, y, sample_weight=np.ones(len(y)))
    with pytest.raises(ValueError, match="one prediction per label"):
        PrivateAccuracyScorer(1.0)(Threshold(), X, y[:-1])
    assert default_accountant().charges == ()  # nothing refused was charged


def test_a_seeded_scorer_is_reproducible_and_draws_anew_each_call():
    X, y = _data()
    one, two = (
        PrivateAccuracyScorer(1.0, random_state=3),
        PrivateAccuracyScorer(1.0, random_state=3),
    )
    calls = [one(Threshold(), X, y) for _ in range(3)]
    assert calls == [two(Threshold(), X, y) for _ in range(3)]
    assert len(set(calls)) == 3  # call i draws from child i of the seed


def test_noise_law_is_the_discrete_laplace_of_scale_one_over_epsilon():
    """released * n - k is discrete Laplace on the grid 2^-10 with scale (1 + 2^-10)/epsilon,
    whatever the count k: KS against the continuous Laplace of that scale passes, and rejects
    half the scale; the variance matches noise_std."""
    eps, n_draws = 0.7, 4000
    X, _ = _data(20)
    g = laplace_grid(1.0, 1)
    scale = (1.0 + g) / eps
    for y in (Threshold().predict(X), 1 - Threshold().predict(X)):  # k = 20 and k = 0
        k = PrivateAccuracyScorer.correct_count(Threshold().predict(X), y)
        scorer = PrivateAccuracyScorer(eps, accountant=BudgetAccountant(math.inf, math.inf))
        noise = np.array([scorer(Threshold(), X, y) for _ in range(n_draws)]) * len(y) - k
        assert np.all(noise / g == np.rint(noise / g))  # on the grid
        assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 1e-3
        assert stats.kstest(noise, stats.laplace(scale=scale / 2).cdf).pvalue < 1e-6
        assert np.std(noise) / len(y) == pytest.approx(
            PrivateAccuracyScorer.noise_std(eps, len(y)), rel=0.08
        )


def test_the_count_changes_by_at_most_one_between_adversarial_neighbours():
    """devtools.audit's search over replace-one neighbours of the held-out rows, with records
    on the boundary of any row bound (both signs of every axis, random directions, labels
    1, 0 and -1): the count's change attains the stated sensitivity 1 and never exceeds it."""
    rng = np.random.default_rng(5)
    X, y = _data(8)
    candidates = extreme_rows(3, 3.0, 1.0, rng, n_random=6)

    def count(data):
        X_, y_ = data
        return PrivateAccuracyScorer.correct_count(Threshold().predict(X_), y_)

    worst = max_sensitivity(count, replace_one_pairs(X, y, candidates, indices=[0, 5]), norm=1)
    assert worst == 1.0


# --- pipelines --------------------------------------------------------------------------------


def test_record_privacy_warns_for_a_fitted_scaler_in_front():
    X, y = _data()
    model = DecentralizedGroupLassoLogistic(random_state=0, **FAST, **RECORD)
    pipe = make_private_pipeline(StandardScaler(), model)
    assert isinstance(pipe, PrivatePipeline)
    with pytest.warns(
        PrivacyLeakWarning, match="'standardscaler': StandardScaler's fit reads"
    ) as record:
        pipe.fit(X, y)
    assert record[0].filename == __file__  # points at the caller of fit
    assert pipe.predict(X).shape == y.shape  # and fits as a Pipeline does


def test_label_privacy_takes_a_scaler_the_features_are_public():
    X, y = _data()
    model = DecentralizedGroupLassoLogistic(random_state=0, **FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        make_private_pipeline(StandardScaler(), PolynomialFeatures(2), model).fit(X, y)


@pytest.mark.parametrize(
    "step,label,record",
    [
        (StandardScaler(), False, True),
        (Normalizer(), False, False),  # no fit: row by row
        (FunctionTransformer(np.tanh), False, False),
        (PolynomialFeatures(2), False, False),  # its fit reads the width only
        (TargetEncoder(), True, True),  # reads y
        (SelectKBest(k=2), True, True),  # reads y; its tags do not say so
        (make_pipeline(StandardScaler()), True, True),  # nested: dpnet cannot tell
        ("passthrough", False, False),
    ],
)
def test_which_steps_leak_under_each_mode(step, label, record):
    for params, leaks in (({}, label), (RECORD, record), ({"epsilon": math.inf}, False)):
        model = DecentralizedGroupLassoLogistic(**FAST, **params)
        pipe = PrivatePipeline([("step", step), ("model", model)])
        assert bool(leaking_steps(pipe)) is leaks, params


def test_the_check_reads_no_data_and_follows_set_params():
    """check_pipeline works on a plain Pipeline, before any fit (structure only), and a
    PrivatePipeline checks again at every fit, so a grid over its steps is checked per fit."""
    model = DecentralizedGroupLassoLogistic(**FAST, **RECORD)
    plain = make_pipeline(StandardScaler(), model)
    with pytest.warns(PrivacyLeakWarning) as record:
        assert [name for name, _ in check_pipeline(plain)] == ["standardscaler"]
    assert record[0].filename == __file__
    X, y = _data()
    pipe = make_private_pipeline(StandardScaler(), model)
    pipe.set_params(standardscaler="passthrough")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        pipe.fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="reads the private rows"):
        GridSearchCV(
            pipe,
            {"standardscaler": ["passthrough", StandardScaler()]},
            cv=2,
            scoring=PrivateAccuracyScorer(1.0),
        ).fit(X, y)
    with pytest.raises(TypeError, match="Pipeline"):
        leaking_steps(model)  # type: ignore[arg-type]
