"""The label domain: a public, data-independent map from file labels to -1/+1.

Label-DP treats the set of possible labels as public: two neighbouring data sets differ in one
label, and each of them may hold any labels of the domain, including only one class. The map
from a file's label values to -1/+1 is therefore fixed before the data are read (never
"the larger of the values found", which depends on the labels themselves), and no check may
depend on which classes occur: a machine whose labels are all +1 runs like any other.

Default domain (``--labels`` not given): -1 and 0 are the negative class, 1 the positive
class, so {-1, +1}, {0, 1} and boolean labels work unchanged. ``--labels NEG,POS`` declares
other values (e.g. ``--labels no,yes`` or ``--labels 2,4``). A label outside the domain is bad
input (the data set is outside the universe the guarantee speaks about): the error names the
file and the row, never the value.

The estimator's ``classes=(negative, positive)`` declares a domain too
(:meth:`LabelDomain.of_classes`): its values are compared as given, with ==, and a label
outside is refused in the estimator's words, naming no value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpnet.errors import ConfigError, DataError

Key = float | str


def _key(token: object) -> Key:
    """A label value as compared: a number if it parses as one, else its stripped text."""
    text = str(token).strip()
    try:
        return float(text)
    except ValueError:
        return text


def equal_labels(values: Any, label: Any) -> np.ndarray:
    """values == label elementwise as a bool array of values' shape; False where the types
    do not compare (an int among string labels), never a TypeError."""
    values = np.asarray(values)
    return np.broadcast_to(np.asarray(values == label, dtype=bool), values.shape)


@dataclass(frozen=True)
class LabelDomain:
    """Label values mapped to -1 (``negative``) and to +1 (``positive``); public.

    ``as_classes``: declared by the estimator's ``classes`` (:meth:`of_classes`), values
    compared as given; else by ``--labels`` (or the default), values compared as a file's
    text is read (:func:`_key`: 1 and "1.0" are one label)."""

    negative: tuple[Any, ...] = (-1.0, 0.0)
    positive: tuple[Any, ...] = (1.0,)
    as_classes: bool = False

    def __post_init__(self) -> None:
        if not self.negative or not self.positive:
            raise ConfigError("the label domain needs a negative and a positive value")
        if set(self.negative) & set(self.positive):
            raise ConfigError("a label value cannot be both negative and positive")

    @classmethod
    def parse(cls, spec: str | None) -> LabelDomain:
        """``None``/"default" -> the default; "NEG,POS" -> those two values."""
        if spec is None or spec.strip().lower() == "default":
            return cls()
        parts = [p.strip() for p in spec.split(",")]
        if len(parts) != 2 or not all(parts):
            raise ConfigError(
                f"--labels must be two comma-separated values NEG,POS (e.g. 0,1 or no,yes), "
                f"got {spec!r}"
            )
        return cls((_key(parts[0]),), (_key(parts[1]),))

    @classmethod
    def of_classes(cls, classes: np.ndarray) -> LabelDomain:
        """The estimator's ``classes`` (negative, positive), two distinct values."""
        return cls((classes[0],), (classes[1],), as_classes=True)

    def describe(self) -> str:
        def show(values: tuple[Key, ...]) -> str:
            return " or ".join(f"{v:g}" if isinstance(v, float) else repr(v) for v in values)

        return f"{show(self.negative)} -> -1, {show(self.positive)} -> +1"

    def to_pm1(self, labels: ArrayLike, source: str = "labels") -> np.ndarray:
        """float64 -1/+1 labels; a label outside the domain: :class:`DataError` naming the
        first row (ValueError naming nothing under :attr:`as_classes`)."""
        arr = np.asarray(labels)
        if arr.ndim != 1:
            raise DataError(f"{source}: labels must be a vector, got shape {arr.shape}")
        if self.as_classes:
            neg = np.logical_or.reduce([equal_labels(arr, v) for v in self.negative])
            pos = np.logical_or.reduce([equal_labels(arr, v) for v in self.positive])
        elif arr.dtype.kind in "biuf":
            values = arr.astype(np.float64)
            neg = np.isin(values, [v for v in self.negative if isinstance(v, float)])
            pos = np.isin(values, [v for v in self.positive if isinstance(v, float)])
        else:
            keys = [_key(v) for v in arr.tolist()]
            neg = np.fromiter((k in self.negative for k in keys), bool, len(keys))
            pos = np.fromiter((k in self.positive for k in keys), bool, len(keys))
        outside = ~(neg | pos)
        if outside.any() and self.as_classes:
            raise ValueError(
                "y holds values outside classes=(negative, positive): outside the declared "
                "data domain, refused"
            )
        if outside.any():
            row = int(np.argmax(outside)) + 1
            raise DataError(
                f"{source}: {int(outside.sum())} label(s) outside the label domain "
                f"({self.describe()}), the first in data row {row}; declare the two label "
                f"values with --labels NEG,POS"
            )
        return np.where(pos, 1.0, -1.0)


DEFAULT_LABELS = LabelDomain()
