"""Loss functions (datafits): value, gradient and curvature bounds, vectorised over rows.

The supported names are listed in ``__all__`` and loaded lazily from their modules on first
access, so importing the package, or one module of it, costs no more than before. The
modules' other names are internals: tests may import them from the module itself.
"""

from __future__ import annotations

from dpnet._lazy import lazy_names

_LAZY = {
    "log_smoothed_abs": "absolute",
    "log_smoothed_abs_derivative": "absolute",
    "huber_curvature": "huber",
    "huber_derivative": "huber",
    "huberized_hinge_dloss": "huberized_hinge",
    "huberized_hinge_gradient": "huberized_hinge",
    "huberized_hinge_loss": "huberized_hinge",
    "huberized_hinge_objective": "huberized_hinge",
    "logistic_dloss": "logistic",
    "logistic_loss": "logistic",
    "HuberizedHinge": "margin",
    "Logistic": "margin",
    "MarginLoss": "margin",
    "UnbiasedLogistic": "margin",
}

__all__ = list(_LAZY)


__getattr__ = lazy_names(__name__, _LAZY)
