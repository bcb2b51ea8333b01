"""The estimator's public schema (issue 42, findings 2 and 3): under label or record privacy,
what a fit publishes about its structure (classes_, shapes, the type of n_iter_, the message
size, its warnings, whether it is refused) comes from the parameters and public constants,
never from the private rows. Two neighbouring data sets (one record changed, both inside the
declared domain) give the same structure (under label privacy, but for the warning naming a
badly scaled column: it reads the features, which that mode makes public); data outside the
domain (a label outside ``classes``, |x| >= MAX_ABS_FEATURE) is refused in one line;
``classes=None`` under a privacy mode reads the labels from y and says so with a
PrivacyLeakWarning."""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pytest

from dpnet.data.dataset import MAX_ABS_FEATURE
from dpnet.errors import ConfigError
from dpnet.estimators import DecentralizedGroupLassoLogistic
from dpnet.privacy import BudgetAccountant, PrivacyLeakWarning

MODES = {
    "label": {"privacy": "label", "epsilon": 1.0},
    "record": {"privacy": "record", "epsilon": 1.0, "row_bound": 1.0},
}
BACKENDS = ("simulated", "threads")
N = 24
QUIET = "ignore::sklearn.exceptions.ConvergenceWarning"  # 5 rounds do not converge
TOO_LARGE = re.escape(f"magnitude >= {MAX_ABS_FEATURE:.0e}")  # the loaders' message


def _features(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((N, 3))


def _model(mode: str, backend: str = "simulated", **params: Any):
    # record privacy spends its budget over max_rounds rounds: 5 keep the file fast, and no
    # fit converges to tol in 5 rounds, so the two neighbours' ConvergenceWarnings agree
    settings = {"n_machines": 4, "max_rounds": 5, "random_state": 0, "backend": backend}
    return DecentralizedGroupLassoLogistic(0.1, **MODES[mode], **(settings | params))


def _structure(model, X: np.ndarray, y: np.ndarray) -> tuple:
    """What a fit publishes about its structure: (outcome, warnings as (category, message))."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model.fit(X, y)
        except ValueError as err:
            outcome: tuple = ("refused", type(err).__name__, str(err))
        else:
            outcome = (
                "fitted",
                model.classes_.tolist(),
                model.coef_.shape,
                model.machine_coefs_.shape,
                type(model.n_iter_),
                model.traffic_["bytes_per_message"],
            )
    return outcome, sorted({(w.category.__name__, str(w.message)) for w in caught})


def _one_label_pair(values: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(y, y'): y's first record is the only one of class values[1]; y' relabels it."""
    y = np.array([values[0]] * N, dtype=np.asarray(values).dtype)
    y_neighbour = y.copy()
    y[0] = values[1]
    return y, y_neighbour


def _neighbours(case: str) -> tuple[tuple, tuple, dict]:
    """((X, y), (X', y'), params): one record changed, both data sets inside the domain."""
    X = _features()
    if case == "extreme-feature":  # 1e99 < MAX_ABS_FEATURE: inside the domain
        y = np.where(X[:, 0] > 0, "yes", "no")
        X_far = X.copy()
        X[0, 0], X_far[0, 0] = 1.0, 1e99
        return (X, y), (X_far, y), {"classes": ("no", "yes")}
    # a label value no other row has: strings, and a non-integer float (a "continuous"
    # target to scikit-learn's type_of_target, which refused it, and fitted its neighbour)
    values = ("no", "yes") if case == "only-yes" else (0.0, 0.5)
    y, y_neighbour = _one_label_pair(values)
    return (X, y), (X, y_neighbour), {"classes": values}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("case", ["only-yes", "only-half", "extreme-feature"])
def test_neighbours_publish_the_same_structure(case: str, mode: str, backend: str) -> None:
    (X, y), (X_n, y_n), params = _neighbours(case)
    first = _structure(_model(mode, backend, **params), X, y)
    second = _structure(_model(mode, backend, **params), X_n, y_n)
    if case == "extreme-feature" and mode == "label":
        # label privacy makes the features public (its neighbours share them): the warning
        # that names a badly scaled column reads them, and names the 1e99 column of X' alone
        scaled = [w for w in second[1] if w[0] == "BadlyScaledWarning"]
        assert len(scaled) == 1 and "column 0 has standard deviation" in scaled[0][1]
        assert not [w for w in first[1] if w[0] == "BadlyScaledWarning"]
        second = (second[0], [w for w in second[1] if w[0] != "BadlyScaledWarning"])
    assert first == second
    assert first[0][0] == "fitted"
    assert first[0][1] == list(params["classes"])  # the declared pair, not y's values
    assert not [w for w in first[1] if w[0] == "RuntimeWarning"]


@pytest.mark.filterwarnings(QUIET)
@pytest.mark.parametrize("mode", sorted(MODES))
def test_undeclared_classes_warn_under_privacy(mode: str) -> None:
    X = _features()
    y = np.where(X[:, 0] > 0, "yes", "no")
    with pytest.warns(PrivacyLeakWarning) as caught:
        model = _model(mode).fit(X, y)
    leaks = [w for w in caught if w.category is PrivacyLeakWarning]
    assert len(leaks) == 1
    message = str(leaks[0].message)
    assert "\n" not in message and "private y" in message and "classes=(" in message
    assert "yes" not in message  # the values it read are in classes_, not in the message
    assert leaks[0].filename == __file__  # points at the caller of fit
    assert model.privacy_["classes_public"] is False
    assert "public label set" in model.privacy_["guarantee"]
    assert model.classes_.tolist() == ["no", "yes"]


@pytest.mark.filterwarnings(QUIET)
@pytest.mark.parametrize("mode", sorted(MODES))
def test_declared_classes_do_not_warn(mode: str) -> None:
    X = _features()
    y = np.where(X[:, 0] > 0, "yes", "no")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        model = _model(mode, classes=("no", "yes")).fit(X, y)
    assert model.privacy_["classes_public"] is True
    assert "public label set" not in model.privacy_["guarantee"]


def test_no_privacy_no_leak_warning() -> None:
    """epsilon=inf (asked for: not private) promises nothing: the labels are read from y
    silently."""
    X = _features()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        model = DecentralizedGroupLassoLogistic(
            0.1, epsilon=np.inf, n_machines=4, max_rounds=5, random_state=0
        )
        with pytest.warns(Warning) as caught:  # only the ConvergenceWarning of 5 rounds
            model.fit(X, np.where(X[:, 0] > 0, 7, 2))
    assert not [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert model.classes_.tolist() == [2, 7]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_label_outside_the_declared_pair_is_refused(mode: str) -> None:
    """Outside the declared domain: a one-line ValueError naming no value, the same for a
    string and for a value of another type (no TypeError from comparing them), nothing charged."""
    X = _features()
    y = np.array(["no", "yes"] * (N // 2), dtype=object)
    messages = set()
    for odd in ("maybe", 3):
        y_odd = y.copy()
        y_odd[5] = odd
        accountant = BudgetAccountant(10.0, 0.5)
        with pytest.raises(ValueError, match="outside classes") as refused:
            _model(mode, classes=("no", "yes"), accountant=accountant).fit(X, y_odd)
        message = str(refused.value)
        assert "\n" not in message and "maybe" not in message and "3" not in message
        assert accountant.spent == (0.0, 0.0)
        messages.add(message)
    assert len(messages) == 1


@pytest.mark.filterwarnings(QUIET)
@pytest.mark.parametrize("backend", BACKENDS)
def test_absurd_magnitudes_are_refused_as_the_loaders_refuse_them(backend: str) -> None:
    """|x| >= MAX_ABS_FEATURE (1e200 here) is outside the data domain of the loaders
    (dpnet.data.dataset) and of the estimator: the same one-line error for both privacy
    modes, before anything is charged or computed (it overflowed for that data set only)."""
    X = _features()
    X[3, 1] = -1e200
    y = np.where(X[:, 0] > 0, "yes", "no")
    messages = set()
    for mode in sorted(MODES):
        accountant = BudgetAccountant(10.0, 0.5)
        model = _model(mode, backend, classes=("no", "yes"), accountant=accountant)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no overflow warning on the way
            with pytest.raises(ValueError, match=TOO_LARGE) as err:
                model.fit(X, y)
        assert accountant.spent == (0.0, 0.0)
        messages.add(str(err.value))
    (message,) = messages
    assert "\n" not in message
    # at predict time X is public test data: the same domain rule (a refusal, not inf)
    fitted = _model("label", backend, classes=("no", "yes")).fit(_features(), y)
    with pytest.raises(ValueError, match=TOO_LARGE):
        fitted.predict(X)


@pytest.mark.parametrize("classes", [(1, 1), (np.nan, 1.0), (0, 1, 2)])
def test_the_declared_pair_is_checked_before_the_data(classes: tuple) -> None:
    """A bad ``classes`` is a ConfigError whatever the rows hold (here a NaN, which
    scikit-learn's validate_data refused first)."""
    X = _features()
    X[0, 0] = np.nan
    with pytest.raises(ConfigError, match="classes must be two distinct label values"):
        _model("label", classes=classes).fit(X, np.ones(N))
