"""One privacy budget across fits (like diffprivlib's BudgetAccountant): every estimator takes
``accountant=`` and a fit that would pass its cap is refused before it runs."""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.model_selection import GridSearchCV

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
from dpnet.privacy import BudgetAccountant, BudgetExceeded, PrivacyLeakWarning


def test_charges_add_up_to_the_cap_and_no_further() -> None:
    budget = BudgetAccountant(1.0, 1e-6)
    budget.charge(0.25, 4e-7, label="a")
    budget.charge(0.75, 6e-7, label="b")  # exactly the cap
    assert budget.spent == (1.0, 1e-6) and budget.remaining == (0.0, 0.0)
    with pytest.raises(BudgetExceeded, match="c needs epsilon = 1e-09"):
        budget.charge(1e-9, 0.0, label="c")
    assert [c.label for c in budget.charges] == ["a", "b"]  # the refused one spent nothing


def test_add_remove_guarantees_are_charged_as_replace_one() -> None:
    """Replace = remove + add: (eps, delta) under add/remove is (2 eps, (1 + e^eps) delta)."""
    budget = BudgetAccountant(10.0, 1e-3)
    charged = budget.charge(0.5, 1e-6, label="poisson", relation="add/remove")
    assert (charged.epsilon, charged.delta) == (1.0, (1 + math.exp(0.5)) * 1e-6)


def test_no_guarantee_is_refused_and_copies_share_the_budget() -> None:
    budget = BudgetAccountant(100.0)
    with pytest.raises(BudgetExceeded, match="epsilon = inf"):
        budget.charge(math.inf, 0.0, label="non-private")
    assert copy.deepcopy(budget) is budget  # clone() deep-copies parameters
    model = DecentralizedGroupLassoLogistic(accountant=budget)
    assert clone(model).accountant is budget


def _classification(n: int = 120) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 3))
    return X, (X[:, 0] > 0).astype(int)


ESTIMATORS = [
    (DecentralizedGroupLassoLogistic, {"epsilon": 1.0, "max_rounds": 20}, 1.0),
    (
        DecentralizedGroupLassoLogistic,
        {"privacy": "record", "row_bound": 1.0, "epsilon": 1.0, "max_rounds": 20},
        1.0,
    ),
    (SSADMMClassifier, {"epsilon": 1.0, "n_epochs": 1}, 1.0),
    (DPSGDClassifier, {"epsilon": 1.0, "n_epochs": 1, "sampling": "poisson"}, 2.0),
    (MPADMMClassifier, {"epsilon": 1.0, "n_epochs": 2}, 1.0),
    (DPADMMClassifier, {"epsilon": 1.0, "n_iter": 2}, 1.0),
    (DPMedianRegressor, {"epsilon": 1.0}, 1.0),
]


@pytest.mark.parametrize(
    ("cls", "params", "replace_one"), ESTIMATORS, ids=lambda v: getattr(v, "__name__", None)
)
def test_every_estimator_is_refused_past_the_cap_before_it_fits(cls, params, replace_one):
    """A cap of 1.5 fits: one fit of epsilon 1 is charged, the second refused unfitted."""
    X, y = _classification()
    budget = BudgetAccountant(1.5 * replace_one, 1e-3)
    cls(**params, accountant=budget, random_state=0).fit(X, y)
    (charged,) = budget.charges
    assert charged.epsilon <= replace_one * (1 + 1e-12) and cls.__name__ in charged.label
    second = cls(**params, accountant=budget, random_state=1)
    with pytest.raises(BudgetExceeded):
        second.fit(X, y)
    assert not hasattr(second, "coef_") and len(budget.charges) == 1  # no model, no charge


def test_a_fit_without_a_guarantee_is_refused_by_any_cap():
    X, y = _classification()
    for model in (
        ADMMObjPClassifier(epsilon=5.0, n_iter=1),  # inexact minimiser: no guarantee
        DecentralizedGroupLassoLogistic(epsilon=np.inf),  # not private
        DPMedianRegressor(method="exact"),
    ):
        with pytest.raises(BudgetExceeded):
            clone(model).set_params(accountant=BudgetAccountant(1e6)).fit(X, y)


def test_a_grid_search_charges_every_fit_to_one_budget():
    X, y = _classification(150)
    budget = BudgetAccountant(10.0)
    model = DecentralizedGroupLassoLogistic(epsilon=1.0, max_rounds=30, accountant=budget)
    GridSearchCV(model, {"lam": [0.05, 0.5]}, cv=3).fit(X, y)
    assert len(budget.charges) == 2 * 3 + 1  # 2 lambdas x 3 folds, and the refit
    assert budget.spent[0] == pytest.approx(7.0)


def test_the_fits_a_grid_search_cannot_afford_fail_loudly():
    X, y = _classification(150)
    budget = BudgetAccountant(3.0)
    model = DecentralizedGroupLassoLogistic(epsilon=1.0, max_rounds=30, accountant=budget)
    # 3 of the 6 cross-validation fits are afforded, the others are failed fits; the refit
    # raises
    with pytest.warns(FitFailedWarning, match="BudgetExceeded"), pytest.raises(BudgetExceeded):
        GridSearchCV(model, {"lam": [0.05, 0.5]}, cv=3).fit(X, y)
    assert len(budget.charges) == 3 and budget.spent[0] == pytest.approx(3.0)


# GridSearchCV(n_jobs=2) fits pickled copies of the estimator, its accountant included, in loky
# worker processes: their charges never reach the caller's accountant (before: silently)
_GRID_IN_WORKERS = """
import sys
import numpy as np
from sklearn.model_selection import GridSearchCV
from dpnet.estimators import DecentralizedGroupLassoLogistic
from dpnet.privacy import BudgetAccountant, default_accountant

rng = np.random.default_rng(0)
X = rng.standard_normal((40, 3))
y = (X[:, 0] - X[:, 1] > 0).astype(int)
given = sys.argv[2] != "default"
if sys.argv[2] == "file":
    from dpnet.privacy.budget_file import BudgetFileAccountant

    budget = BudgetFileAccountant("budget.jsonl", 100.0)
else:
    cap = 2.5 if sys.argv[2] == "capped" else 100.0
    budget = BudgetAccountant(cap) if given else default_accountant()
model = DecentralizedGroupLassoLogistic(
    epsilon=1.0, backend="simulated", max_rounds=5, n_machines=2, classes=(0, 1),
    random_state=0, accountant=budget if given else None,
)
try:
    GridSearchCV(model, {"lam": [0.05, 0.5]}, cv=2, n_jobs=int(sys.argv[1])).fit(X, y)
except Exception as exc:  # the capped search's refit
    print(type(exc).__name__, file=sys.stderr)
print(len(budget.charges))
print(getattr(budget, "_spool", None), file=sys.stderr)  # the default's spool, if it has one
"""


_AWAY = "with a copy of an accountant made in process"


_CHILD = "charged that process's default accountant"


def _grid_search(
    tmp_path: Path, n_jobs: int, given: bool = True, accountant: str | None = None
) -> subprocess.CompletedProcess:
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    kind = accountant or ("given" if given else "default")
    return subprocess.run(
        [sys.executable, "-c", _GRID_IN_WORKERS, str(n_jobs), kind],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # away from any checkout: dpnet from PYTHONPATH
        env=env,
        timeout=900,  # imports in three interpreters, on a loaded host
        check=True,
    )


@pytest.mark.timeout(960)  # above the subprocess's 900 s
def test_fits_in_worker_processes_charge_the_callers_accountant(tmp_path):
    """The 2 x 2 cross-validation fits run in the workers, on pickled copies of the
    accountant: the copies charge its spool, so the caller's accountant holds all five
    charges and nothing warns (before: the refit's alone, and each copy warned)."""
    done = _grid_search(tmp_path, n_jobs=2)
    assert _AWAY not in done.stderr and _CHILD not in done.stderr, done.stderr
    assert done.stdout == "5\n"
    spool = Path(done.stderr.strip().splitlines()[-1])
    assert spool.name == "spend.jsonl" and not spool.parent.exists()  # removed at exit


@pytest.mark.timeout(960)
def test_a_cap_holds_across_worker_processes(tmp_path):
    """A cap of 2.5 for fits of epsilon 1: two of the four fits in the workers are afforded,
    whichever worker runs them, the others fail, and the refit is refused (before: each
    worker's copy had the whole cap of its own, and the search spent up to 4 + 1)."""
    done = _grid_search(tmp_path, n_jobs=2, accountant="capped")
    assert "BudgetExceeded" in done.stderr and _AWAY not in done.stderr
    assert done.stdout == "2\n"


def test_a_copy_cut_off_from_the_spool_warns_and_keeps_what_it_was_given(tmp_path) -> None:
    """An accountant pickled by a process that is not this one's parent (a model saved in
    another session): its spool went with that process; the copy holds the charges made
    until it was pickled, and a charge to it warns that the first accountant never sees it."""
    script = (
        "import pickle, sys\n"
        "from dpnet.privacy import BudgetAccountant\n"
        "budget = BudgetAccountant(3.0)\n"
        "budget.charge(1.0, 0.0, label='first')\n"
        "sys.stdout.buffer.write(pickle.dumps(budget))\n"
    )
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, cwd=tmp_path, env=env, check=True,
        timeout=300,
    )  # fmt: skip
    copy = pickle.loads(done.stdout)
    assert not copy.shared and [c.label for c in copy.charges] == ["first"]
    with pytest.warns(PrivacyLeakWarning, match="with a copy of an accountant made in process"):
        copy.charge(1.5, 0.0, label="second")
    assert copy.spent == (2.5, 0.0)
    with pytest.raises(BudgetExceeded):
        copy.charge(1.0, 0.0, label="third")


def test_a_shared_capped_accountant_is_not_reset() -> None:
    budget = BudgetAccountant(2.0)
    budget.charge(0.5, 0.0, label="a")
    copy_here = pickle.loads(pickle.dumps(budget))  # shares it
    try:
        assert budget.shared and not copy_here.shared and copy_here.spent == (0.5, 0.0)
        with pytest.raises(PrivacyError, match="not reset"):
            budget.reset()
        assert budget.spent == (0.5, 0.0)
        with pytest.raises(BudgetExceeded):
            budget.charge(1.75, 0.0, label="b")  # the file's check: 2.25 > 2
    finally:
        shutil.rmtree(os.path.dirname(budget.share()))


@pytest.mark.timeout(960)
def test_fits_in_the_callers_process_charge_its_accountant_without_a_warning(tmp_path):
    done = _grid_search(tmp_path, n_jobs=1)
    assert _AWAY not in done.stderr
    assert done.stdout == "5\n"  # 2 x 2 fits and the refit


@pytest.mark.timeout(960)
def test_the_default_accountant_counts_the_fits_of_worker_processes(tmp_path):
    """No accountant given: the estimators pickled for the workers carry the caller's default
    accountant's spool, and the 2 x 2 cross-validation fits in the workers charge it; the
    caller's default_accountant() counts all five, nothing warns, and the spool's folder is
    gone when the caller exits. (Before: each worker charged its own default, unseen.)"""
    done = _grid_search(tmp_path, n_jobs=2, given=False)
    assert _CHILD not in done.stderr and _AWAY not in done.stderr
    assert done.stdout == "5\n"
    spool = Path(done.stderr.strip().splitlines()[-1])
    assert spool.name == "spend.jsonl" and not spool.parent.exists()
    alone = _grid_search(tmp_path, n_jobs=1, given=False)
    assert _CHILD not in alone.stderr
    assert alone.stdout == "5\n"
    assert alone.stderr.strip().splitlines()[-1] == "None"  # nothing pickled: no spool


def test_a_shared_default_keeps_its_charges_and_resets() -> None:
    default = BudgetAccountant(math.inf, math.inf)
    default.charge(0.5, 1e-7, label="before")
    default.charge(1.0, 0.0, label="add-remove", relation="add_remove")  # 2.0 replace-one
    spool = default.share()
    try:
        assert default.shared and default.share() == spool  # made once
        assert oct(os.stat(os.path.dirname(spool)).st_mode & 0o777) == "0o700"
        assert [c.label for c in default.charges] == ["before", "add-remove"]
        assert default.spent == pytest.approx((2.5, 1e-7))
        from dpnet.privacy.budget_file import BudgetFileAccountant

        worker = BudgetFileAccountant(spool, math.inf, math.inf)  # as a child's copy does
        worker.charge(0.25, 0.0, label="worker")
        assert default.n_charges == 3 and default.spent == pytest.approx((2.75, 1e-7))
        default.reset()
        assert default.spent == (0.0, 0.0) and default.charges == ()
        default.charge(0.125, 0.0, label="after")
        assert [c.label for c in default.charges] == ["after"] and default.spent[0] == 0.125
    finally:
        shutil.rmtree(os.path.dirname(spool))
    with pytest.warns(PrivacyLeakWarning, match="spool .* was removed"):
        assert default.spent == (0.125, 0.0)  # its own charges are in memory; said
    default.charge(0.5, 0.0, label="in memory")
    assert not default.shared and default.spent == (0.625, 0.0)


def test_only_a_child_takes_the_spool_a_fit_carries(tmp_path) -> None:
    """A fit pickled by this process (a copy, joblib.dump), or carrying the spool of a
    process that is not this one's parent (a model saved in another session), leaves the
    default accountant as it is; the key never becomes an attribute."""
    from dpnet.privacy import budget

    model = DecentralizedGroupLassoLogistic(epsilon=1.0)
    state = model.__getstate__()
    pid, spool, forgotten = state[budget.SPOOL_KEY]
    assert pid == os.getpid() and os.path.isdir(os.path.dirname(spool))
    assert forgotten == budget.default_accountant()._forgotten  # after its resets, if any
    before = budget.default_accountant()
    copied = pickle.loads(pickle.dumps(model))
    assert budget.default_accountant() is before and budget.SPOOL_KEY not in vars(copied)
    for carried in [(os.getppid() + 12345, spool, 0), (os.getppid(), str(tmp_path / "x/s"), 0)]:
        budget.adopt_default({budget.SPOOL_KEY: carried})
        assert budget.default_accountant() is before
    given = DecentralizedGroupLassoLogistic(epsilon=1.0, accountant=BudgetAccountant(1.0))
    assert budget.SPOOL_KEY not in given.__getstate__()
    from dpnet.metrics import PrivateAccuracyScorer

    assert budget.SPOOL_KEY in PrivateAccuracyScorer(1.0).__getstate__()
    assert budget.SPOOL_KEY not in PrivateAccuracyScorer(1.0, accountant=before).__getstate__()


@pytest.mark.timeout(960)
def test_a_budget_file_accountant_counts_the_fits_of_worker_processes(tmp_path):
    """The workers' pickled copies charge the same file, under its lock, against its one
    cap; nothing warns and the caller sees all five."""
    done = _grid_search(tmp_path, n_jobs=2, accountant="file")
    assert _AWAY not in done.stderr and _CHILD not in done.stderr
    assert done.stdout == "5\n"  # 2 x 2 fits in the workers and the refit, read from the file
    lines = (tmp_path / "budget.jsonl").read_text().splitlines()
    charged = [json.loads(line) for line in lines[1:]]
    assert len(charged) == 5 and all(c["epsilon"] == pytest.approx(1.0) for c in charged)


def test_a_budget_file_accountant_is_the_files_budget(tmp_path):
    from dpnet.privacy.budget_file import BudgetFileAccountant, BudgetFileError

    path = tmp_path / "budget.jsonl"
    with pytest.raises(BudgetFileError, match="does not exist"):
        BudgetFileAccountant(path)  # no cap to create it with
    X, y = _classification(150)
    budget = BudgetFileAccountant(path, 2.5)
    model = DecentralizedGroupLassoLogistic(epsilon=1.0, max_rounds=30, accountant=budget)
    for _ in range(2):
        clone(model).fit(X, y)
    before = path.read_bytes()
    with pytest.raises(BudgetExceeded, match="refused"):
        clone(model).fit(X, y)
    assert path.read_bytes() == before  # refused: nothing written
    again = pickle.loads(pickle.dumps(BudgetFileAccountant(path)))  # its cap from the file
    assert (again.epsilon, again.delta) == (2.5, 0.0)
    assert again.spent == pytest.approx((2.0, 0.0)) and again.n_charges == 2
    assert [c.label for c in again.charges] == ["DecentralizedGroupLassoLogistic.fit"] * 2
    with pytest.raises(BudgetFileError, match="cap"):
        BudgetFileAccountant(path, 5.0)  # another cap
    with pytest.raises(BudgetFileError, match="never reset"):
        again.reset()
    assert again.spent == pytest.approx((2.0, 0.0))


def test_an_accountant_unpickled_in_its_own_process_charges_without_a_warning():
    copy_here = pickle.loads(pickle.dumps(BudgetAccountant(2.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        copy_here.charge(1.0, 0.0, label="fit")
    assert copy_here.spent == (1.0, 0.0)
