"""Pipelines in front of a private estimator: which steps' fits read the private data.

A scikit-learn ``Pipeline`` fits every transformer on the training rows before the final
estimator sees them, and hands each transformer's ``fit`` the labels too. The estimator's
guarantee is for the rows it is given: a ``StandardScaler`` fitted on private rows makes every
row it passes on depend on all the others (its means and scales are released through the
model, without noise), and a transformer that reads ``y`` releases a function of raw labels.
The estimator cannot see the pipeline it is in (``Pipeline.fit`` calls ``fit(Xt, y)`` on it
and nothing else), so the check is the pipeline's: :func:`check_pipeline` on any fitted or
unfitted Pipeline, or :class:`PrivatePipeline` (:func:`make_private_pipeline`), which checks
on every ``fit``.

The check reads public structure only: the steps' types, scikit-learn's tags and the final
estimator's parameters, never the data (a warning that depended on the data would itself be a
release). What the final estimator protects is its ``_private_inputs()`` (dpnet's
:class:`~dpnet.estimators.DecentralizedGroupLassoLogistic`: the labels under
``privacy="label"``, features and labels under ``privacy="record"``, nothing at epsilon =
inf); an estimator that does not say is taken to protect both. A step is accepted when

- it is ``None`` or ``"passthrough"``;
- scikit-learn's tags say it needs no fit (``requires_fit=False``: ``Normalizer``,
  ``Binarizer``, ``FunctionTransformer``): its fit reads nothing, and it is taken to act row by
  row (a ``FunctionTransformer``'s function is the user's to check);
- its fit reads the public width only (``PolynomialFeatures``);
- the features are public (label privacy) and its type is one whose fit ignores ``y``
  (:data:`FEATURES_ONLY`: the scalers, encoders, ``PCA``, the imputers ...).

Every other step gets a :class:`~dpnet.privacy.PrivacyLeakWarning`: under record privacy any
fitted transformer (its fit reads the private rows), under label privacy a transformer whose
fit may read ``y`` (``TargetEncoder``, ``SelectKBest``, ``RFE``, a ``ColumnTransformer`` or a
nested ``Pipeline``, any type dpnet does not know: whether ``fit`` reads ``y`` is not in
scikit-learn's tags, ``SelectKBest``'s say it does not need it).
"""

from __future__ import annotations

import functools
import importlib
import warnings
from typing import Any

from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.utils import get_tags

from dpnet.privacy.leaks import PrivacyLeakWarning

SHAPE_ONLY = frozenset({"sklearn.preprocessing.PolynomialFeatures"})
"""Transformers whose fit reads the number of columns only (public) and whose transform acts
row by row: accepted under both privacy modes."""

FEATURES_ONLY = frozenset(
    {
        "sklearn.preprocessing.StandardScaler",
        "sklearn.preprocessing.MinMaxScaler",
        "sklearn.preprocessing.MaxAbsScaler",
        "sklearn.preprocessing.RobustScaler",
        "sklearn.preprocessing.QuantileTransformer",
        "sklearn.preprocessing.PowerTransformer",
        "sklearn.preprocessing.KBinsDiscretizer",
        "sklearn.preprocessing.SplineTransformer",
        "sklearn.preprocessing.OneHotEncoder",
        "sklearn.preprocessing.OrdinalEncoder",
        "sklearn.decomposition.PCA",
        "sklearn.decomposition.TruncatedSVD",
        "sklearn.impute.SimpleImputer",
        "sklearn.impute.KNNImputer",
        "sklearn.impute.MissingIndicator",
        "sklearn.feature_selection.VarianceThreshold",
    }
)
"""Transformers whose fit reads the features and ignores ``y`` (scikit-learn documents ``y``
as "Ignored" for each): accepted under label privacy, where the features are public."""


@functools.cache
def _types(names: frozenset[str]) -> frozenset[type]:
    """The classes the dotted names export (matched exactly: a subclass may override ``fit``)."""
    found = set()
    for dotted in names:
        module, _, name = dotted.rpartition(".")
        found.add(getattr(importlib.import_module(module), name))
    return frozenset(found)


def _protected(estimator: Any) -> frozenset[str]:
    inputs = getattr(estimator, "_private_inputs", None)
    return frozenset({"X", "y"}) if inputs is None else frozenset(inputs())


def leaking_steps(pipeline: Pipeline) -> list[tuple[str, str]]:
    """(name, reason) of every step in front of ``pipeline``'s final estimator whose fit reads
    data the final estimator's guarantee protects (module doc); [] if none. Reads the steps'
    types, their tags and the final estimator's parameters only."""
    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"check_pipeline takes a scikit-learn Pipeline, got {type(pipeline)}")
    protected = _protected(pipeline.steps[-1][1])
    if not protected:
        return []
    leaks = []
    for name, step in pipeline.steps[:-1]:
        if step is None or (isinstance(step, str) and step == "passthrough"):
            continue
        if not get_tags(step).requires_fit or type(step) in _types(SHAPE_ONLY):
            continue
        if "X" in protected:
            leaks.append(
                (
                    name,
                    f"{type(step).__name__}'s fit reads the private rows: every row it passes "
                    "on depends on all the others, outside the guarantee; transform by public "
                    "constants instead (a FunctionTransformer, the estimator's row_bound)",
                )
            )
        elif type(step) not in _types(FEATURES_ONLY):
            reads = "reads" if get_tags(step).target_tags.required else "may read"
            leaks.append(
                (
                    name,
                    f"{type(step).__name__}'s fit {reads} the raw labels y (the Pipeline "
                    "hands them to every step), outside the guarantee; leave it out (transform "
                    "with one fitted on public data before the pipeline)",
                )
            )
    return leaks


def check_pipeline(pipeline: Pipeline, *, stacklevel: int = 2) -> list[tuple[str, str]]:
    """Warn :class:`~dpnet.privacy.PrivacyLeakWarning` once for each of
    :func:`leaking_steps`, and return them (``stacklevel``: as :func:`warnings.warn`'s,
    2 names the caller). A plain ``sklearn.pipeline.Pipeline`` never calls
    it: call it on yours, or use :class:`PrivatePipeline`."""
    leaks = leaking_steps(pipeline)
    for name, reason in leaks:
        warnings.warn(
            f"pipeline step {name!r}: {reason}",
            PrivacyLeakWarning,
            stacklevel=stacklevel,
        )
    return leaks


class PrivatePipeline(Pipeline):
    """A scikit-learn ``Pipeline`` that runs :func:`check_pipeline` at every ``fit`` (so
    after ``set_params``, and in every fit of a ``GridSearchCV`` over it), then fits as
    ``Pipeline`` does."""

    def fit(self, X: Any, y: Any = None, **params: Any) -> PrivatePipeline:
        check_pipeline(self, stacklevel=3)  # the caller of fit
        super().fit(X, y, **params)
        return self


def make_private_pipeline(
    *steps: Any, memory: Any = None, transform_input: Any = None, verbose: bool = False
) -> PrivatePipeline:
    """``sklearn.pipeline.make_pipeline`` (the steps named after their types), as a
    :class:`PrivatePipeline`."""
    named = make_pipeline(*steps).steps
    return PrivatePipeline(named, memory=memory, transform_input=transform_input, verbose=verbose)
