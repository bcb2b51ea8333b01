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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpnet.errors import PrivacyError
from dpnet.privacy.ledger import canonical_relation

SLACK = 1e-12  # relative: a cap met exactly by sums of rounded epsilons is not exceeded


class BudgetExceeded(PrivacyError):
    """The fit's (ε, δ) would take the accountant past its cap; nothing was fitted."""


@dataclass(frozen=True)
class Charge:
    label: str
    epsilon: float  # under replace-one
    delta: float


class BudgetAccountant:
    """A cap (ε, δ) on everything fitted on one data set, under replace-one neighbours;
    ``charges``, ``spent`` and ``remaining`` say where it stands."""

    def __deepcopy__(self, memo: dict) -> BudgetAccountant:
        """Itself: one budget shared by every copy (scikit-learn's ``clone``, GridSearchCV's
        fits), or each copy would have a cap of its own."""
        return self

    def __init__(self, epsilon: float, delta: float = 0.0) -> None:
        if not 0 < epsilon < math.inf:
            raise PrivacyError(f"the budget's epsilon must be finite and > 0, got {epsilon}")
        if not 0 <= delta < 1:
            raise PrivacyError(f"the budget's delta must lie in [0, 1), got {delta}")
        self.epsilon, self.delta = float(epsilon), float(delta)
        self._charges: list[Charge] = []

    @property
    def charges(self) -> tuple[Charge, ...]:
        return tuple(self._charges)

    @property
    def spent(self) -> tuple[float, float]:
        """(Σ ε, Σ δ) of the charges so far."""
        return (
            math.fsum(c.epsilon for c in self._charges),
            math.fsum(c.delta for c in self._charges),
        )

    @property
    def remaining(self) -> tuple[float, float]:
        epsilon, delta = self.spent
        return max(self.epsilon - epsilon, 0.0), max(self.delta - delta, 0.0)

    def charge(
        self, epsilon: float, delta: float, *, label: str, relation: str = "replace_one"
    ) -> Charge:
        """Add one fit's guarantee, or raise :class:`BudgetExceeded` (and add nothing)."""
        if canonical_relation(relation) == "add_remove":
            epsilon, delta = 2.0 * epsilon, (1.0 + math.exp(epsilon)) * delta
        charge = Charge(label, float(epsilon), float(delta))
        spent_epsilon, spent_delta = self.spent
        over_epsilon = not spent_epsilon + charge.epsilon <= self.epsilon * (1.0 + SLACK)
        over_delta = not spent_delta + charge.delta <= self.delta * (1.0 + SLACK)
        if over_epsilon or over_delta:
            left_epsilon, left_delta = self.remaining
            raise BudgetExceeded(
                f"{label} needs epsilon = {charge.epsilon:.6g}, delta = {charge.delta:.3g} "
                f"(replace-one); the accountant has epsilon = {left_epsilon:.6g}, "
                f"delta = {left_delta:.3g} left of its cap ({self.epsilon:g}, {self.delta:g})"
            )
        self._charges.append(charge)
        return charge


def charge(
    accountant: BudgetAccountant | None,
    epsilon: float,
    delta: float,
    *,
    label: str,
    relation: str = "replace_one",
) -> None:
    """:meth:`BudgetAccountant.charge` if an accountant was given (an estimator's ``fit``)."""
    if accountant is None:
        return
    if not isinstance(accountant, BudgetAccountant):
        raise PrivacyError(
            f"accountant must be a BudgetAccountant, got {type(accountant).__name__}"
        )
    accountant.charge(epsilon, delta, label=label, relation=relation)
