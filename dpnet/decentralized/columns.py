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
intercept's, and the ADMM crawls.

Record privacy protects the features: there nothing of them is pooled exactly. Without
standardization the columns are used as given. With it (``--privacy record --standardize``,
``privacy="record", standardize=True``) every machine j releases, with Gaussian noise, the
sums of its rows' columns and of their squares, its rows first clipped to the public row
bound R (:func:`release_column_sums`):

    S_j = sum_i x_i + N_Z-grid(0, (m 2R)^2 I),
    Q_j = sum_i x_i * x_i + N_Z-grid(0, (m sqrt(2) R^2)^2 I),

(``*`` coordinatewise). Neighbouring shards (one record replaced, ||x||, ||x'|| <= R) move S_j
by x - x', ||x - x'|| <= 2R (attained at x' = -x), and Q_j by x*x - x'*x', whose two terms lie
in the non-negative orthant with ||x*x|| <= ||x*x||_1 = ||x||^2 <= R^2, so
||x*x - x'*x'||^2 = ||x*x||^2 + ||x'*x'||^2 - 2 <x*x, x'*x'> <= 2 R^4: L2 sensitivity
sqrt(2) R^2 (attained at x = R e_k, x' = R e_l, k != l; R^2 is not a bound). Each vector is a
Gaussian mechanism of multiplier m =
:attr:`~dpnet.privacy.modes.RecordPrivacy.column_noise_multiplier` (the mode's rule: the
two take :data:`~dpnet.privacy.modes.STANDARDIZE_SHARE` of the budget's mu^2, the thetas the
rest, so the fit stays exactly (epsilon, delta)-DP). The row counts n_j
are public under replace-one. Every machine then computes the same centre and scale from the
released sums alone (:meth:`PublicColumns.released`, post-processing) and the theta step sees
the standardized rows clipped to a bound computed from public inputs and those released values
alone (``row_clip``, at most :func:`standardized_row_bound`), so the sensitivity of
:mod:`dpnet.decentralized.record` holds with that bound. No column is called
badly scaled under record privacy (:func:`scaling_warning` reads no released value).
docs/privacy.md, "Standardization under record privacy", has the proof.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpnet import streams
from dpnet.privacy.clipping import clip_rows_l2
from dpnet.privacy.modes import PrivacyMode, RecordPrivacy, Spelling

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


STANDARDIZED_ROW_BOUND = 2.0
"""Under record privacy with standardization the theta step sees every standardized row
(x - m) / s clipped to the L2 norm STANDARDIZED_ROW_BOUND * sqrt(P) (P the public width): the
root mean square norm of exactly standardized rows is sqrt(P), so the bound clips only rows
twice as long as the typical one (:func:`standardized_row_bound`)."""


def standardized_row_bound(n_columns: int) -> float:
    """The public bound on the norm of a standardized row the theta step sees under record
    privacy: :data:`STANDARDIZED_ROW_BOUND` sqrt(P)."""
    return STANDARDIZED_ROW_BOUND * math.sqrt(n_columns)


def column_sensitivities(row_bound: float) -> tuple[float, float]:
    """The L2 sensitivities under replace-one of the column sums and of the sums of squares of
    rows of norm <= R = ``row_bound``: (2R, sqrt(2) R^2) (module docstring)."""
    return 2.0 * row_bound, math.sqrt(2.0) * row_bound * row_bound


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
class ReleasedColumnSums:
    """One machine's part of :class:`PublicColumns` under record privacy with standardization:
    its row count n_j (public under replace-one) and the released (noisy) sums of its clipped
    rows' columns and squared columns (:func:`release_column_sums`)."""

    rows: int
    sums: np.ndarray
    squares: np.ndarray


def release_column_sums(
    X: np.ndarray, mode: RecordPrivacy, rank: int, seed: int | None
) -> ReleasedColumnSums:
    """Machine ``rank``'s release of the noisy column sums and sums of squares of its rows
    ``X``, each row first scaled to norm <= R = ``mode.row_bound`` (public), each vector by the
    Gaussian mechanism with multiplier ``mode.column_noise_multiplier`` relative to its L2
    sensitivity (:func:`column_sensitivities`), through
    :func:`dpnet.decentralized.boundary.release_column_sums` with the machine's column stream
    (:func:`dpnet.streams.machine_columns_stream`, made for this release and dropped after it).
    Module docstring: the sensitivities; docs/privacy.md: the guarantee."""
    from dpnet.decentralized import boundary  # which imports this module

    multiplier = mode.column_noise_multiplier
    assert multiplier is not None  # a mode that standardizes
    clipped = clip_rows_l2(X, mode.row_bound)
    on_sums, on_squares = column_sensitivities(mode.row_bound)
    rng = streams.machine_columns_stream(seed, rank)  # for this release alone
    sums = boundary.release_column_sums(
        column_sums(clipped), on_sums, multiplier, rng, rank, "sums"
    )
    squares = boundary.release_column_sums(
        column_sums(clipped * clipped), on_squares, multiplier, rng, rank, "squares"
    )
    del rng
    return ReleasedColumnSums(X.shape[0], np.asarray(sums), np.asarray(squares))


def variance_floor(mode: RecordPrivacy, n_machines: int, n_total: int) -> float:
    """The smallest variance :meth:`PublicColumns.released` takes for a column: the standard
    deviation of the noise on the pooled mean of squares, m sqrt(2) R^2 sqrt(J) / n (public),
    below which a released variance cannot be told from zero (nor from a negative one)."""
    multiplier = mode.column_noise_multiplier
    assert multiplier is not None  # a mode that standardizes
    return multiplier * column_sensitivities(mode.row_bound)[1] * math.sqrt(n_machines) / n_total


@dataclass(frozen=True)
class PublicColumns:
    """The pooled facts of all training rows' features (module docstring): ``shift`` m,
    ``curvature`` lambda_max(X~^T X~) / n (None when any part has no scatter, or when the
    scatter overflows: features beyond ~1e150), ``scale`` (standardized: the columns'
    divisors; None: the columns centred only) and ``deviation`` s (None: not pooled).
    ``row_clip``: under record privacy (released columns) the public bound the standardized
    rows are clipped to before the theta step (None: no clip, label privacy)."""

    shift: np.ndarray
    curvature: float | None
    scale: np.ndarray | None = None
    deviation: np.ndarray | None = None
    row_clip: float | None = None

    @classmethod
    def released(
        cls, parts: Sequence[ReleasedColumnSums], n_total: int, mode: RecordPrivacy
    ) -> PublicColumns:
        """Record privacy: the centre and scale from every machine's released sums, in rank
        order (the same floats on every machine), by post-processing alone: with S and Q the
        network's sums, m = clip(S / n, +-R) and s^2 = clip(Q / n - m^2, f, R^2), f =
        :func:`variance_floor` (a column's values lie in [-R, R]: its variance is at most R^2);
        the rows the theta step sees are clipped to ``row_clip`` = min(
        :func:`standardized_row_bound`, (R + ||m||) / min_k s_k), the second a bound every
        standardized row of norm <= R meets (so the clip never costs more noise than the raw
        bound would, scaled). No curvature (the start is the graph's) and no deviation (no
        column is called badly scaled)."""
        bound = mode.row_bound
        sums = np.stack([part.sums for part in parts]).sum(axis=0)
        squares = np.stack([part.squares for part in parts]).sum(axis=0)
        shift = np.clip(sums / n_total, -bound, bound)
        floor = min(variance_floor(mode, len(parts), n_total), bound * bound)
        variance = np.clip(squares / n_total - shift * shift, floor, bound * bound)
        scale = np.sqrt(variance)
        # every row of norm <= R stays within (R + ||m||) / min s once standardized
        reach = (bound + float(np.linalg.norm(shift))) / float(scale.min())
        return cls(shift, None, scale, None, min(standardized_row_bound(shift.size), reach))

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


ColumnPart = ColumnMoments | ReleasedColumnSums
"""What one machine contributes to :class:`PublicColumns`: its moments (label privacy) or its
released sums (record privacy with standardization)."""


def column_part(
    mode: PrivacyMode, X: np.ndarray, n_machines: int, rank: int, seed: int | None
) -> ColumnPart | None:
    """Machine ``rank``'s part of the fit's :class:`PublicColumns` from its rows ``X``: under a
    mode whose features are public its :class:`ColumnMoments`; under record privacy with
    standardization (the mode's) its :func:`release_column_sums` (``seed``: its stream's);
    else None."""
    if mode.features_public:
        return ColumnMoments.of(X, n_machines)
    if isinstance(mode, RecordPrivacy) and mode.standardize:
        return release_column_sums(X, mode, rank, seed)
    return None


def pooled_columns(
    mode: PrivacyMode,
    parts: Sequence[ColumnPart | None],
    n_total: int,
    *,
    standardize: bool = False,
) -> PublicColumns | None:
    """The fit's :class:`PublicColumns` from every machine's :func:`column_part`, in rank
    order (the same floats on every machine), or None (record privacy without
    standardization: the columns as given)."""
    if mode.features_public:
        moments = [part for part in parts if isinstance(part, ColumnMoments)]
        assert len(moments) == len(parts)
        return PublicColumns.pooled(moments, n_total, standardize=standardize)
    if isinstance(mode, RecordPrivacy) and mode.standardize:
        released = [part for part in parts if isinstance(part, ReleasedColumnSums)]
        assert len(released) == len(parts)
        return PublicColumns.released(released, n_total, mode)
    return None


def public_columns(
    mode: PrivacyMode,
    rows: Sequence[np.ndarray],
    n_total: int,
    *,
    standardize: bool = False,
    seed: int | None = None,
) -> PublicColumns | None:
    """The fit's :class:`PublicColumns` from every machine's rows (one process holds them all:
    the estimator, or rank 0 of a job that splits one data set, which releases machine j's
    sums with machine j's stream), or None (:func:`pooled_columns`)."""
    parts = [column_part(mode, x, len(rows), rank, seed) for rank, x in enumerate(rows)]
    return pooled_columns(mode, parts, n_total, standardize=standardize)
