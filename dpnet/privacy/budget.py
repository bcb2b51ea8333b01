"""A privacy budget across fits, like diffprivlib's ``BudgetAccountant``: every estimator
takes ``accountant=``, and a fit first charges its (ε, δ) to it, refused with
:class:`BudgetExceeded` before it reads a training row if the total would pass the cap.

Composition is basic sequential composition (Dwork, Kenthapadi, McSherry, Mironov & Naor 2006):
k fits with guarantees (ε_i, δ_i)-DP on the same data are (Σ ε_i, Σ δ_i)-DP, whatever the
mechanisms. The budget is stated under replace-one neighbours; a guarantee under add/remove is
charged as (2ε, (1 + e^ε) δ), since replacing a record is removing it and adding another
(group privacy for two steps). A fit with no established guarantee (ε = inf: non-private, or
ADMM-objP's inexact minimiser) is refused by every finite cap. What a fit charged is kept
(``charges``); the charge is made before the fit runs, so a fit that fails after it has read
the data has still spent its budget.

A fit given no accountant (``accountant=None``, the default) charges the process-wide
:func:`default_accountant` instead, which has no cap: it sums what every such fit spent, by the
same basic composition (``spent``), so a search of many fits is not silent. A fit with
ε = inf charges it nothing (there is no guarantee to add). A fit given an accountant charges
that one only. ``reset()`` forgets the charges (not the privacy loss they stand for). The
accountant follows a fit into scikit-learn's worker processes (``n_jobs`` with the loky
backend): pickled for a child, it keeps its charges in a spool file that the child's copy
charges too, under the file's lock and against the one cap (:class:`BudgetAccountant`); a fit
given no accountant carries the caller's default the same way (:func:`carry_default`). Each
accountant knows the process it was made in, and a charge that reaches a copy cut off from the
spool (a fork, a model loaded in another session) in another process warns
:class:`~dpnet.privacy.leaks.PrivacyLeakWarning` once per fit, with the remedy; so does the
first fit that charges a child process's own default, not handed the caller's.
"""

from __future__ import annotations

import atexit
import itertools
import math
import os
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from dpnet.errors import PrivacyError
from dpnet.privacy.leaks import PrivacyLeakWarning
from dpnet.privacy.relations import canonical_relation

SLACK = 1e-12  # relative: a cap met exactly by sums of rounded epsilons is not exceeded
_AWAY_FITS = itertools.count(1)  # fits in this process that charged another process's accountant


class BudgetExceeded(PrivacyError):
    """The fit's (ε, δ) would take the accountant past its cap; nothing was fitted."""


def check_cap(epsilon: float, delta: float) -> tuple[float, float]:
    """A cap (ε, δ) as floats, or PrivacyError: ε > 0 and δ in [0, 1), each inf for no cap."""
    if not 0 < epsilon <= math.inf:
        raise PrivacyError(f"the budget's epsilon must be > 0 (inf: no cap), got {epsilon}")
    if not (0 <= delta < 1 or delta == math.inf):
        raise PrivacyError(f"the budget's delta must lie in [0, 1) (inf: no cap), got {delta}")
    return float(epsilon), float(delta)


def replace_one_cost(
    epsilon: float, delta: float, relation: str = "replace_one"
) -> tuple[float, float]:
    """What a guarantee (ε, δ) under ``relation`` costs a budget kept under replace-one:
    itself, or (2ε, (1 + e^ε) δ) under add/remove (replacing a record is removing it and
    adding another: group privacy for two steps)."""
    if canonical_relation(relation) == "add_remove":
        return 2.0 * epsilon, (1.0 + math.exp(epsilon)) * delta
    return float(epsilon), float(delta)


def composed(*costs: tuple[float, float]) -> tuple[float, float]:
    """Basic sequential composition (Dwork, Kenthapadi, McSherry, Mironov & Naor 2006):
    releases (ε_i, δ_i)-DP on the same data are (Σ ε_i, Σ δ_i)-DP together."""
    return sum((c[0] for c in costs), 0.0), sum((c[1] for c in costs), 0.0)


def within_cap(
    spent: tuple[float, float], cost: tuple[float, float], cap: tuple[float, float]
) -> bool:
    """Whether ``cost`` composed with ``spent`` stays within ``cap`` (up to the relative
    :data:`SLACK`); a cost with ε = inf (no established guarantee) passes no finite cap."""
    total = composed(spent, cost)
    return total[0] <= cap[0] * (1.0 + SLACK) and total[1] <= cap[1] * (1.0 + SLACK)


@dataclass(frozen=True)
class Charge:
    label: str
    epsilon: float  # under replace-one
    delta: float


class PicklableLock:
    """A ``_lock`` (threading.Lock) that pickling leaves behind and unpickling makes anew: an
    object that charges or counts under a lock goes to joblib's worker processes."""

    _lock: threading.Lock

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


class BudgetAccountant(PicklableLock):
    """A cap (ε, δ) on everything fitted on one data set, under replace-one neighbours;
    ``charges``, ``spent`` and ``remaining`` say where it stands, ``reset()`` empties it.
    ``epsilon = inf`` (with ``delta = inf``) is no cap: the accountant only sums (the
    :func:`default_accountant`). Charging and resetting are thread-safe.

    Shared with worker processes: pickled (for a loky worker of GridSearchCV(n_jobs=2), or by
    :func:`carry_default` for the default), the accountant moves its charges into a spool, a
    budget file with its cap in a private temporary folder (mode 0700, removed when the
    process that made it exits), and from then on every charge, its own and those of the
    copies unpickled in its child processes, is checked against the cap and appended under
    the file's lock (:func:`dpnet.privacy.budget_file.charge_budget`): one budget, exactly
    enforced, for every process of a search. A copy unpickled anywhere else (in the same
    process, or a model saved and loaded in another session) is an accountant of its own with
    the charges made until it was pickled. Once shared, a capped accountant is not reset (its
    copies check the file's whole spend: make a new accountant for a new data set); one with
    no cap forgets its charges by count."""

    _home_pid: int | None = None  # the process it was made in (None: unpickled from before)
    _spool: str | None = None  # the spool, once shared
    _owns_spool = False  # made it (not a child's copy)
    _forgotten = 0  # the spool's charges before the last reset (no cap only)

    def __deepcopy__(self, memo: dict) -> BudgetAccountant:
        """Itself: one budget shared by every copy (scikit-learn's ``clone``, GridSearchCV's
        fits), or each copy would have a cap of its own."""
        return self

    def __init__(self, epsilon: float, delta: float = 0.0) -> None:
        self.epsilon, self.delta = check_cap(epsilon, delta)
        self._charges: list[Charge] = []
        self._spent = (0.0, 0.0)  # (Σ ε, Σ δ), kept with the charges: O(1) a charge
        self._lock = threading.Lock()
        self._home_pid = os.getpid()  # kept by pickling: a copy in a worker knows it is one

    def __repr__(self) -> str:
        epsilon, delta = self.spent
        return (
            f"BudgetAccountant(epsilon={self.epsilon:g}, delta={self.delta:g}; "
            f"spent epsilon={epsilon:.6g}, delta={delta:.3g} in {self.n_charges} charges)"
        )

    def __getstate__(self) -> dict[str, Any]:
        """Shared (:meth:`share`), with the charges so far for a copy that cannot reach the
        spool, and (this process, the spool, the count forgotten) for one that can."""
        spool = self.share()
        state = super().__getstate__()
        state.update(_charges=list(self.charges), _spent=self.spent, _spool=None)
        state.update(_forgotten=0, _owns_spool=False)
        state[SPOOL_KEY] = (os.getpid(), spool, self._forgotten)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        carried = state.pop(SPOOL_KEY, None)
        super().__setstate__(state)
        if carried is not None and _from_parent(carried[0], carried[1]):
            self._spool, self._forgotten = carried[1], carried[2]

    @property
    def no_cap(self) -> bool:
        return math.isinf(self.epsilon) and math.isinf(self.delta)

    @property
    def shared(self) -> bool:
        """Whether the charges are in a spool that other processes charge."""
        return self._spool is not None

    def share(self) -> str:
        """The spool's path, made on first use. A capped accountant moves its charges there
        (every charge is checked against the cap in the file); one with no cap keeps its own
        in memory and counts its children's from the spool (its own charges stay O(1))."""
        with self._lock:
            if self._spool is None:
                directory = tempfile.mkdtemp(prefix="dpnet-spend-")  # mode 0700
                atexit.register(_remove_spool, directory, os.getpid())
                self._spool = os.path.join(directory, "spend.jsonl")
                self._owns_spool = True
                if not self.no_cap:
                    spool = self._file()
                    for charge in self._charges:  # costs already under replace-one
                        spool.charge(charge.epsilon, charge.delta, label=charge.label)
                    self._charges.clear()
                    self._spent = (0.0, 0.0)
            return self._spool

    def _in_memory(self) -> bool:
        """Whether this process's charges are kept in memory: not shared, or shared with no
        cap by the process that made the spool."""
        return not self._in_spool() or (self.no_cap and self._owns_spool)

    def _file(self) -> BudgetAccountant:
        from dpnet.privacy.budget_file import BudgetFileAccountant  # it imports this module

        assert self._spool is not None
        return BudgetFileAccountant(self._spool, self.epsilon, self.delta, durable=False)

    def _in_spool(self) -> bool:
        """Whether the charges are in the spool. A spool whose folder was removed (a /tmp
        cleaner) took its count with it: with no cap that is warned and the count goes on in
        memory; with a cap every charge is refused (the file cannot be charged)."""
        if self._spool is None:
            return False
        if os.path.isdir(os.path.dirname(self._spool)) or not self.no_cap:
            return True
        warnings.warn(
            f"the accountant's spool {self._spool} was removed: the charges it held are no "
            "longer counted, and worker processes' fits are not counted from now on",
            PrivacyLeakWarning,
            stacklevel=3,
        )
        self._spool = None
        return False

    def _spooled(self) -> tuple[Charge, ...]:
        """The spool's charges since the last reset (none before it is shared)."""
        if not self._in_spool():
            return ()
        return self._file().charges[self._forgotten :]

    @property
    def charges(self) -> tuple[Charge, ...]:
        own: tuple[Charge, ...] = ()
        if self._in_memory():
            with self._lock:
                own = tuple(self._charges)
        return own + self._spooled()

    @property
    def n_charges(self) -> int:
        """How many charges were made."""
        with self._lock:
            own = len(self._charges) if self._in_memory() else 0
        return own + len(self._spooled())

    @property
    def spent(self) -> tuple[float, float]:
        """(Σ ε, Σ δ) of the charges so far (running sums in memory: the process-wide default
        takes every fit of a long session, and a sum over all of them per charge grew
        quadratically)."""
        spooled = self._spooled()
        with self._lock:
            own = self._spent if self._in_memory() else (0.0, 0.0)
        return composed(own, *((c.epsilon, c.delta) for c in spooled)) if spooled else own

    @property
    def remaining(self) -> tuple[float, float]:
        epsilon, delta = self.spent
        return max(self.epsilon - epsilon, 0.0), max(self.delta - delta, 0.0)

    def charge(
        self, epsilon: float, delta: float, *, label: str, relation: str = "replace_one"
    ) -> Charge:
        """Add one fit's guarantee, or raise :class:`BudgetExceeded` (and add nothing)."""
        if not self._in_memory():  # the file's check and append, under its lock
            return self._file().charge(epsilon, delta, label=label, relation=relation)
        charge = Charge(label, *replace_one_cost(epsilon, delta, relation))
        with self._lock:  # the check and the append at once: no two fits share what is left
            spent_epsilon, spent_delta = self._spent
            cost = (charge.epsilon, charge.delta)
            accepted = within_cap(self._spent, cost, (self.epsilon, self.delta))
            if accepted:
                self._charges.append(charge)
                self._spent = composed(self._spent, cost)
        if accepted:
            if self._home_pid not in (None, os.getpid()):
                self._warn_away_from_home(charge)
            return charge
        left_epsilon = max(self.epsilon - spent_epsilon, 0.0)
        left_delta = max(self.delta - spent_delta, 0.0)
        raise BudgetExceeded(
            f"{label} needs epsilon = {charge.epsilon:.6g}, delta = {charge.delta:.3g} "
            f"(replace-one); the accountant has epsilon = {left_epsilon:.6g}, "
            f"delta = {left_delta:.3g} left of its cap ({self.epsilon:g}, {self.delta:g})"
        )

    def _warn_away_from_home(self, charge: Charge) -> None:
        """A charge made in another process than the one this accountant was made in (a copy
        pickled to a worker: GridSearchCV(n_jobs=2), cross_validate(n_jobs=2); or a fork):
        the caller's accountant never sees it. Silent, that was an under-count; warned once per
        fit (the message counts these fits, so Python's default filter, which shows a message
        once per place, shows each fit's)."""
        warnings.warn(
            f"{charge.label} ran in process {os.getpid()} (its fit {next(_AWAY_FITS)} there "
            f"to do so) with a copy of an accountant made in process {self._home_pid}: its "
            f"charge (epsilon = {charge.epsilon:.6g}, delta = {charge.delta:.3g}) reached the "
            "copy only, not your accountant, and the cap was checked against the copy only; "
            "fit with n_jobs=1, give a BudgetFileAccountant (one budget file for every "
            "process), or sum the spends yourself from each fit's privacy_ attribute",
            PrivacyLeakWarning,
            stacklevel=4,
        )

    def reset(self) -> None:
        """Forget every charge (``spent`` is 0 again). The fits' privacy loss is not undone:
        for a new data set, or a new count. PrivacyError for a capped accountant shared with
        other processes."""
        if self._in_spool():
            if not self.no_cap:
                raise PrivacyError(
                    "this accountant's budget is shared with worker processes (it was "
                    "pickled), whose copies check the whole spend against the cap: it is not "
                    "reset; make a new BudgetAccountant for a new data set"
                )
            with self._lock:
                self._forgotten = self._file().n_charges
                self._charges.clear()
                self._spent = (0.0, 0.0)
            return
        with self._lock:
            self._charges.clear()
            self._spent = (0.0, 0.0)


def _remove_spool(directory: str, owner: int) -> None:
    """At exit: the spool's folder, by the process that made it (not a forked child)."""
    if os.getpid() == owner:
        shutil.rmtree(directory, ignore_errors=True)


def _from_parent(pid: int, spool: str) -> bool:
    """Whether a spool carried by a pickle from process ``pid`` is this process's parent's
    (a worker handed a fit), and still there."""
    return pid == os.getppid() != os.getpid() and os.path.isdir(os.path.dirname(spool))


_DEFAULT: BudgetAccountant | None = None
_DEFAULT_LOCK = threading.Lock()
_CHILD_WARNED: list[bool] = []  # this child process's default accountant has warned
SPOOL_KEY = "_dpnet_spool"
"""The key under which a pickled accountant, or a fit that charges the default, carries (the
pickling process's pid, the spool, the charges it forgot)."""


def default_accountant() -> BudgetAccountant:
    """The process-wide accountant (no cap, made on first use) that every fit given no
    ``accountant=`` charges: ``default_accountant().spent`` is what those fits spent together
    (basic composition), the fits of worker processes handed such a fit included
    (:func:`carry_default`), ``.charges`` one entry per fit, ``.reset()`` starts the count
    again."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = BudgetAccountant(math.inf, math.inf)
        return _DEFAULT


def carry_default(state: dict[str, Any], accountant: object) -> dict[str, Any]:
    """``state`` of an object that charges ``accountant`` (an estimator, a private scorer)
    being pickled: with None it charges the :func:`default_accountant`, which is not pickled
    with it, so the state carries the default's spool (:meth:`BudgetAccountant.share`) and a
    copy unpickled in a child charges the caller's default (:func:`adopt_default`)."""
    if accountant is None:
        default = default_accountant()
        state[SPOOL_KEY] = (os.getpid(), default.share(), default._forgotten)
    return state


def adopt_default(state: dict[str, Any]) -> None:
    """Take the spool that a pickled object carries (removed from ``state``) as this
    process's default accountant, if its parent pickled it (:func:`_from_parent`). A copy
    pickled by this process itself, or by any other (a model saved in another session: its
    spool is gone), changes nothing."""
    carried = state.pop(SPOOL_KEY, None)
    if carried is None or not _from_parent(carried[0], carried[1]):
        return
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None or _DEFAULT._spool != carried[1]:
            _DEFAULT = BudgetAccountant(math.inf, math.inf)
            _DEFAULT._spool, _DEFAULT._forgotten = carried[1], carried[2]


def charge(
    accountant: BudgetAccountant | None,
    epsilon: float,
    delta: float,
    *,
    label: str,
    relation: str = "replace_one",
) -> BudgetAccountant | None:
    """:meth:`BudgetAccountant.charge` for an estimator's ``fit``: to ``accountant``, or with
    None to the :func:`default_accountant` unless epsilon = inf (no guarantee: nothing to
    add). Returns the accountant charged (None if none was)."""
    if accountant is None:
        if math.isinf(epsilon):
            return None
        accountant = default_accountant()
        if not accountant.shared:  # else the caller's default counts it
            _warn_in_a_child(label)
    if not isinstance(accountant, BudgetAccountant):
        raise PrivacyError(
            f"accountant must be a BudgetAccountant, got {type(accountant).__name__}"
        )
    accountant.charge(epsilon, delta, label=label, relation=relation)
    return accountant


def _warn_in_a_child(label: str) -> None:
    """The default accountant charged in a child process (a worker of GridSearchCV(n_jobs=2),
    cross_validate(n_jobs=2)): the caller's default never sees the spend. Warned once per
    process, at its first such fit."""
    import multiprocessing  # loaded already wherever a worker runs

    if multiprocessing.parent_process() is None:
        return
    with _DEFAULT_LOCK:
        if _CHILD_WARNED:
            return
        _CHILD_WARNED.append(True)
    warnings.warn(
        f"{label} ran in a child process ({multiprocessing.current_process().name}, pid "
        f"{os.getpid()}) and charged that process's default accountant: the parent's "
        "default_accountant() sees neither this spend nor that of the process's other fits; "
        "fit with n_jobs=1, give a BudgetFileAccountant (one budget file for every "
        "process), or sum the spends yourself from each fit's privacy_ attribute",
        PrivacyLeakWarning,
        stacklevel=4,
    )
