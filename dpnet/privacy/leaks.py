"""The warning a fit gives when something it publishes was read from the private data."""

from __future__ import annotations

import warnings
from typing import Any


class PrivacyLeakWarning(RuntimeWarning):
    """A fit read a structural output from the private data instead of the declared public
    schema, so the privacy guarantee does not cover it (diffprivlib's convention). Example:
    ``DecentralizedGroupLassoLogistic(epsilon=1.0, classes=None)`` reads the two label values
    from ``y``; ``classes=(negative, positive)`` declares them and avoids the warning."""


class WarnsOnRawScore:
    """scikit-learn's ``score`` (a mixin before ``ClassifierMixin`` / ``RegressorMixin``),
    warning :class:`PrivacyLeakWarning` after a private fit: the score is a function of the
    raw rows it is given, released without noise, so if these are private (a cross-validation
    fold, GridSearchCV's default scoring, a split of the training data) neither the score nor
    what is chosen by it is covered by the guarantee. On rows you know to be public, filter
    the warning. A subclass says what its guarantee protects (:meth:`_score_reads`, from the
    parameters alone, never the data) and how to score privately (``_private_score_remedy``).
    The one place every dpnet estimator's score warns from."""

    _private_score_remedy = "score them with a private statistic"

    def _score_reads(self) -> str | None:
        """What the guarantee of this fit protects that ``score`` reads as given ("labels y",
        "rows X and labels y"), or None after a fit that is not private."""
        raise NotImplementedError

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """scikit-learn's score (mean accuracy of a classifier, R² of a regressor) on ``X``
        against ``y`` as given; after a private fit it warns :class:`PrivacyLeakWarning`
        (see :class:`WarnsOnRawScore`)."""
        read = self._score_reads()
        if read is not None:
            warnings.warn(
                f"score compares the predictions with the {read} as given: if these are "
                "private rows (a cross-validation fold, a split of the training data) the "
                f"score is not covered by the guarantee; {self._private_score_remedy}",
                PrivacyLeakWarning,
                stacklevel=2,
            )
        return float(super().score(X, y, sample_weight=sample_weight))  # type: ignore[misc]
