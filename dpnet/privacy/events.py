"""dpnet's own DP event for releases whose guarantee is a proved pure epsilon.

dp-accounting has no event for objective perturbation or for dpnet's discrete Laplace
mechanism: its ``LaplaceDpEvent`` is the continuous scalar Laplace mechanism, and the discrete
Laplace on a grid has a larger delta(epsilon') curve and RDP than it at some epsilon' and
orders (tests/test_privacy_mechanisms.py). Both are pure epsilon-DP; the accountants bound
them by that epsilon alone, valid for every epsilon-DP mechanism:

- pure epsilon: composition adds the epsilons;
- RDP: an epsilon-DP release has D_alpha <= min(epsilon, alpha epsilon^2 / 2) (Bun & Steinke
  2016, Prop. 3.3, and D_alpha <= D_infinity);
- PLD: its privacy region is contained in binary randomized response with the same epsilon
  (Kairouz, Oh & Viswanath 2015), whose PLD is used.
"""

from __future__ import annotations

import attr
from dp_accounting import dp_event


@attr.s(frozen=True, slots=True, auto_attribs=True)
class PureDpEvent(dp_event.DpEvent):
    """A release that is epsilon-DP (delta = 0) by a proof outside the accountant.

    ``mechanism`` names the release (e.g. "discrete_laplace", "objective_perturbation");
    ``dim`` is its dimension (informational).
    """

    epsilon: float
    mechanism: str
    dim: int = 1
