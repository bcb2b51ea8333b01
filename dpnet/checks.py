"""Argument checks shared by the privacy mechanisms (a bad argument is a PrivacyError)."""

from __future__ import annotations

import math

import numpy as np

from dpnet.errors import PrivacyError


def positive(name: str, x: float) -> float:
    """``x`` as a float if finite and > 0, else a PrivacyError naming ``name``."""
    x = float(x)
    if not (math.isfinite(x) and x > 0):
        raise PrivacyError(f"{name} must be a finite positive number, got {x}")
    return x


def check_rng(rng: np.random.Generator) -> None:
    """Mechanisms draw from a numpy Generator passed in, never from a global stream."""
    if not isinstance(rng, np.random.Generator):
        raise PrivacyError(f"rng must be a numpy Generator, got {type(rng).__name__}")
