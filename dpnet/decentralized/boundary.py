"""The release boundary of the main job, on one machine.

Design rule: everything the job prints, writes, plots or sends between machines is a function
of public inputs (features, public parameters and files, the graph) and of the randomized
labels only. The rule is carried by types, not by a list of fields to avoid:

- :class:`RawShard` is what a machine holds before randomized response; it is the only
  object of the run that carries a machine's raw labels.
- :func:`cross_boundary` is the only function that reads them: it applies randomized response
  with a stream used for it alone (:mod:`dpnet.streams`: passed in for this call, kept by
  nothing after it; no state, seed or uniform of it is ever released) and returns a
  :class:`PrivateShard` (features and randomized labels, nothing derived from the raw
  labels). The ADMM rounds, the messages, the
  report and the plots only ever receive a :class:`PrivateShard` or what was computed from it.
- Diagnostics that need the raw labels (how many labels were flipped, the loss on the true
  labels) are simulation oracles: :class:`LabelOracle` is kept only when the run asks for an
  oracle file, and what it computes goes to that file alone (see :mod:`dpnet.oracle`).

Guarantee of the crossing: binary randomized response with keep probability p on every raw
label of the shard, once, is ln(p/(1-p))-label-DP under replacing one label (features fixed);
everything after it is post-processing (Dwork & Roth 2014, Prop. 2.1). See docs/privacy.md,
"The release boundary".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpnet.decentralized.columns import PublicColumns
from dpnet.errors import PrivacyError
from dpnet.privacy.binary_rr import flip_labels
from dpnet.privacy.clipping import clip_rows_l2
from dpnet.privacy.discrete import gaussian_release


@dataclass(frozen=True)
class RawShard:
    """A machine's rows before randomized response: features, raw labels, public layout."""

    X: np.ndarray
    y_raw: np.ndarray
    n_total: int
    group_labels: np.ndarray
    group_weights: np.ndarray
    columns: PublicColumns | None = None  # see PrivateShard


@dataclass(frozen=True)
class PrivateShard:
    """A machine's rows after randomized response: features and randomized labels only."""

    X: np.ndarray
    y: np.ndarray
    n_total: int
    group_labels: np.ndarray
    group_weights: np.ndarray
    columns: PublicColumns | None = None
    """Label privacy: the pooled facts of all training rows' features (public there): the
    columns' mean, which the ADMM subtracts (:func:`dpnet.decentralized.machine.local_problem`),
    and their curvature, which sets its starting penalty. Record privacy with standardization:
    the centre and scale computed from the machines' released column sums
    (:func:`dpnet.decentralized.columns.release_column_sums`), with the bound ``row_clip`` of
    the standardized rows. None: the columns as given."""


@dataclass(frozen=True)
class LabelOracle:
    """Raw labels kept beside the randomized ones for oracle diagnostics (never released)."""

    y_raw: np.ndarray
    y_randomized: np.ndarray

    @property
    def labels_flipped(self) -> int:
        return int(np.count_nonzero(self.y_raw != self.y_randomized))


def randomize_labels(
    y_raw: np.ndarray, keep_prob: float, rng: np.random.Generator, part: str
) -> np.ndarray:
    """Randomized response on the labels of ``part`` (e.g. "machine 3"): the one place a raw
    label vector is turned into a releasable one (tests replace this function to hold the
    randomized labels fixed while changing raw ones). The release's event is
    :func:`dpnet.privacy.mechanisms.randomized_response_event` (keep_prob), recorded by rank 0
    (:func:`dpnet.decentralized.machine.privacy_ledger`): the machines never import the
    accounting."""
    if y_raw.ndim != 1 or not np.all((y_raw == 1.0) | (y_raw == -1.0)):
        raise PrivacyError(f"{part}: randomized response needs labels in {{-1, +1}}")
    return flip_labels(y_raw, keep_prob=keep_prob, rng=rng)


def release_theta(
    theta: np.ndarray,
    l2_sensitivity: float,
    noise_multiplier: float,
    rng: np.random.Generator,
    rank: int,
    round_: int,
) -> np.ndarray:
    """Record-level privacy: the one place a theta computed from a machine's rows is turned into
    a releasable one, by the grid Gaussian release (:func:`dpnet.privacy.discrete.gaussian_release`)
    with a stream made for this draw alone. ``rank`` and ``round_`` (public) name the release:
    tests replace this function by one of them alone, to hold the released thetas fixed while
    changing the rows. Its event, ``GaussianDpEvent(noise_multiplier)``
    once per round, is recorded by rank 0 (:func:`dpnet.decentralized.machine.privacy_ledger`)."""
    return gaussian_release(
        theta, l2_sensitivity=l2_sensitivity, noise_multiplier=noise_multiplier, rng=rng
    )


def release_column_sums(
    sums: np.ndarray,
    l2_sensitivity: float,
    noise_multiplier: float,
    rng: np.random.Generator,
    rank: int,
    what: str,
) -> np.ndarray:
    """Record-level privacy with standardization: the one place a vector of column sums of a
    machine's rows (``what``: "sums" or "squares") is turned into a releasable one, by the grid
    Gaussian release (:func:`dpnet.privacy.discrete.gaussian_release`, the Gaussian mechanism
    of :func:`dpnet.privacy.mechanisms.gaussian_mechanism` without its event) with the
    machine's column stream. ``rank`` and ``what`` (public) name the release: tests replace
    this function by one of them alone, to hold the released sums fixed while changing the
    rows. Its event, ``GaussianDpEvent(noise_multiplier)`` for each of the two vectors, is
    recorded by rank 0 (:func:`dpnet.decentralized.machine.privacy_ledger`)."""
    return gaussian_release(
        sums, l2_sensitivity=l2_sensitivity, noise_multiplier=noise_multiplier, rng=rng
    )


def cross_boundary(
    raw: RawShard,
    keep_prob: float,
    rng: np.random.Generator,
    part: str,
    *,
    keep_oracle: bool = False,
    row_bound: float | None = None,
) -> tuple[PrivateShard, LabelOracle | None]:
    """The machine's randomized shard and (only if asked) the oracle; with ``row_bound`` R
    (record-level privacy) every row scaled to ||x|| <= R: a map of each record alone, with a
    public bound, so the sensitivity of :mod:`dpnet.decentralized.record` holds. Under record
    privacy the shard's rows are not public: only :func:`release_theta` lets what the theta
    step computes from them out."""
    if row_bound is not None and raw.columns is not None and raw.columns.row_clip is None:
        raise PrivacyError(
            f"{part}: record privacy protects the features: no column facts but released ones"
        )
    noisy = randomize_labels(raw.y_raw, keep_prob, rng, part)
    X = raw.X if row_bound is None else clip_rows_l2(raw.X, row_bound)
    private = PrivateShard(X, noisy, raw.n_total, raw.group_labels, raw.group_weights, raw.columns)
    oracle = LabelOracle(raw.y_raw, noisy) if keep_oracle else None
    return private, oracle


def recross_boundary(
    raw: RawShard,
    y_randomized: np.ndarray,
    part: str,
    *,
    keep_oracle: bool = False,
) -> tuple[PrivateShard, LabelOracle | None]:
    """As :func:`cross_boundary`, for a run resumed from a checkpoint: the labels ``part``
    randomized before are used again, not drawn anew (a new draw would be a second release
    of the same labels); the ledger records that earlier release."""
    y = np.asarray(y_randomized)
    if y.shape != raw.y_raw.shape or not np.all((y == 1.0) | (y == -1.0)):
        raise PrivacyError(f"{part}: the checkpoint's randomized labels do not fit its rows")
    private = PrivateShard(raw.X, y, raw.n_total, raw.group_labels, raw.group_weights, raw.columns)
    oracle = LabelOracle(raw.y_raw, y) if keep_oracle else None
    return private, oracle
