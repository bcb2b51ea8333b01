"""Absolute loss and its log-smoothed MM surrogate (Hunter & Lange 2000), paper 1 sec. 3.2.

    phi_e(t) = |t| - e log(e + |t|),   phi_e'(t) = t / (e + |t|)   (|phi_e'| < 1),
    phi_e''(t) = e / (e + |t|)^2       (0 < phi_e'' <= 1/e).

phi_e(t) is concave in s = t^2, so phi_e(t) <= phi_e(t0) + (t^2 - t0^2) / (2 (e + |t0|)): the
iteratively reweighted least squares step with weights 1/(e + |r|) is a majorise-minimise step
for phi_e, and its fixed point minimises sum phi_e(r_i) (plus any quadratic penalty).
"""

from __future__ import annotations

import numpy as np


def log_smoothed_abs(t: np.ndarray, e: float) -> np.ndarray:
    """Elementwise phi_e(t) = |t| - e log(e + |t|)."""
    a = np.abs(t)
    return a - e * np.log(e + a)


def log_smoothed_abs_derivative(t: np.ndarray, e: float) -> np.ndarray:
    """Elementwise phi_e'(t) = t / (e + |t|)."""
    return t / (e + np.abs(t))


def log_smoothed_abs_curvature(t: np.ndarray, e: float) -> np.ndarray:
    """Elementwise phi_e''(t) = e / (e + |t|)^2."""
    return e / (e + np.abs(t)) ** 2
