"""The expensive steps of dpnet's privacy accounting, counted (fixture ``privacy_work`` in
tests/conftest.py): what a time bound on the accountant was meant to guard, without a clock.

- RDP: the orders of every evaluation of the RDP curve (``rdp._rdp_steps``) and the terms of
  the series behind each order (``_log_a_int``: alpha - 1 terms, ``_frac_log_terms``: the
  fractional-order series, up to ``rdp._MAX_TERMS`` terms an order);
- PLD: the grid points of every PLD dp-accounting builds (``from_*`` constructors), of every
  FFT self-composition's result, and the number of compositions of two PLDs.

The PLD answers cache is emptied for the test (a cached answer would count no work).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from dpnet.privacy import pld as pld_module
from dpnet.privacy import rdp

FULL_GRID = len(rdp.DEFAULT_ORDERS)
FRACTIONAL_ORDERS = int(np.count_nonzero(rdp.DEFAULT_ORDERS != np.round(rdp.DEFAULT_ORDERS)))
SERIES_CAP = rdp._MAX_TERMS
"""Most terms of one fractional order's series."""
PROBE_POINTS = int(pld_module._PROBE_POINTS) + 2
"""Grid points of the coarse probe PLD the budget reads (width / 2048, rounded outwards)."""
_CONSTRUCTORS = (
    "from_gaussian_mechanism",
    "from_laplace_mechanism",
    "from_randomized_response",
    "from_privacy_parameters",
)


def grid_points(pld: Any) -> int:
    """Grid points of a dp-accounting PLD (the larger of its remove / add PMFs)."""
    pmfs = [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]
    return max(pld_module._span(p) for p in pmfs)


@dataclass
class PrivacyWork:
    rdp_orders: list[int] = field(default_factory=list)
    """Orders of each RDP curve evaluation."""
    series_terms: int = 0
    built: list[int] = field(default_factory=list)
    """Grid points of each PLD built from a mechanism."""
    self_composed: list[int] = field(default_factory=list)
    """Grid points of each FFT self-composition's result."""
    composed: int = 0

    @property
    def full_grids(self) -> int:
        """Evaluations of the RDP curve on the whole default order grid."""
        return sum(n >= FULL_GRID for n in self.rdp_orders)

    @property
    def largest_pld(self) -> int:
        return max([*self.built, *self.self_composed], default=0)

    def only_probed(self) -> bool:
        """Nothing but the budget's coarse probes built: a PLD skipped before building it."""
        return not self.self_composed and not self.composed and self.largest_pld <= PROBE_POINTS

    def reset(self) -> None:
        self.rdp_orders.clear()
        self.built.clear()
        self.self_composed.clear()
        self.series_terms = self.composed = 0


def install(monkeypatch: pytest.MonkeyPatch) -> PrivacyWork:
    """Counting wrappers around the expensive steps (module docstring), undone after the test."""
    work = PrivacyWork()
    monkeypatch.setattr(pld_module, "_CACHE", {})

    def rdp_steps(*args: Any, **kwargs: Any) -> np.ndarray:
        out = original_steps(*args, **kwargs)
        work.rdp_orders.append(int(np.size(out)))
        return out

    def log_a_int(q: float, s: float, alpha: int) -> float:
        work.series_terms += max(int(alpha) - 1, 0)
        return original_int(q, s, alpha)

    def frac_log_terms(q: float, s: float, alpha: float, i: np.ndarray) -> tuple:
        work.series_terms += int(np.size(i))
        return original_frac(q, s, alpha, i)

    original_steps, original_int, original_frac = (
        rdp._rdp_steps,
        rdp._log_a_int,
        rdp._frac_log_terms,
    )
    monkeypatch.setattr(rdp, "_rdp_steps", rdp_steps)
    monkeypatch.setattr(rdp, "_log_a_int", log_a_int)
    monkeypatch.setattr(rdp, "_frac_log_terms", frac_log_terms)

    lib = pld_module.pld_lib

    def counted(make: Any) -> Any:
        @functools.wraps(make)
        def built(*args: Any, **kwargs: Any) -> Any:
            out = make(*args, **kwargs)
            work.built.append(grid_points(out))
            return out

        return built

    for name in _CONSTRUCTORS:
        monkeypatch.setattr(lib, name, counted(getattr(lib, name)))

    cls = lib.PrivacyLossDistribution
    original_self_compose, original_compose = cls.self_compose, cls.compose

    def self_compose(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original_self_compose(self, *args, **kwargs)
        work.self_composed.append(grid_points(out))
        return out

    def compose(self: Any, *args: Any, **kwargs: Any) -> Any:
        work.composed += 1
        return original_compose(self, *args, **kwargs)

    monkeypatch.setattr(cls, "self_compose", self_compose)
    monkeypatch.setattr(cls, "compose", compose)
    return work
