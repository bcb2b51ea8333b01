"""Every dpnet estimator checks its parameters scikit-learn's way (dpnet.params): a bad value of
any constrained parameter is refused as fit starts, with an InvalidParameterError that is also
dpnet's ConfigError, in one line naming the parameter and the value."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils._param_validation import (
    InvalidParameterError,
    generate_invalid_param_val,
    make_constraint,
)
from sklearn.utils.estimator_checks import check_param_validation

from dpnet.baselines.median import DPMedianRegressor
from dpnet.baselines.rdp_admm import (
    ADMMObjPClassifier,
    DPADMMClassifier,
    DPSGDClassifier,
    MPADMMClassifier,
    SSADMMClassifier,
)
from dpnet.errors import ConfigError
from dpnet.estimators import DecentralizedGroupLassoLogistic

ESTIMATORS = [
    DecentralizedGroupLassoLogistic(n_machines=2),
    DPMedianRegressor(),
    SSADMMClassifier(),
    DPSGDClassifier(),
    MPADMMClassifier(),
    DPADMMClassifier(),
    ADMMObjPClassifier(),
]


class BadType:
    """A value no constraint accepts."""

    def __repr__(self) -> str:
        return "BadType()"


def _bad_values(constraints: list) -> list:
    """A value of no accepted type, and one just outside each constraint that has an outside."""
    values: list = [BadType()]
    for constraint in constraints:
        try:
            values.append(generate_invalid_param_val(make_constraint(constraint)))
        except NotImplementedError:  # a type, "array-like", "boolean": BadType is outside
            pass
    return values


CASES = [  # ids by position: an invalid option's text follows set order, which differs by
    # process (xdist's workers must collect the same ids)
    pytest.param(estimator, name, bad, id=f"{type(estimator).__name__}-{name}-{i}")
    for estimator in ESTIMATORS
    for name, constraints in estimator._parameter_constraints.items()
    if constraints != "no_validation"
    for i, bad in enumerate(_bad_values(constraints))
]


@pytest.mark.parametrize(("estimator", "name", "bad"), CASES)
def test_a_bad_value_of_every_constrained_parameter_is_refused(estimator, name, bad) -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (40, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    with pytest.raises(InvalidParameterError) as refused:
        clone(estimator).set_params(**{name: bad}).fit(X, y)
    assert isinstance(refused.value, ConfigError)  # dpnet's error for a bad parameter
    message = str(refused.value)
    assert "\n" not in message
    assert f"'{name}' parameter of {type(estimator).__name__}" in message
    assert f"Got {bad!r} instead" in message


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda est: type(est).__name__)
def test_scikit_learns_parameter_validation_check(estimator) -> None:
    """Every parameter has a constraint (or "no_validation": checked where it is used) and
    an informative refusal; scikit-learn runs this check on its own estimators."""
    check_param_validation(type(estimator).__name__, estimator)
