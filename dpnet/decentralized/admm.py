"""The round loop of the decentralized ADMM, written against the communicator interface.

Per round: Z step -> exchange Z with neighbours -> theta step -> exchange theta (with the
termination statistics piggybacked) -> dual step. No global collective is used.

Termination (:mod:`dpnet.decentralized.termination`): the network-wide statistics of round
t - 2H (H the height of a BFS spanning tree of the public graph, H <= diameter) reach every
machine at the end of round t through neighbour messages of constant size, so all machines
take the same stop decision in the same round.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np

from dpnet.decentralized import _edges, termination
from dpnet.decentralized._compiled import compiled_anew
from dpnet.decentralized.block import Block, CommBlock
from dpnet.decentralized.record import (
    DEFAULT_ROUNDS,
    RECORD_RELAXATION,
    RecordNoise,
    penalty_factor,
    private_thetas,
    record_noise,
)
from dpnet.decentralized.stacked import StackedShards
from dpnet.decentralized.steps import (
    NEWTON_TOL,
    THETA_RTOL,
    GroupStructure,
    LocalData,
    z_update,
)
from dpnet.decentralized.theta import (
    NO_ANCHORS,
    MajorizedThetaStep,
    NewtonThetaStep,
    ThetaResult,
    block_loss,
    gradient_thetas,
)
from dpnet.decentralized.theta import warm_up as theta_warm_up
from dpnet.errors import ConfigError
from dpnet.network.comm import Communicator, PeerSilent
from dpnet.network.topology import laplacian_extremes
from dpnet.privacy.modes import PrivacyMode, Spelling

if TYPE_CHECKING:
    from dpnet.decentralized.columns import PublicColumns

# residual balancing stops near the tolerance: there the residuals sit at rounding noise and a
# change of c only restarts the transient
ADAPT_FLOOR = 100.0
# the descent of c halves it only above this many x tol: in the drift a halving doubles the
# residual at once and at most doubles its rate, so it shortens the rest only above 2 x tol
DESCENT_FLOOR = 4.0
BALANCING, DESCENT = 0.0, 1.0  # the rule of a change of c: LoopState.penalty_changes[:, 2]
CHANGE_RULES = {BALANCING: "balancing", DESCENT: "descent"}
NO_CHANGES = np.empty((0, 3))  # LoopState.penalty_changes before the first change
NO_CHANGES.setflags(write=False)
PENALTY_SCALE = 0.21  # kappa of the spectral start, measured in docs/algorithms.md
# the curvature-scaled start (label privacy), measured in docs/algorithms.md: kappa' = kappa / 2
# (1/2 of the spectral start on complete graphs for centred binary data, whose curvature is 1)
CURVATURE_PENALTY_SCALE = PENALTY_SCALE / 2
SPECTRAL_RATIO_POWER = 0.2  # of mu_2 / mu_J in that start
# the descent of c in the tail (descent_factor), measured in docs/algorithms.md: its window
# of statistics, the quiet rounds of statistics before it starts, the rounds a change of c
# is given to show, and the growth of the residual ratio that ends it
DESCENT_WINDOW = 20
DESCENT_QUIET = 30
DESCENT_SETTLE = 20
DESCENT_JUMP = 3.0
MAX_PENALTY = 1e12
"""The largest c accepted: the default is ~1e-3-1, and beyond ~1e6 the iterates hardly move
(the stop rule then runs to max_rounds and says so); beyond ~1e150 theta - Z ~ 1/c squares
to 0 and even the rule's c r term (:func:`~dpnet.decentralized.steps.scaled_residual`) would
read 0: --c 1e300 stopped "converged" after 5 rounds with beta = 0."""


THETA_SOLVERS = ("newton", "majorized", "gradient")
"""The theta step: exact (Newton), or beta_steps iterations of majorize-minimize or of
gradient descent."""


@dataclass(frozen=True)
class ADMMConfig:
    """Parameters of the decentralized ADMM and the one place of their defaults (the CLI and
    the estimator take theirs from here; docs/algorithms.md says why these values)."""

    lam: float = 0.1
    c: float | None = None  # initial penalty; None: from the graph (initial_penalty)
    adapt_c: bool = True
    adapt_every: int = 10
    adapt_max: int = 30
    adapt_ratio: float = 30.0
    adapt_factor: float = 2.0
    adapt_unseen: int = 2  # changes of c in one direction the statistics may not yet reflect
    descend_c: bool = True  # after balancing, halve c while it helps (descent_factor)
    alpha_z: float = 1.0
    relaxation: float = 1.7  # over-relaxation alpha in (0, 2) (docs/algorithms.md)
    theta_solver: str = "newton"
    theta_rtol: float = THETA_RTOL  # Newton theta steps: solved rtol below the residuals
    beta_steps: int = 10
    beta_step_size: float = 0.4
    max_rounds: int = 3000
    tol: float = 1e-9
    max_coef_norm: float = 1e4
    progress_every: int = 0
    record: RecordNoise | None = None  # record-level privacy: every theta sent is noisy
    # label privacy: lambda_max(X~^T X~) / n of the fit's design (public there:
    # columns.PublicColumns.curvature), which scales the start; None: the spectral start
    feature_curvature: float | None = None
    # fault tests only (no option sets them; tests/fault_entry.py for a launched job):
    fail_at: tuple[int, int] | None = None  # (rank, round): raise there
    stall_at: tuple[int, int] | None = None  # (rank, round): go silent there


def mode_defaults(record: bool) -> tuple[int, float]:
    """(max_rounds, relaxation) by default in a privacy mode: under record privacy the ones its
    noise is spread over and its defaults were measured with (``record.DEFAULT_ROUNDS``,
    ``record.RECORD_RELAXATION``), else :class:`ADMMConfig`'s."""
    if record:
        return DEFAULT_ROUNDS, RECORD_RELAXATION
    return ADMMConfig.max_rounds, ADMMConfig.relaxation


def fit_settings(
    mode: PrivacyMode,
    seed: int | None,
    columns: PublicColumns | None,
    spelling: Spelling,
    *,
    max_rounds: int | None = None,
    relaxation: float | None = None,
    adapt_c: bool = True,
    **settings: Any,
) -> ADMMConfig:
    """The solver settings of a fit in privacy ``mode``, built here for both front doors (the
    command line's config and the estimator): the mode's rounds and relaxation where None
    (:func:`mode_defaults`), c adapted only where the mode allows it, the record noise spread
    over the rounds (``seed``: its streams'), the start scaled by the public columns'
    curvature; ``settings``: the other :class:`ADMMConfig` fields. ConfigError (named as
    ``spelling`` names it) for another theta step under a mode whose step is its own."""
    if mode.fixed_work_theta and settings.get("theta_solver", "newton") != "newton":
        raise ConfigError(
            f"{spelling.theta_solver} {settings['theta_solver']} does not apply with "
            f"{spelling.record}: its theta step is its own, of fixed work"
        )
    default_rounds, default_relaxation = mode_defaults(mode.noisy_thetas)
    rounds = default_rounds if max_rounds is None else max_rounds
    return ADMMConfig(
        max_rounds=rounds,
        relaxation=default_relaxation if relaxation is None else relaxation,
        adapt_c=adapt_c and mode.adapts_penalty,
        record=record_noise(mode, rounds, seed, None if columns is None else columns.row_clip),
        feature_curvature=None if columns is None else columns.curvature,
        **settings,
    )


@dataclass
class ProgressRecord:
    round: int
    objective: float
    primal_residual: float
    dual_residual: float


@dataclass
class LoopState:
    """Everything a block's round loop carries from one round to the next: with it (and the
    block's data) the loop continues bitwise as if it had never stopped. Rows: one per block
    machine (k) or one per edge (E) of :class:`~dpnet.decentralized.block.BlockEdges`."""

    round: int  # rounds completed
    theta: np.ndarray  # (k, p + 1)
    z: np.ndarray  # (k, p + 1)
    theta_nbhd: np.ndarray  # (E, p + 1): for edge (j, i) theta_i, as last received
    v_out: np.ndarray  # (E, p + 1): V_ji; see _edges.dual_step
    v_in: np.ndarray  # (E, p + 1): V_ij
    c: float
    penalty_changes: np.ndarray  # (changes, 3): round at whose end c changed, factor, rule
    aggregator: dict[str, np.ndarray]  # Statistics.state()
    history: list[ProgressRecord] = field(default_factory=list)
    # where each machine's kept Newton matrix was formed: NewtonThetaStep.state()[0]
    newton_anchor: np.ndarray = field(default_factory=lambda: NO_ANCHORS)
    theta_tol: np.ndarray | None = None  # (k,): the next theta steps' (None: round 1, relative)
    # (k, n_max): y X~ theta of the Newton step's points, carried
    theta_margins: np.ndarray = field(default_factory=lambda: NO_ANCHORS)


ROUND_STEPS = ("z_step", "theta_step", "statistics")
"""The parts of a round timed apart (communication is timed by the communicator):
statistics is the dual step, the residuals, the stop statistics and the stop decision."""


@dataclass
class StepClock:
    """CPU seconds spent in each of :data:`ROUND_STEPS`: ``lap(step)`` charges the time since
    the previous lap to ``step``; ``lap(None)`` drops it (communication, checkpoints)."""

    clock: Callable[[], float]
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ROUND_STEPS, 0.0))
    last: float = 0.0

    def __post_init__(self) -> None:
        self.last = self.clock()

    def lap(self, step: str | None) -> None:
        now = self.clock()
        if step is not None:
            self.seconds[step] += now - self.last
        self.last = now


@dataclass(frozen=True)
class PenaltyPath:
    """The penalty c of a run, the same on every machine: its start (:func:`initial_penalty`),
    its value at the end, and every change (round at whose end, factor)."""

    start: float
    final: float
    changes: np.ndarray  # (k, 3), as LoopState.penalty_changes

    def as_dict(self) -> dict[str, Any]:
        """For the results file: start, final and the changes as [round, factor, rule]."""
        changes = [[int(r), float(f), CHANGE_RULES[rule]] for r, f, rule in self.changes]
        return {"start": self.start, "final": self.final, "changes": changes}


@dataclass
class MachineResult:
    """What one machine ends with; gathered to rank 0 for reporting."""

    rank: int
    theta: np.ndarray
    z: np.ndarray
    rounds: int
    stop_reason: str
    local_objective: float
    n_rows: int
    traffic: dict[str, float | int]
    total_seconds: float  # of this process: a resumed run counts from its start
    compute_seconds: float  # wall time outside communication calls
    compute_cpu_seconds: float  # CPU time outside them (comm.stats.cpu_clock)
    started_at: float  # time.perf_counter() of this process when the loop began
    history: list[ProgressRecord] = field(default_factory=list)
    start_round: int = 0  # rounds done before this process (resumed from a checkpoint)
    startup_seconds: float | None = None  # the job's start to started_at (set by dpnet.run)
    host: str | None = None  # the machine's host name (set with startup_seconds)
    step_cpu_seconds: dict[str, float] | None = None  # ROUND_STEPS' CPU (None: not timed)
    penalty: PenaltyPath | None = None  # None: a result not of the round loop (tests)


def balance_penalty(primal: float, dual: float, ratio: float, factor: float) -> float:
    """Residual balancing (Boyd et al. 2011, eq. 3.13): the factor to multiply c by.

    Every machine calls it with the same network-wide residuals from the pipeline, so the
    penalty changes in the same round everywhere and the dual copies stay consistent.
    """
    if primal > ratio * dual:
        return factor
    if dual > ratio * primal:
        return 1.0 / factor
    return 1.0


def record_progress(
    complete: np.ndarray,
    done_round: int,
    config: ADMMConfig,
    history: list[ProgressRecord],
    on_progress: Callable[[ProgressRecord], None] | None,
) -> ProgressRecord:
    """The network statistics of ``done_round`` as a history record (every round: the
    convergence plot reads them), shown every ``progress_every`` rounds; the round loop and
    the batched simulator share it. Under record-level privacy the objective reads the rows,
    so it is neither sent nor recorded (NaN)."""
    objective = float(complete[0]) if config.record is None else math.nan  # not released
    record = ProgressRecord(done_round, objective, float(complete[2]), float(complete[3]))
    history.append(record)
    if (
        on_progress is not None
        and config.progress_every
        and done_round % config.progress_every == 0
    ):
        on_progress(record)
    return record


def residual_ratio(history: list[ProgressRecord], last: int, window: int) -> float | None:
    """The median of primal / dual residual over the network statistics of rounds
    last - window + 1 .. last (``history`` holds every round's, in order); None if some are
    not there or no dual residual is positive."""
    first = last - window + 1
    if not history or first < history[0].round or last > history[-1].round:
        return None
    records = history[first - history[0].round : last - history[0].round + 1]
    ratios = [r.primal_residual / r.dual_residual for r in records if r.dual_residual > 0]
    return float(np.median(ratios)) if ratios else None


def descent_factor(
    done_round: int, penalty_changes: np.ndarray, history: list[ProgressRecord]
) -> float | None:
    """The descent of c in the tail, once it has begun (None: it has not, balancing rules).

    Residual balancing raises c while the machines disagree, and then leaves it 8-64x above
    the start, where the tail is slow: the consensus point drifts to the optimum at a rate
    ~ 1/c, and the residual ratio r/s sits inside the dead band, growing like 1/c as c falls.
    Below the best c the consensus itself becomes the slow mode and r/s jumps (10-100x per
    halving). So, every DESCENT_WINDOW rounds of statistics, with the last change given
    DESCENT_SETTLE rounds to show: if the median r/s of the window grew more than
    DESCENT_JUMP-fold over the window before the last halving, c is doubled back; else c is
    halved again, down to the start at most (and, :func:`network_decision`, only while the
    scaled residual is above DESCENT_FLOOR x tol). A jump can show one halving late (a ring: the
    slow mode grows for 60 rounds), so at the first window after a doubling back, an r/s
    still more than DESCENT_JUMP-fold over that same reference doubles c once more, up to
    where the descent began; after that c is fixed for the rest of the run. Every machine
    reads the same statistics, so c changes in the same round everywhere; the state is
    ``penalty_changes`` and ``history``, so a resumed run decides the same.
    """
    # balancing never acts once the descent has begun: the last change says which rules
    if not len(penalty_changes) or penalty_changes[-1, 2] != DESCENT:
        return None
    last, factor = int(penalty_changes[-1, 0]), penalty_changes[-1, 1]
    if not _window_due(done_round, last, DESCENT_SETTLE):
        return 1.0
    if factor > 1.0 and _window_due(done_round - DESCENT_WINDOW, last, DESCENT_SETTLE):
        return 1.0  # the first window after a doubling back has been read: fixed
    descent = penalty_changes[penalty_changes[:, 2] == DESCENT, 1]
    if factor > 1.0 and np.prod(descent) >= 1.0:
        return 1.0  # doubled back to where the descent began
    last_halving = int(penalty_changes[penalty_changes[:, 1] < 1.0, 0][-1])
    now = residual_ratio(history, done_round, DESCENT_WINDOW)
    before = residual_ratio(history, last_halving, DESCENT_WINDOW)
    if now is None or before is None:
        return 1.0
    if now > DESCENT_JUMP * before:
        return 2.0
    return 0.5 if factor < 1.0 and _above_start(penalty_changes) else 1.0


def may_descend(
    done_round: int, penalty_changes: np.ndarray, history: list[ProgressRecord]
) -> bool:
    """Whether the descent (:func:`descent_factor`) begins at ``done_round``: balancing left c
    above its start and has been quiet (or paused within ADAPT_FLOOR x tol) for DESCENT_QUIET
    rounds of statistics before the window, and the window's r/s is known."""
    last = int(penalty_changes[-1, 0]) if len(penalty_changes) else 0
    return (
        _above_start(penalty_changes)
        and _window_due(done_round, last, DESCENT_QUIET)
        and residual_ratio(history, done_round, DESCENT_WINDOW) is not None
    )


def _window_due(done_round: int, last_change: int, wait: int) -> bool:
    """A descent decision is due: ``done_round`` ends a window of DESCENT_WINDOW rounds of
    statistics that begins ``wait`` rounds or more after the last change of c."""
    return done_round % DESCENT_WINDOW == 0 and done_round - DESCENT_WINDOW >= last_change + wait


def _above_start(penalty_changes: np.ndarray) -> bool:
    """c is above its start (the product of every change's factor, powers of 2: exact)."""
    return bool(np.prod(penalty_changes[:, 1]) > 1.0)


def network_decision(
    complete: np.ndarray,
    done_round: int,
    config: ADMMConfig,
    penalty_changes: np.ndarray,
    history: list[ProgressRecord],
) -> tuple[str | None, float, float]:
    """(stop reason or None, factor for c, rule of the change) from the network statistics of
    ``done_round`` (and ``history``, the statistics of every round so far); every machine
    (and the batched simulator) takes it from the same numbers.

    NaN or inf anywhere stops at once (max-based tests are false for NaN); a run-away iterate
    stops as 'diverged' (relative residuals would look small on it); then the tolerance; else
    the penalty, fixed after ``adapt_max`` changes: the descent of the tail once it has begun
    (:func:`descent_factor`, with ``descend_c``), else, every ``adapt_every`` rounds, residual
    balancing (paused within ADAPT_FLOOR x tol), with no more than ``adapt_unseen`` changes in
    one direction that the statistics of ``done_round`` do not reflect yet; where balancing
    leaves c (or has paused), the descent may begin (:func:`may_descend`). The descent begins
    and goes on within ADAPT_FLOOR x tol, where a large network's tail crawls (balancing
    pauses there before the descent could begin; benchmarks/penalty_tail.py measures it), but
    halves c only above DESCENT_FLOOR x tol: nearer, a halving costs more rounds than it
    saves. A change made at the end of round t shows in the
    statistics of rounds > t, which arrive 2H rounds late: on a long path the residuals of one
    regime would otherwise drive many changes (a 256-ring doubled c 25 times before the first
    doubling was seen; docs/algorithms.md)."""
    if not all(map(math.isfinite, complete.tolist())):  # five floats: no array call
        return "non-finite", 1.0, BALANCING
    if complete[4] > config.max_coef_norm:
        return "diverged", 1.0, BALANCING
    if complete[1] <= config.tol:
        return "converged", 1.0, BALANCING
    if not config.adapt_c or len(penalty_changes) >= config.adapt_max:
        return None, 1.0, BALANCING
    halving_pays = complete[1] > DESCENT_FLOOR * config.tol
    if config.descend_c:
        descent = descent_factor(done_round, penalty_changes, history)
        if descent is not None:
            return None, descent if descent >= 1.0 or halving_pays else 1.0, DESCENT
    if done_round % config.adapt_every != 0:
        return None, 1.0, BALANCING
    if complete[1] <= ADAPT_FLOOR * config.tol:  # balancing pauses; the descent may begin
        if halving_pays and config.descend_c and may_descend(done_round, penalty_changes, history):
            return None, 0.5, DESCENT
        return None, 1.0, BALANCING
    factor = balance_penalty(
        float(complete[2]), float(complete[3]), config.adapt_ratio, config.adapt_factor
    )
    unseen = penalty_changes[penalty_changes[:, 0] >= done_round, 1]
    if factor != 1.0 and np.count_nonzero(unseen == factor) >= config.adapt_unseen:
        return None, 1.0, BALANCING
    if factor == 1.0 and config.descend_c and may_descend(done_round, penalty_changes, history):
        return None, 0.5, DESCENT
    return None, factor, BALANCING


def record_change(
    penalty_changes: np.ndarray, round_: int, factor: float, rule: float = BALANCING
) -> np.ndarray:
    """``penalty_changes`` with the change of c by ``factor`` (by ``rule``) at the end of
    ``round_``."""
    return np.vstack([penalty_changes, [[round_, factor, rule]]])


def take_decision(
    complete: np.ndarray,
    done_round: int,
    round_: int,
    config: ADMMConfig,
    c: float,
    penalty_changes: np.ndarray,
    history: list[ProgressRecord],
    also_stop: Callable[[], bool] | None = None,
) -> tuple[str | None, float, np.ndarray]:
    """(stop reason or None, c, penalty changes) after :func:`network_decision` on the
    statistics of ``done_round`` (the last of ``history``), applied at the end of ``round_``;
    ``also_stop`` (the simulator's ``stop_when``) is asked only when the network would go on,
    and stops with reason "stop_when". The round loop and the batched simulator share it."""
    reason, factor, rule = network_decision(complete, done_round, config, penalty_changes, history)
    if reason is None and also_stop is not None and also_stop():
        reason = "stop_when"
    if reason is None and factor != 1.0:
        c *= factor
        penalty_changes = record_change(penalty_changes, round_, factor, rule)
    return reason, c, penalty_changes


def compile_kernels() -> bool:
    """Compile the round's kernels, the Newton theta step, the edge arithmetic and the
    statistics' combination (:mod:`dpnet.decentralized._newton`, :mod:`._edges`,
    :func:`dpnet.decentralized.termination.combine`), or load them
    from numba's on-disk cache. A first process pays numba's compilation here (about ten
    seconds, once per installation: an image build runs it, launch/Dockerfile). True if
    anything was compiled (not all loaded from the cache)."""
    theta_warm_up()
    _edges.warm_up()
    termination.warm_up()
    return compiled_anew()


def initial_penalty(config: ADMMConfig, graph: nx.Graph) -> float:
    """The starting penalty c_0, from public facts only: the same float on every machine.

    ``config.c`` if given; else, with the features' public curvature
    s = lambda_max(X~^T X~) / n (``config.feature_curvature``, label privacy), the
    curvature-scaled start

        c_0 = kappa' sqrt(s) (mu_2 / mu_J)^0.2 / (J sqrt(mu_2 mu_J)),   kappa' = kappa / 2,

    and without it (record privacy, or data wider than the pooled scatter allows) the
    spectral start

        c_0 = kappa / (J sqrt(mu_2 mu_J)),   kappa = PENALTY_SCALE,

    mu_2 and mu_J the extreme non-zero eigenvalues of the graph Laplacian (both are 1 for
    J = 1). The decentralized-ADMM rate bounds (Shi et al. 2014) put the best c at
    ~ sqrt(m_f M_f) / sqrt(mu_2 mu_J), m_f and M_f the local losses' curvature bounds, each
    ~1/J of the objective's (f_j carries 1/n over n/J rows); M_f scales with s (the
    logistic loss's smoothness bound is s / 4), m_f is the labels' (private) and taken as
    fixed. The factor (mu_2 / mu_J)^0.2 (1 on complete graphs, 0.17 on a ring of 256)
    and kappa' were measured. On a complete graph the spectral start is kappa / J^2, the
    degree rule kappa / (J + 2|E|); on a ring of 256 it is 61x that rule. Under record
    privacy kappa is multiplied by :func:`dpnet.decentralized.record.penalty_factor` of the
    noise multiplier (public). Rounded to three significant digits: machines whose
    eigensolvers differ in the last bits (other hosts' LAPACK) still get the same float
    unless it sits on a rounding boundary. docs/algorithms.md has the derivation and the
    measurements.
    """
    if config.c is not None:
        return config.c
    if graph.number_of_nodes() == 1:
        mu_2 = mu_max = 1.0
    else:
        mu_2, mu_max = laplacian_extremes(graph)
        if mu_2 <= 1e-10 * mu_max:
            raise ValueError("the machine graph is not connected (algebraic connectivity 0)")
    spectral = graph.number_of_nodes() * np.sqrt(mu_2 * mu_max)
    if config.feature_curvature is not None:
        scale = np.sqrt(config.feature_curvature) * (mu_2 / mu_max) ** SPECTRAL_RATIO_POWER
        return float(f"{CURVATURE_PENALTY_SCALE * scale / spectral:.3g}")
    kappa = PENALTY_SCALE
    if config.record is not None:  # record privacy: less noise for a larger c
        kappa *= penalty_factor(config.record.noise_multiplier)
    return float(f"{kappa / spectral:.3g}")


def initial_state(block: Block, dim: int, c: float) -> LoopState:
    """Round 0: every iterate and dual copy zero, c at ``c`` (:func:`initial_penalty`)."""
    n_mach, n_edges = len(block.edges.ids), len(block.edges.col)
    return LoopState(
        round=0,
        theta=np.zeros((n_mach, dim)),
        z=np.zeros((n_mach, dim)),
        theta_nbhd=np.zeros((n_edges, dim)),
        v_out=np.zeros((n_edges, dim)),
        v_in=np.zeros((n_edges, dim)),
        c=c,
        penalty_changes=NO_CHANGES,
        aggregator=block.stats.state(),
    )


@dataclass
class BlockResult:
    """What a block's machines end with: their iterates (k, dim), f_j(theta_j) (NaN where
    withheld), the common stop round and reason, the penalty path, the network statistics of
    every round, and the block's times (this process's)."""

    theta: np.ndarray
    z: np.ndarray
    local_objective: np.ndarray
    rounds: int
    stop_reason: str
    penalty: PenaltyPath
    history: list[ProgressRecord]
    start_round: int
    started_at: float  # time.perf_counter() when the rounds began
    seconds: float
    cpu_seconds: float  # of the block's clock
    step_cpu_seconds: dict[str, float]


class _ThetaStep:
    """The block's theta step as ``config`` asks (:mod:`dpnet.decentralized.theta`)."""

    def __init__(self, config: ADMMConfig, data: StackedShards, block: Block, state: LoopState):
        self.config, self.data, self.ids = config, data, block.edges.ids
        self.newton = None
        self.majorized = None
        if config.record is None and config.theta_solver == "newton":
            self.newton = NewtonThetaStep(
                data, state.theta, state.newton_anchor, state.theta_margins
            )
        elif config.record is None and config.theta_solver == "majorized":
            self.majorized = MajorizedThetaStep(data, config.beta_steps)

    def __call__(
        self,
        center: np.ndarray,
        rho: np.ndarray,
        theta: np.ndarray,
        round_: int,
        theta_tol: np.ndarray | None,
    ) -> ThetaResult:
        config, data = self.config, self.data
        if config.record is not None:
            private = private_thetas(config.record, data, center, rho, round_, self.ids)
            return ThetaResult(private, None, 0.0)
        if self.newton is not None:  # to theta_tol, or in round 1 relative to the start
            if theta_tol is None:
                return self.newton(center, rho, theta, relative=config.theta_rtol)
            return self.newton(center, rho, theta, tol=theta_tol)
        if self.majorized is not None:
            return ThetaResult(self.majorized(center, rho, theta), None, 0.0)
        stepped = gradient_thetas(
            data,
            center,
            rho,
            theta,
            n_steps=config.beta_steps,
            step_size=config.beta_step_size,
        )
        return ThetaResult(stepped, None, 0.0)

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """(Newton anchors, margins) for the loop state."""
        return (NO_ANCHORS, NO_ANCHORS) if self.newton is None else self.newton.state()


def _inject_faults(config: ADMMConfig, block: Block, ranks: list[int], round_: int) -> None:
    """The fault tests' ``fail_at`` and ``stall_at`` of a machine of this block."""
    if config.fail_at is not None and config.fail_at[1] == round_ and config.fail_at[0] in ranks:
        raise block.fault(config.fail_at[0], round_)
    if config.stall_at is not None and config.stall_at[1] == round_ and config.stall_at[0] in ranks:
        block.stall()


def _own_loss(config: ADMMConfig, data: StackedShards, solved: ThetaResult) -> np.ndarray:
    """Every block machine's f_j(theta_j) for its stop statistics, 0 under record privacy
    (withheld: it reads the rows)."""
    if config.record is not None:
        return np.zeros(solved.theta.shape[0])
    return block_loss(data, solved.theta) if solved.loss is None else solved.loss


def run_block(
    block: Block,
    data: StackedShards,
    groups: GroupStructure,
    config: ADMMConfig,
    graph: nx.Graph,
    on_progress: Callable[[ProgressRecord], None] | None = None,
    *,
    start_state: LoopState | None = None,
    on_round: Callable[[LoopState], None] | None = None,
    stop_when: Callable[[ProgressRecord], bool] | None = None,
) -> BlockResult:
    """Run the ADMM on a block of machines until the network-wide stop decision (module
    docstring): the one round loop of every backend (:mod:`dpnet.decentralized.block`).

    ``data`` holds the block's shards (one row per machine of ``block.edges.ids``);
    ``graph`` is the (public) machine graph, the same on every machine: it fixes the
    spanning tree along which the stop statistics travel. ``start_state`` continues a run
    (e.g. from a checkpoint); ``on_round`` sees the state after every round that did not
    stop, before the next begins (the dual copies are updated in place: copy what you
    keep). ``stop_when`` (simulation: a known optimum reached) sees every record after the
    stop rule and ends the run with reason "stop_when". A neighbour's silence
    (:class:`PeerSilent`) is re-raised with the round it happened in.
    """
    start = time.perf_counter()
    step_clock = StepClock(block.clock)
    cpu_start = step_clock.last
    edges = block.edges
    ids, ptr, degree = edges.ids, edges.ptr, edges.degree
    dim = data.X.shape[2]
    stats = block.stats
    c_start = initial_penalty(config, graph)  # the path's start, resumed or not
    state = initial_state(block, dim, c_start) if start_state is None else start_state
    stats.restore(state.aggregator)
    theta, z, theta_nbhd = state.theta, state.z, state.theta_nbhd
    v_out, v_in, c, changes = state.v_out, state.v_in, state.c, state.penalty_changes
    history = list(state.history)
    theta_tol = state.theta_tol
    stop_reason = "max_rounds"
    rounds = state.round
    solver = _ThetaStep(config, data, block, state)
    loss: np.ndarray | None = None
    ranks = ids.tolist()
    z_in, z_out = np.empty_like(v_in), np.empty_like(v_out)  # the round's relaxed copies

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for t in range(state.round + 1, config.max_rounds + 1):
            rounds = t
            _inject_faults(config, block, ranks, t)
            z_prev = z
            z = z_update(theta_nbhd, v_out, z_prev, c, groups, edges, config.alpha_z)
            step_clock.lap("z_step")
            try:
                z_nbhd = block.exchange(z)
                step_clock.lap(None)
                center = _edges.relaxed_centers(
                    z, z_nbhd, theta, theta_nbhd, v_in, ptr, config.relaxation, c, z_in, z_out
                )
                solved = solver(center, c * degree, theta, t, theta_tol)
                theta, loss = solved.theta, solved.loss
                message = np.empty((len(ranks), dim + stats.width))
                message[:, :dim] = theta
                stats.outgoing(message[:, dim:])
                step_clock.lap("theta_step")
                received = block.exchange(message)
                step_clock.lap(None)
            except PeerSilent as exc:
                exc.round = t
                raise
            theta_nbhd = np.ascontiguousarray(received[:, :dim])  # one layout compiled
            error = solved.error
            own, theta_tol = _edges.close_round(
                v_out, v_in, z_out, z_in, theta, theta_nbhd, z, z_prev, ptr, c,
                groups.theta_group, groups.thresholds, _own_loss(config, data, solved),
                error if isinstance(error, np.ndarray) else np.full(len(ranks), error),
                NEWTON_TOL, config.theta_rtol,
            )  # fmt: skip
            stats.receive(t, own, received[:, dim:])

            complete = stats.network_stats(t)
            if complete is not None:
                record = record_progress(complete, t - stats.lag, config, history, on_progress)
                also_stop = None if stop_when is None else partial(stop_when, record)
                reason, c, changes = take_decision(
                    complete, record.round, t, config, c, changes, history, also_stop
                )
                if reason is not None:
                    stop_reason = reason
                    step_clock.lap("statistics")
                    break
            step_clock.lap("statistics")
            if on_round is not None:
                anchors, margins = solver.state()
                on_round(
                    LoopState(
                        round=t,
                        theta=theta,
                        z=z,
                        theta_nbhd=theta_nbhd,
                        v_out=v_out,
                        v_in=v_in,
                        c=c,
                        penalty_changes=changes,
                        aggregator=stats.state(),
                        history=history,
                        newton_anchor=anchors,
                        theta_tol=theta_tol,
                        theta_margins=margins,
                    )
                )
                step_clock.lap(None)

    if config.record is not None:
        local = np.full(len(ranks), math.nan)  # withheld
    else:
        local = block_loss(data, theta) if loss is None else loss
    return BlockResult(
        theta=theta,
        z=z,
        local_objective=local,
        rounds=rounds,
        stop_reason=stop_reason,
        penalty=PenaltyPath(c_start, c, changes),
        history=history,
        start_round=state.round,
        started_at=start,
        seconds=time.perf_counter() - start,
        cpu_seconds=block.clock() - cpu_start,
        step_cpu_seconds=step_clock.seconds,
    )


def machine_results(block: Block, result: BlockResult, n_rows: np.ndarray) -> list[MachineResult]:
    """Each block machine's :class:`MachineResult`: its iterates and rows, its traffic, and
    its share of the block's times (a machine's own process: all of them)."""
    share = 1.0 / len(block.edges.ids)
    seconds, cpu = result.seconds * share, result.cpu_seconds * share
    steps = {step: spent * share for step, spent in result.step_cpu_seconds.items()}
    return [
        MachineResult(
            rank=int(rank),
            theta=result.theta[r],
            z=result.z[r],
            rounds=result.rounds,
            stop_reason=result.stop_reason,
            local_objective=float(result.local_objective[r]),
            n_rows=int(n_rows[r]),
            traffic=traffic,
            total_seconds=seconds,
            compute_seconds=seconds - traffic["comm_seconds"],
            compute_cpu_seconds=cpu - traffic["comm_cpu_seconds"],
            started_at=result.started_at,
            history=result.history,
            start_round=result.start_round,
            step_cpu_seconds=steps,
            penalty=result.penalty,
        )
        for r, (rank, traffic) in enumerate(zip(block.edges.ids, block.traffic(), strict=True))
    ]


def run_machine(
    comm: Communicator,
    data: LocalData,
    groups: GroupStructure,
    config: ADMMConfig,
    graph: nx.Graph,
    on_progress: Callable[[ProgressRecord], None] | None = None,
    *,
    start_state: LoopState | None = None,
    on_round: Callable[[LoopState], None] | None = None,
) -> MachineResult:
    """:func:`run_block` on one machine (a block of one over ``comm``)."""
    block = CommBlock(comm, graph)
    result = run_block(
        block,
        StackedShards.one(data),
        groups,
        config,
        graph,
        on_progress,
        start_state=start_state,
        on_round=on_round,
    )
    return machine_results(block, result, np.array([len(data.y)]))[0]
