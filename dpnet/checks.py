"""Argument checks of dpnet's functions, one name per check (the estimators declare
scikit-learn constraints instead, :mod:`dpnet.params`; the run's options are checked by
``RunConfig.validate``). A bad argument is a PrivacyError (most are privacy parameters:
budgets, sensitivities, noise) unless the caller names another error; the message names the
argument and its value in one line."""

from __future__ import annotations

import math

import numpy as np

from dpnet.errors import PrivacyError


def positive(
    name: str,
    value: float,
    *,
    allow_zero: bool = False,
    error: type[Exception] = PrivacyError,
) -> float:
    """``value`` as a float if finite and > 0 (>= 0 with ``allow_zero``), else ``error``."""
    x = float(value)
    if not (math.isfinite(x) and (x > 0 or (allow_zero and x == 0))):
        bound = ">= 0" if allow_zero else "> 0"
        raise error(f"{name} must be a finite number {bound}, got {value}")
    return x


def check_rng(rng: np.random.Generator) -> None:
    """Mechanisms draw from a numpy Generator passed in, never from a global stream."""
    if not isinstance(rng, np.random.Generator):
        raise PrivacyError(f"rng must be a numpy Generator, got {type(rng).__name__}")
