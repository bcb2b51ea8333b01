"""Issue 45: spending is no longer silent. A fit given no ``accountant=`` charges the
process-wide, uncapped default accountant (basic composition: the epsilons add up), which can
be queried and reset; epsilon = inf charges nothing, a given accountant is charged alone."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

import dpnet.privacy
from dpnet.baselines.median import DPMedianRegressor
from dpnet.estimators import DecentralizedGroupLassoLogistic
from dpnet.privacy import BudgetAccountant, charge, default_accountant

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
FAST = {"backend": "simulated", "max_rounds": 5, "n_machines": 2, "classes": (0, 1)}


@pytest.fixture(autouse=True)
def fresh_default() -> Iterator[BudgetAccountant]:
    """Every test starts (and leaves) the default accountant empty: order does not matter."""
    default_accountant().reset()
    yield default_accountant()
    default_accountant().reset()


def _data(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 3))
    return X, (X[:, 0] > 0).astype(int)


def test_the_default_is_one_uncapped_accountant_exported_lazily():
    assert dpnet.privacy.default_accountant is default_accountant
    assert default_accountant() is default_accountant()
    assert default_accountant().epsilon == math.inf == default_accountant().remaining[0]


def test_two_private_fits_add_up_and_reset_empties(fresh_default):
    X, y = _data()
    model = DecentralizedGroupLassoLogistic(epsilon=1.0, random_state=0, **FAST)
    model.fit(X, y)
    assert model.privacy_["accountant"] == {
        "charged": "default",
        "spent_epsilon": pytest.approx(1.0),  # ln(p / (1 - p)) of the keep probability
        "spent_delta": 0.0,
        "charges": 1,
    }
    model.fit(X, y)
    assert fresh_default.spent == (pytest.approx(2.0), 0.0)
    assert [c.label for c in fresh_default.charges] == ["DecentralizedGroupLassoLogistic.fit"] * 2
    assert model.privacy_["accountant"]["spent_epsilon"] == pytest.approx(2.0)
    fresh_default.reset()
    assert fresh_default.spent == (0.0, 0.0) and fresh_default.charges == ()
    assert default_accountant() is fresh_default  # reset empties it, it is not replaced


def test_record_privacy_charges_its_delta_too(fresh_default):
    X, y = _data()
    DecentralizedGroupLassoLogistic(
        privacy="record", row_bound=1.0, epsilon=0.5, delta=1e-6, random_state=0, **FAST
    ).fit(X, y)
    assert fresh_default.spent == (pytest.approx(0.5), pytest.approx(1e-6))


def test_no_privacy_charges_nothing(fresh_default):
    X, y = _data()
    model = DecentralizedGroupLassoLogistic(epsilon=np.inf, random_state=0, **FAST).fit(X, y)
    assert model.privacy_["accountant"] is None and fresh_default.charges == ()
    DPMedianRegressor(method="exact").fit(X, X[:, 0])
    assert fresh_default.charges == ()


def test_a_given_accountant_is_charged_alone(fresh_default):
    X, y = _data()
    budget = BudgetAccountant(5.0)
    model = DecentralizedGroupLassoLogistic(epsilon=1.0, accountant=budget, random_state=0, **FAST)
    model.fit(X, y)
    assert budget.spent == (pytest.approx(1.0), 0.0) and fresh_default.charges == ()
    assert model.privacy_["accountant"]["charged"] == "given"


def test_the_baselines_charge_the_default_too(fresh_default):
    X, _ = _data()
    DPMedianRegressor(epsilon=0.5, random_state=0).fit(X, X[:, 0])
    (charged,) = fresh_default.charges
    assert charged.epsilon == 0.5 and "DPMedianRegressor" in charged.label


def test_a_grid_search_is_no_longer_silent(fresh_default):
    X, y = _data(60)
    model = DecentralizedGroupLassoLogistic(epsilon=1.0, random_state=0, **FAST)
    GridSearchCV(model, {"lam": [0.01, 0.1, 1.0]}, cv=2).fit(X, y)
    assert len(fresh_default.charges) == 3 * 2 + 1  # 3 lambdas x 2 folds, and the refit
    assert fresh_default.spent[0] == pytest.approx(7.0)
    fresh_default.reset()
    GridSearchCV(model, {"lam": [0.01, 0.1, 1.0]}, cv=2, refit=False).fit(X, y)
    assert len(fresh_default.charges) == 6


def test_concurrent_charges_are_all_counted(fresh_default):
    def spend() -> None:
        for _ in range(200):
            charge(None, 0.01, 0.0, label="thread")

    threads = [threading.Thread(target=spend) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fresh_default.charges) == 800
    assert fresh_default.spent[0] == pytest.approx(8.0)


def test_a_capped_accountant_refuses_concurrent_overspending():
    budget = BudgetAccountant(1.0)
    refused = []

    def spend() -> None:
        for _ in range(50):
            try:
                budget.charge(0.01, 0.0, label="thread")
            except dpnet.privacy.BudgetExceeded:
                refused.append(1)

    threads = [threading.Thread(target=spend) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(budget.charges) == 100 and len(refused) == 100


def test_an_accountant_survives_pickling(fresh_default):
    import pickle

    charge(None, 0.5, 0.0, label="a")
    copy = pickle.loads(pickle.dumps(fresh_default))
    assert copy.spent == (0.5, 0.0)
    copy.charge(0.5, 0.0, label="b")  # a fresh lock
    assert fresh_default.spent == (0.5, 0.0)
