"""The in-memory data set every solver consumes: features, +-1 labels and a group per column."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dpnet.errors import DataError

# features of larger magnitude are refused: their squares (Hessians, row norms) would leave
# the float64 range and the solver would return NaN or a wrong fit
MAX_ABS_FEATURE = 1e100


def check_magnitude(X: np.ndarray, source: str) -> None:
    """Raise :class:`DataError` naming ``source`` if a finite 2-D float array ``X``
    has a value of magnitude >= :data:`MAX_ABS_FEATURE`: outside the data domain of every
    loader and estimator, whose guarantees are stated over data sets inside it."""
    if X.size and np.abs(X).max() >= MAX_ABS_FEATURE:
        row = int(np.argmax((np.abs(X) >= MAX_ABS_FEATURE).any(axis=1))) + 1
        raise DataError(
            f"{source}: X has values of magnitude >= {MAX_ABS_FEATURE:.0e} (first in data "
            f"row {row}); rescale the features by a known bound (dpnet never rescales by "
            f"the data's own range)"
        )


@dataclass(frozen=True)
class GroupData:
    """Rows ``X`` (float64, C-contiguous, shape (n, p)), labels ``y`` in {-1, +1} (float64, (n,)),
    ``groups[k]`` = group id of column k (int64, ids 0..G-1, every id used), optional true
    coefficient ``coef_true`` (synthetic data), column names ``feature_names`` and the labels
    ``group_names[g]`` the groups were given (``--groups``: integers or names).

    Construction does not check anything; call :meth:`validate`.
    """

    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    coef_true: np.ndarray | None = None
    feature_names: tuple[str, ...] | None = None
    group_names: tuple[int | str, ...] | None = None

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_groups(self) -> int:
        return int(self.groups.max()) + 1 if self.groups.size else 0

    def subset(self, rows: ArrayLike) -> GroupData:
        """The same data set restricted to ``rows`` (an index array), X kept C-contiguous."""
        idx = np.asarray(rows)
        return GroupData(
            np.ascontiguousarray(self.X[idx]),
            self.y[idx].copy(),
            self.groups,
            self.coef_true,
            self.feature_names,
            self.group_names,
        )

    def validate(self, source: str = "data", *, both_classes: bool = True) -> GroupData:
        """Return ``self`` or raise :class:`DataError` naming ``source`` and the problem.

        Checks: X is a finite float64 (n, p) array with |x| < MAX_ABS_FEATURE; y a finite (n,)
        vector with values in {-1, +1} (and both classes present if ``both_classes``: never
        for label-private data, where whether a check passes must not depend on the labels);
        groups an int64 (p,) vector whose ids are exactly 0..G-1; coef_true (if given) of
        shape (p,); feature_names (if given) of length p; group_names (if given) of length G.
        """
        X, y, g = self.X, self.y, self.groups
        if not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype != np.float64:
            raise DataError(f"{source}: X must be a 2-D float64 array")
        if not X.flags.c_contiguous:
            raise DataError(f"{source}: X must be C-contiguous")
        n, p = X.shape
        if n == 0 or p == 0:
            raise DataError(f"{source}: X has shape {X.shape}; need at least one row and column")
        if not np.isfinite(X).all():
            raise DataError(f"{source}: X contains NaN or inf")
        check_magnitude(X, source)
        if not isinstance(y, np.ndarray) or y.shape != (n,):
            shape = getattr(y, "shape", None)
            raise DataError(f"{source}: y has shape {shape}, expected ({n},) to match X")
        if not np.isfinite(y).all():
            raise DataError(f"{source}: y contains NaN or inf")
        if not np.all((y == 1.0) | (y == -1.0)):
            raise DataError(f"{source}: labels must be -1 or +1")
        if both_classes and np.unique(y).size != 2:
            raise DataError(f"{source}: labels must contain both classes -1 and +1")
        if not isinstance(g, np.ndarray) or g.shape != (p,):
            shape = getattr(g, "shape", None)
            raise DataError(f"{source}: groups has shape {shape}; need one id per column ({p})")
        if g.dtype != np.int64:
            raise DataError(f"{source}: groups must be int64, got {g.dtype}")
        if (g < 0).any():
            raise DataError(f"{source}: groups contains negative id(s)")
        if not np.array_equal(np.unique(g), np.arange(int(g.max()) + 1)):
            raise DataError(f"{source}: group ids must be exactly 0..G-1 with no gaps")
        if self.coef_true is not None and np.shape(self.coef_true) != (p,):
            raise DataError(f"{source}: coef_true has shape {np.shape(self.coef_true)}, not ({p},)")
        if self.feature_names is not None and len(self.feature_names) != p:
            raise DataError(f"{source}: {len(self.feature_names)} feature names for {p} columns")
        if self.group_names is not None and len(self.group_names) != self.n_groups:
            raise DataError(
                f"{source}: {len(self.group_names)} group names for {self.n_groups} groups"
            )
        return self


def to_pm1(y: ArrayLike, source: str = "labels") -> np.ndarray:
    """Map a two-valued label vector to float64 {-1, +1}: the larger (sorted second) value is +1.

    Works for {0, 1}, {1, 2}, {-1, 1}, {"no", "yes"}, booleans, ...; raises :class:`DataError`
    unless there are exactly two distinct values.
    """
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise DataError(f"{source}: labels must be a vector, got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise DataError(f"{source}: labels contain NaN or inf")
    try:
        values, inverse = np.unique(arr, return_inverse=True)
    except TypeError:
        raise DataError(f"{source}: labels mix types that cannot be compared") from None
    if values.size != 2:
        shown = values[:5].tolist()
        raise DataError(
            f"{source}: labels must take exactly two values, found {values.size}: {shown}"
            f"{' ...' if values.size > 5 else ''}"
        )
    return np.where(inverse.reshape(-1) == 1, 1.0, -1.0)
