"""The private decentralized fit of a block of machines, on the library layer (no CLI config).

Each machine crosses the release boundary on its own shard (``randomize_all``: randomized
response on its labels with a stream used for it alone, :mod:`dpnet.streams`), then
``fit_private_block`` (also the main job's, :mod:`dpnet.cli.job`) builds the ADMM data from the
randomized shards and runs the round loop on the block (:mod:`dpnet.decentralized.block`: one
machine of an MPI rank or a thread, or all of them).
``privacy_ledger``: the run's ledger from the machines' releases (randomized response on labels,
and under record-level privacy the Gaussian releases of every round's theta).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from dpnet import streams
from dpnet.decentralized import boundary
from dpnet.decentralized.admm import (
    ADMMConfig,
    LoopState,
    MachineResult,
    ProgressRecord,
    machine_results,
    run_block,
)
from dpnet.decentralized.block import Block
from dpnet.decentralized.boundary import LabelOracle, PrivateShard, RawShard
from dpnet.decentralized.columns import PublicColumns
from dpnet.decentralized.stacked import StackedShards
from dpnet.decentralized.steps import GroupStructure, LocalData, local_objective
from dpnet.errors import PrivacyError
from dpnet.losses.margin import Logistic, UnbiasedLogistic
from dpnet.penalties.group import groups_from_labels
from dpnet.privacy.clipping import clip_rows_l2
from dpnet.privacy.modes import RECORD_GUARANTEE

if TYPE_CHECKING:  # the accounting is imported where the ledger is built (rank 0)
    from dp_accounting import dp_event

    from dpnet.privacy.ledger import PrivacyLedger

RR_RELATION = "replace_one"
RR_PROTECTS = "labels"
RECORD_RELATION = "replace_one"  # both relations replace one row: the ledger composes them
RECORD_PROTECTS = "records (features and label)"
HOLDOUT_PART = "held-out rows"


@dataclass(frozen=True)
class ThetaBudget:
    """Record-level privacy of a machine's messages: every round's theta released with noise
    multiplier ``noise_multiplier``, the budget spread over ``rounds`` rounds (a run that stops
    earlier is post-processing of one that ran them all)."""

    noise_multiplier: float
    rounds: int
    column_multiplier: float | None = None
    """With standardization: the multiplier of each of the machine's two column releases (its
    column sums and sums of squares, :func:`dpnet.decentralized.columns.release_column_sums`),
    made before the rounds; None without."""


@dataclass
class MachineRelease:
    """What a machine sends to rank 0 at the end: computed from its PrivateShard only."""

    result: MachineResult
    keep_prob: float  # of its randomized response: the ledger's event (privacy_ledger)
    theta_budget: ThetaBudget | None = None  # record-level privacy: its theta releases


@dataclass
class MachineOracle:
    """Oracle diagnostics of one machine (raw labels): sent only when an oracle file is asked."""

    labels_flipped: int
    loss_true_labels: float


@dataclass
class MachineOutcome:
    release: MachineRelease
    oracle: MachineOracle | None


LOSSES = ("logistic", "unbiased")  # unbiased: corrected for the known flip rate


def in_given_columns(
    theta: np.ndarray, shift: np.ndarray | None, scale: np.ndarray | None = None
) -> np.ndarray:
    """theta = (beta, b_c) (or a stack of them) fitted on the columns (x - shift) / scale
    (scale None: x - shift), as the same model of the columns as given: x^T beta' + b with
    beta' = beta / scale and b = b_c - shift^T beta'. The intercept is not penalized, so the
    shift alone leaves the optimum's beta and value unchanged; the scale changes the problem
    (the penalty weighs beta on the standardized columns), not the predictions of its
    solution."""
    if shift is None:
        return theta
    given = theta.copy()
    if scale is not None:
        given[..., :-1] /= scale
    given[..., -1] -= given[..., :-1] @ shift
    return given


def result_in_given_columns(result: MachineResult, columns: PublicColumns | None) -> MachineResult:
    """A machine's result with theta and Z as :func:`in_given_columns` (what it releases)."""
    if columns is None:
        return result
    shift, scale = columns.shift, columns.scale
    return replace(
        result,
        theta=in_given_columns(result.theta, shift, scale),
        z=in_given_columns(result.z, shift, scale),
    )


def local_problem(
    shard: PrivateShard,
    *,
    lam: float,
    loss: str,
    keep_prob: float,
    n_machines: int,
    out: np.ndarray | None = None,
) -> tuple[LocalData, GroupStructure]:
    """The machine's ADMM data (design with intercept column, randomized labels) and groups:
    thresholds lam w_g / (2J); the unbiased loss corrects for the known keep probability.

    The columns are shifted by their mean ``shard.columns.shift`` when the shard carries the
    public column facts (label privacy):
    columns far from zero share a direction with the intercept column, along which the ADMM
    crawls (columns of mean 100: 3,000 rounds unconverged; centred: 33); with standardization
    they are divided by ``shard.columns.scale`` too, and under record privacy (released
    columns) clipped to the public norm ``shard.columns.row_clip``, the row bound of the theta
    step's sensitivity. The results are turned back to the columns as given by
    :func:`in_given_columns`. ``out``: the (n_j, p + 1) array X~ is written into (a row of
    :meth:`StackedShards.designs`), else a new one."""
    grp_ptr, grp_indices = groups_from_labels(shard.group_labels)
    thresholds = lam * shard.group_weights / (2.0 * n_machines)
    X_aug = np.empty((shard.X.shape[0], shard.X.shape[1] + 1)) if out is None else out
    X_aug[:, -1] = 1.0
    if shard.columns is None:
        X_aug[:, :-1] = shard.X
    else:  # the shifted (and scaled) columns written in place: no copy of the shard beside X~
        np.subtract(shard.X, shard.columns.shift, out=X_aug[:, :-1])
        if shard.columns.scale is not None:
            np.divide(X_aug[:, :-1], shard.columns.scale, out=X_aug[:, :-1])
        if shard.columns.row_clip is not None:  # record privacy: the theta step's bound
            X_aug[:, :-1] = clip_rows_l2(X_aug[:, :-1], shard.columns.row_clip)
    margin_loss = UnbiasedLogistic(keep_prob) if loss == "unbiased" else Logistic()
    data = LocalData(X_aug, shard.y, shard.n_total, margin_loss)
    return data, GroupStructure(grp_ptr, grp_indices, thresholds)


def randomize_all(
    raws: Sequence[RawShard],
    keep_prob: float,
    seed: int | None,
    ranks: Sequence[int] | None = None,
    *,
    keep_oracle: bool = False,
    row_bound: float | None = None,
) -> list[tuple[PrivateShard, LabelOracle | None]]:
    """Every machine's crossing of the release boundary (``raws[r]`` machine ``ranks[r]``'s,
    by default machine r's), each with its own stream
    (:func:`dpnet.streams.machine_flip_stream`, created for its draw and dropped with it;
    rows clipped to ``row_bound`` under record-level privacy)."""
    crossings = []
    ranks = range(len(raws)) if ranks is None else ranks
    for rank, raw in zip(ranks, raws, strict=True):
        flips = streams.machine_flip_stream(seed, rank)  # for this machine's call alone
        crossings.append(
            boundary.cross_boundary(
                raw, keep_prob, flips, f"machine {rank}", keep_oracle=keep_oracle,
                row_bound=row_bound,
            )
        )  # fmt: skip
        del flips
    return crossings


def fit_private_block(
    block: Block,
    crossings: Sequence[tuple[PrivateShard, LabelOracle | None]],
    *,
    keep_prob: float,
    loss: str,
    admm: ADMMConfig,
    graph: nx.Graph,
    on_progress: Callable[[ProgressRecord], None] | None = None,
    start_state: LoopState | None = None,
    on_round: Callable[[LoopState], None] | None = None,
) -> list[MachineOutcome]:
    """The ADMM rounds on the block's randomized shards (``crossings[r]`` its r-th machine's;
    ``start_state``: continue a run); every machine's outcome, what it sends rank 0."""
    n_machines = graph.number_of_nodes()
    check_row_bound(admm, [shard for shard, _ in crossings])
    sizes = [s.X.shape[0] for s, _ in crossings]
    designs = StackedShards.designs(sizes, crossings[0][0].X.shape[1] + 1)  # X~ written once
    problems = [
        local_problem(
            s,
            lam=admm.lam,
            loss=loss,
            keep_prob=keep_prob,
            n_machines=n_machines,
            out=None if designs is None else designs[j, : sizes[j]],
        )
        for j, (s, _) in enumerate(crossings)
    ]
    shards = [data for data, _ in problems]
    result = run_block(
        block,
        StackedShards.stack(shards, designs),
        problems[0][1],
        admm,
        graph,
        on_progress if 0 in block.edges.ids else None,
        start_state=start_state,
        on_round=on_round,
    )
    rows = np.array([len(data.y) for data in shards])
    outcomes, budget = [], theta_budget(admm)
    for machine, data, (shard, label_oracle) in zip(
        machine_results(block, result, rows), shards, crossings, strict=True
    ):
        oracle = None if label_oracle is None else machine_oracle(label_oracle, data, machine)
        machine = result_in_given_columns(machine, shard.columns)
        outcomes.append(MachineOutcome(MachineRelease(machine, keep_prob, budget), oracle))
    return outcomes


def check_row_bound(admm: ADMMConfig, shards: Sequence[PrivateShard]) -> None:
    """Under record privacy the theta noise must be calibrated to the bound of the rows the
    theta step sees: the released columns' ``row_clip`` when the shards are standardized, else
    the row bound (PrivacyError otherwise: a noise calibrated to another bound)."""
    if admm.record is None:
        return
    for shard in shards:
        clip = None if shard.columns is None else shard.columns.row_clip
        if clip is not None and admm.record.row_bound != clip:
            raise PrivacyError(
                f"the theta noise is calibrated to rows of norm {admm.record.row_bound:g}, "
                f"the standardized rows are clipped to {clip:g}"
            )


def theta_budget(admm: ADMMConfig) -> ThetaBudget | None:
    """The record-level releases ``admm`` makes a machine send (None: label privacy)."""
    if admm.record is None:
        return None
    record = admm.record
    return ThetaBudget(record.noise_multiplier, admm.max_rounds, record.column_multiplier)


def machine_oracle(
    label_oracle: LabelOracle, data: LocalData, result: MachineResult
) -> MachineOracle:
    """Flip count and the local loss of the final iterate on the raw labels (oracle only)."""
    true_data = LocalData(data.X_aug, label_oracle.y_raw, data.n_total, Logistic())
    return MachineOracle(label_oracle.labels_flipped, local_objective(true_data, result.theta))


def consensus_model(releases: list[MachineRelease]) -> tuple[np.ndarray, float]:
    """(coef, intercept) of the consensus: the mean of the machines' Z iterates."""
    consensus = np.stack([r.result.z for r in releases]).mean(axis=0)
    return consensus[:-1], float(consensus[-1])


def privacy_ledger(
    releases: list[MachineRelease],
    holdout_event: dp_event.DpEvent | None = None,
    holdout_count_event: dp_event.DpEvent | None = None,
    delta: float | None = None,
) -> PrivacyLedger:
    """Per machine: its randomized response on labels (label privacy, or record privacy with
    --keep-prob), its column releases (record privacy with standardization, two Gaussian
    releases) and its theta releases (record privacy, ``rounds`` Gaussian releases); then
    the held-out rows' releases: randomized response on their labels, and under record privacy
    the noisy count that scores the model on them. Disjoint rows, so parallel composition
    gives the worst part's cost, not the sum over machines."""
    from dp_accounting import dp_event

    from dpnet.privacy.ledger import PrivacyLedger  # rank 0 only: machines skip the import
    from dpnet.privacy.mechanisms import randomized_response_event

    ledger = PrivacyLedger(delta=delta)
    for j, r in enumerate(releases):
        if r.theta_budget is None or r.keep_prob < 1.0:
            ledger.record(
                randomized_response_event(r.keep_prob),
                label=f"randomized response on machine {j}'s labels",
                relation=RR_RELATION,
                protects=RR_PROTECTS,
                machine=j,
                guarantee="epsilon-label-DP",
            )
        if r.theta_budget is not None and r.theta_budget.column_multiplier is not None:
            ledger.record(
                dp_event.SelfComposedDpEvent(
                    dp_event.GaussianDpEvent(r.theta_budget.column_multiplier), 2
                ),
                label=f"Gaussian noise on machine {j}'s column sums and sums of squares "
                "(standardization)",
                relation=RECORD_RELATION,
                protects=RECORD_PROTECTS,
                machine=j,
                guarantee=RECORD_GUARANTEE,
            )
        if r.theta_budget is not None:
            budget = r.theta_budget
            ledger.record(
                dp_event.SelfComposedDpEvent(
                    dp_event.GaussianDpEvent(budget.noise_multiplier), budget.rounds
                ),
                label=f"Gaussian noise on machine {j}'s theta in each of {budget.rounds} rounds",
                relation=RECORD_RELATION,
                protects=RECORD_PROTECTS,
                machine=j,
                guarantee=RECORD_GUARANTEE,
            )
    holdout = (
        (holdout_event, "randomized response on the held-out rows' labels (rank 0)", RR_PROTECTS),
        (holdout_count_event, "the held-out rows' agreement count, discrete Laplace (rank 0)",
         RECORD_PROTECTS),
    )  # fmt: skip
    for event, label, protects in holdout:
        if event is not None:
            ledger.record(
                event,
                label=label,
                relation=RR_RELATION,  # = RECORD_RELATION: replace one row
                protects=protects,
                machine=HOLDOUT_PART,
                guarantee="epsilon-label-DP" if protects == RR_PROTECTS else "epsilon-DP",
            )
    return ledger
