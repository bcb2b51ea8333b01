"""Parameter validation of dpnet's scikit-learn estimators, scikit-learn's way.

Each estimator declares ``_parameter_constraints`` (``sklearn.utils._param_validation``:
Interval, StrOptions, ...) and checks them as ``fit`` starts (``@_fit_context``); a value outside
them is a :class:`ParameterError`, naming the parameter and the value in one line. What needs
the data or several parameters at once is checked in ``fit`` itself.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, InvalidParameterError

from dpnet.errors import ConfigError
from dpnet.privacy.budget import adopt_default, carry_default

# the constraints several estimators share
FINITE_POSITIVE = Interval(Real, 0, None, closed="neither")
FINITE_NON_NEGATIVE = Interval(Real, 0, None, closed="left")
OPEN_UNIT_INTERVAL = Interval(Real, 0, 1, closed="neither")
POSITIVE_INT = Interval(Integral, 1, None, closed="left")


class ParameterError(ConfigError, InvalidParameterError):
    """An estimator parameter outside its declared constraints: scikit-learn's
    InvalidParameterError (a ValueError and TypeError) that is also dpnet's ConfigError."""


class ConstrainedEstimator(BaseEstimator):
    """Base of dpnet's estimators: scikit-learn's check of ``_parameter_constraints``, raising
    :class:`ParameterError`."""

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for a worker process: with no ``accountant``, the caller's default
        accountant's spool goes along (:func:`~dpnet.privacy.budget.carry_default`)."""
        return carry_default(dict(super().__getstate__()), getattr(self, "accountant", False))

    def __setstate__(self, state: dict[str, Any]) -> None:
        adopt_default(state)
        super().__setstate__(state)

    def _validate_params(self) -> None:
        try:
            super()._validate_params()
        except InvalidParameterError as exc:
            raise ParameterError(str(exc)) from None
