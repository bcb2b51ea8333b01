"""The facts of the features every machine's fit shares under label privacy.

Label privacy protects the labels only: the features are public inputs there, so the machines
may pool facts of them at set-up (never under record privacy, which protects them too:
the mode's ``features_public``). Each machine contributes its :class:`ColumnMoments`; the pooled
:class:`PublicColumns` are the same floats on every machine, whichever layout holds the rows
(one file split by rank 0, a file per machine, the estimator's array), because they are added
from the machines' parts in rank order:

- ``shift``: every column's mean m over all n training rows; the fit's columns are x - m;
- ``curvature``: lambda_max(X~^T X~) / n of the fit's design X~ = [X - 1 m^T, 1], which sets
  the starting penalty (:func:`~dpnet.decentralized.admm.initial_penalty`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpnet.privacy.modes import PrivacyMode

POOLED_SCATTER_ENTRIES = 2**25
"""The most scatter entries J p^2 the machines pool (256 MiB that each machine receives when
every machine sends its p x p scatter: p = 48 up to J = 14,563, p = 2,048 up to J = 8);
beyond, the curvature is unknown and the start the spectral one, whichever layout holds the
rows."""


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
    """One machine's part of :class:`PublicColumns`: its row count n_j, its column sums and
    the scatter of its rows about their own mean m_j, S_j = (X_j - 1 m_j^T)^T (X_j - 1 m_j^T)
    (None beyond :func:`pools_curvature`)."""

    rows: int
    sums: np.ndarray
    scatter: np.ndarray | None

    @classmethod
    def of(cls, X: np.ndarray, n_machines: int) -> ColumnMoments:
        """The moments of one machine's rows ``X`` (at least one row), one of ``n_machines``."""
        sums = column_sums(X)
        scatter = None
        if pools_curvature(n_machines, X.shape[1]):
            deviations = X - sums / X.shape[0]
            scatter = deviations.T @ deviations
        return cls(X.shape[0], sums, scatter)


@dataclass(frozen=True)
class PublicColumns:
    """The pooled facts of all training rows' features (module docstring): ``shift`` m, and
    ``curvature`` lambda_max(X~^T X~) / n (None when any part has no scatter, or when the
    scatter overflows: features beyond ~1e150)."""

    shift: np.ndarray
    curvature: float | None

    @classmethod
    def pooled(cls, parts: Sequence[ColumnMoments], n_total: int) -> PublicColumns:
        """From every machine's moments, in rank order.

        The pooled scatter is S = sum_j S_j + n_j (m_j - m)(m_j - m)^T (Chan, Golub and
        LeVeque's update: no cancellation for columns far from zero). The ones column of X~
        is orthogonal to the centred ones, with eigenvalue n, so
        lambda_max(X~^T X~) / n = max(1, lambda_max(S / n)).
        """
        shift = np.stack([part.sums for part in parts]).sum(axis=0) / n_total
        curvature = None
        if all(part.scatter is not None for part in parts):
            scatter = np.zeros((shift.size, shift.size))
            for part in parts:
                assert part.scatter is not None  # checked above
                between = part.sums / part.rows - shift
                scatter += part.scatter + part.rows * np.outer(between, between)
            if np.isfinite(scatter).all():  # else features near the float range: unknown
                top = np.linalg.eigvalsh(scatter / n_total)[-1]
                curvature = max(1.0, float(top))
        return cls(shift, curvature)


def public_columns(
    mode: PrivacyMode, rows: Sequence[np.ndarray], n_total: int
) -> PublicColumns | None:
    """The fit's :class:`PublicColumns` from every machine's rows (one process holds them all)
    when ``mode`` (the job's or estimator's) makes the features public, else None."""
    if not mode.features_public:
        return None
    return PublicColumns.pooled([ColumnMoments.of(x, len(rows)) for x in rows], n_total)
