"""The facts of the features every machine's fit shares under label privacy.

Label privacy protects the labels only: the features are public inputs there, so the machines
may pool facts of them at set-up (never under record privacy, which protects them too:
the mode's ``features_public``). Each machine contributes its :class:`ColumnMoments`; the pooled
:class:`PublicColumns` are the same floats on every machine, whichever layout holds the rows
(one file split by rank 0, a file per machine, the estimator's array), because they are added
from the machines' parts in rank order:

- ``shift``: every column's mean m over all n training rows;
- ``deviation``: every column's standard deviation s over all n training rows (divided by n);
- ``scale``: with standardization (``--standardize``, ``standardize=True``) the divisor of
  every column, s (1 for a constant column), else None; the fit's columns are (x - m) / scale,
  or x - m without it;
- ``curvature``: lambda_max(X~^T X~) / n of the fit's design X~ = [(X - 1 m^T) / scale, 1],
  which sets the starting penalty (:func:`~dpnet.decentralized.admm.initial_penalty`).

Without standardization a column whose deviation exceeds :data:`BADLY_SCALED` is named by a
one-line warning with the remedy (:func:`scaling_warning`): such a column dwarfs the
intercept's, and the ADMM crawls. Record privacy protects the features: there nothing of them
is pooled, and standardization is refused (:func:`check_standardize`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpnet.errors import ConfigError
from dpnet.privacy.modes import PrivacyMode, Spelling

POOLED_SCATTER_ENTRIES = 2**25
"""The most scatter entries J p^2 the machines pool (256 MiB that each machine receives when
every machine sends its p x p scatter: p = 48 up to J = 14,563, p = 2,048 up to J = 8);
beyond, the curvature is unknown and the start the spectral one, whichever layout holds the
rows."""


BADLY_SCALED = 100.0
"""A column whose standard deviation exceeds this (the intercept column's scale is 1) is badly
scaled: measured on 2,000 rows of 4 columns, 5 machines, one column scaled by s, the ADMM took
50 rounds at s <= 3, 134 at 10, 395 at 30, 1,551 at 100 and did not converge in 3,000 at 300
and beyond (docs/algorithms.md, "Scaled columns")."""


class BadlyScaledWarning(UserWarning):
    """The estimator's warning of a badly scaled column (:func:`scaling_warning`)."""


def pools_curvature(n_machines: int, n_columns: int) -> bool:
    """Whether J machines with ``n_columns`` columns pool their scatters
    (:data:`POOLED_SCATTER_ENTRIES`)."""
    return n_machines * n_columns**2 <= POOLED_SCATTER_ENTRIES


def column_sums(X: np.ndarray) -> np.ndarray:
    """The sum of every column of ``X``, added row after row (the same floats whatever the
    memory layout of ``X``)."""
    return np.ascontiguousarray(X).sum(axis=0)


@dataclass(frozen=True)
class ColumnMoments:
    """One machine's part of :class:`PublicColumns`: its row count n_j, its column sums, the
    sums of squares of its columns about their own mean m_j, diag(S_j), and the scatter
    S_j = (X_j - 1 m_j^T)^T (X_j - 1 m_j^T) (None beyond :func:`pools_curvature`)."""

    rows: int
    sums: np.ndarray
    squares: np.ndarray
    scatter: np.ndarray | None

    @classmethod
    def of(cls, X: np.ndarray, n_machines: int) -> ColumnMoments:
        """The moments of one machine's rows ``X`` (at least one row), one of ``n_machines``."""
        sums = column_sums(X)
        deviations = X - sums / X.shape[0]
        squares = column_sums(deviations * deviations)
        scatter = None
        if pools_curvature(n_machines, X.shape[1]):
            scatter = deviations.T @ deviations
        return cls(X.shape[0], sums, squares, scatter)


@dataclass(frozen=True)
class PublicColumns:
    """The pooled facts of all training rows' features (module docstring): ``shift`` m,
    ``curvature`` lambda_max(X~^T X~) / n (None when any part has no scatter, or when the
    scatter overflows: features beyond ~1e150), ``scale`` (standardized: the columns'
    divisors; None: the columns centred only) and ``deviation`` s (None: not pooled)."""

    shift: np.ndarray
    curvature: float | None
    scale: np.ndarray | None = None
    deviation: np.ndarray | None = None

    @classmethod
    def pooled(
        cls, parts: Sequence[ColumnMoments], n_total: int, *, standardize: bool = False
    ) -> PublicColumns:
        """From every machine's moments, in rank order (the same floats on every machine).

        The pooled scatter is S = sum_j S_j + n_j (m_j - m)(m_j - m)^T (Chan, Golub and
        LeVeque's update: no cancellation for columns far from zero); its diagonal, pooled
        from the parts' sums of squares the same way, gives s = sqrt(diag(S) / n). A column
        whose variance is within rounding of zero, s^2 <= (n eps m)^2 (scikit-learn's
        StandardScaler's test, eps the float64 epsilon), is constant: its scale is 1. The
        ones column of X~ is orthogonal to the centred columns, with eigenvalue n, so
        lambda_max(X~^T X~) / n = max(1, lambda_max(D^-1 S D^-1 / n)), D = diag(scale) (the
        identity without standardization).
        """
        shift = np.stack([part.sums for part in parts]).sum(axis=0) / n_total
        between = [part.sums / part.rows - shift for part in parts]
        squares = np.zeros(shift.size)
        for part, gap in zip(parts, between, strict=True):
            squares += part.squares + part.rows * gap * gap
        deviation = np.sqrt(squares / n_total)
        scale = None
        if standardize:
            constant = deviation <= n_total * np.finfo(float).eps * np.abs(shift)
            scale = np.where(constant | (deviation == 0.0), 1.0, deviation)
        curvature = None
        if all(part.scatter is not None for part in parts):
            scatter = np.zeros((shift.size, shift.size))
            for part, gap in zip(parts, between, strict=True):
                assert part.scatter is not None  # checked above
                scatter += part.scatter + part.rows * np.outer(gap, gap)
            if scale is not None:
                scatter /= np.outer(scale, scale)
            if np.isfinite(scatter).all():  # else features near the float range: unknown
                top = np.linalg.eigvalsh(scatter / n_total)[-1]
                curvature = max(1.0, float(top))
        return cls(shift, curvature, scale, deviation)

    def fitted_coef(self, coef: np.ndarray) -> np.ndarray:
        """``coef`` of the columns as given on the fit's columns (x - m) / scale, where the
        penalty weighs it: coef * scale (``coef`` itself without standardization)."""
        return coef if self.scale is None else coef * self.scale

    def badly_scaled(self) -> int | None:
        """The column of largest standard deviation when it exceeds :data:`BADLY_SCALED` and
        the fit does not standardize (None otherwise)."""
        if self.scale is not None or self.deviation is None or not self.deviation.size:
            return None
        worst = int(np.argmax(self.deviation))
        return worst if self.deviation[worst] > BADLY_SCALED else None


def scaling_warning(
    columns: PublicColumns | None, spelling: Spelling, names: Sequence[str] | None = None
) -> str | None:
    """The one line that names a badly scaled column (:meth:`PublicColumns.badly_scaled`) and
    the remedy as ``spelling`` names it; None when there is none (or no column facts: record
    privacy, where the features are private). ``names``: the columns' public names."""
    worst = None if columns is None else columns.badly_scaled()
    if worst is None:
        return None
    assert columns is not None and columns.deviation is not None
    name = f"column {worst}" + (f" ({names[worst]!r})" if names else "")
    return (
        f"badly scaled columns: {name} has standard deviation {columns.deviation[worst]:.3g} "
        f"(the intercept's scale is 1), so the solver may crawl and the penalty weighs the "
        f"columns unevenly; use {spelling.standardize}"
    )


def check_standardize(mode: PrivacyMode, standardize: bool, spelling: Spelling) -> None:
    """ConfigError (one line) for standardization under a mode that protects the features:
    their means and deviations would be released without noise."""
    if standardize and not mode.features_public:
        raise ConfigError(
            f"{spelling.standardize.split('=')[0]} does not apply with {spelling.record}: the "
            f"features are private there and their means and scales would be released "
            f"without noise; scale the columns by public bounds before the run (and give "
            f"{spelling.row_bound} for the scaled rows)"
        )


def public_columns(
    mode: PrivacyMode, rows: Sequence[np.ndarray], n_total: int, *, standardize: bool = False
) -> PublicColumns | None:
    """The fit's :class:`PublicColumns` from every machine's rows (one process holds them all)
    when ``mode`` (the job's or estimator's) makes the features public, else None."""
    if not mode.features_public:
        return None
    parts = [ColumnMoments.of(x, len(rows)) for x in rows]
    return PublicColumns.pooled(parts, n_total, standardize=standardize)
