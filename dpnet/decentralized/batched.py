r"""All J machines' ADMM steps as arrays in one process: a simulator for large networks.

The round loop (:func:`dpnet.decentralized.admm.run_machine`) runs one machine per MPI rank or
thread; with J = 1,000 threads the GIL and the barriers dominate. Here every step is done for
all machines at once, on arrays:

- theta, Z: shape (J, dim), dim = p + 1 (intercept last);
- the multipliers: one row per directed edge (j, i) of the graph *with* self-loops, held in CSR
  order (row j = sorted closed neighbourhood Nbar_j), ``V[k] = V_ji`` for k = (j, i). The round
  loop keeps two bitwise-equal copies (j's ``v_out[i]`` and i's ``v_in[j]``); one array suffices,
  and ``V[rev[k]] = V_ij`` is the copy j's theta step reads;
- neighbourhood sums over k in row j: :meth:`EdgeIndex.row_sum` along the CSR pointer.

One round, for all j at once (the same formulas as :mod:`dpnet.decentralized.steps`):

    Z_j     <- S(u_j; lam w/(2J)) / (c d_j),    u_j = sum_{i in Nbar_j} (c theta_i - V_ji)
    theta_j <- argmin f_j(theta) + (c d_j/2) ||theta - m_j||^2,  m_j = mean_i (Z_i + V_ij/c)
    V_ji    += c (Z_j - theta_i)

The theta step is the damped Newton method of ``theta_update_newton`` with a per-machine
active mask: every machine takes exactly its own sequence of Newton iterations and Armijo
halvings (to the round loop's gradient tolerance, ``steps.theta_tolerance`` of the machine's
residuals; at most 50 iterations; the full step in the quadratic-convergence region). Each
machine keeps its Newton matrix across iterations and rounds exactly when the round loop's
``ChordNewton`` does, as its inverse (:class:`KeptMatrices`): a step of the active machines
is one stacked product (J_active, dim, dim) @ (J_active, dim). Each machine's margins, loss
and loss gradient are carried along the steps and from round to round
(:class:`StackedPoints`, the round loop's ``DescentPoint``): a step costs one product with
X~ for the margins and one for the gradient at the new point. Shards of unequal size are
padded with rows of zero weight (zero features; their loss is masked out of the objective).

Stop rule and residual balancing are those of ``run_machine``: the network aggregate
G(s) = (sum_j objective part, max_j scaled residual, max_j primal, max_j dual, max_j ||theta_j||)
of round s is computed directly, and applied in round t = s + 2H (H the height of
``tree_plan(graph, 0)``), the round in which the spanning-tree waves deliver it to every
machine, so the stop round and the stop reason equal the round loop's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import cast

import networkx as nx
import numpy as np
from scipy.linalg.blas import dsyrk
from scipy.linalg.lapack import dpotrf, dpotri

from dpnet.decentralized.admm import (
    NO_CHANGES,
    ADMMConfig,
    PenaltyPath,
    ProgressRecord,
    initial_penalty,
    record_progress,
    take_decision,
)
from dpnet.decentralized.record import private_thetas
from dpnet.decentralized.stacked import (
    StackedShards,
    machine_rows,
    matvecs,
    stack_matvec,
)
from dpnet.decentralized.steps import (
    ARMIJO_FRACTION,
    CHORD_CONTRACTION,
    CHORD_STEPS,
    FLAT_SLOPE,
    NEWTON_MAX_ITER,
    NEWTON_TOL,
    SMALLEST_STEP,
    GroupStructure,
    LocalData,
    scaled_residual,
    theta_tolerance,
)
from dpnet.decentralized.termination import MESSAGE_SIZE, bfs_tree, tree_plan
from dpnet.errors import MachineFailure

FLOAT_BYTES = 8


@dataclass(frozen=True)
class EdgeIndex:
    """The graph with self-loops as CSR over directed edges k = (row[k], col[k]).

    Row j holds Nbar_j = N_j + {j} in increasing order (the order of the round loop's
    neighbourhood arrays); ``rev[k]`` is the edge (col[k], row[k]); ``degree[j]`` = d_j.
    """

    ptr: np.ndarray
    row: np.ndarray
    col: np.ndarray
    rev: np.ndarray
    degree: np.ndarray

    @classmethod
    def from_graph(cls, graph: nx.Graph) -> EdgeIndex:
        n = graph.number_of_nodes()
        cols = [sorted({int(v) for v in graph.neighbors(j)} | {j}) for j in range(n)]
        degree = np.array([len(c) for c in cols], dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(degree)]).astype(np.int64)
        row = np.repeat(np.arange(n, dtype=np.int64), degree)
        col = np.concatenate(cols).astype(np.int64)
        keys = row * n + col  # increasing: rows in order, columns sorted within a row
        rev = np.searchsorted(keys, col * n + row)
        return cls(ptr, row, col, rev, degree)

    def row_sum(self, values: np.ndarray) -> np.ndarray:
        """sum over k in row j of values[k], for every j: shape (J, ...). Rows of at most 8
        edges: v_first + ((v_second + v_third) + ...), the order of ``np.add.reduceat`` (used
        for longer rows: it adds them pairwise), by one gather of (J, ...) per position in a
        row (reduceat on 2-d values runs a short loop per row and column: 2.4x slower at
        J = 1,000, degree 3)."""
        first, length = self.ptr[:-1], self.degree
        if length.max() > 8:
            return np.add.reduceat(values, first, axis=0)
        total = values[first]
        if length.max() == 1:
            return total
        paired = length > 1
        rest = values[first[paired] + 1]
        for k in range(2, int(length.max())):
            longer = length[paired] > k
            if longer.all():
                rest += values[first[paired] + k]
            else:
                rest[longer] += values[first[paired][longer] + k]
        if paired.all():
            total += rest
        else:
            total[paired] += rest
        return total


@dataclass(frozen=True)
class WarmStart:
    """Iterates to start a run from: theta, Z (J, dim) and the multipliers V (one row per
    directed edge of :class:`EdgeIndex`), what the round loop's ``LoopState`` holds of them."""

    theta: np.ndarray
    z: np.ndarray
    V: np.ndarray


@dataclass
class BatchedResult:
    """Per-machine final iterates, the common stop round and reason, and the traffic a real
    network would carry (bytes each machine sends per round, both exchanges)."""

    theta: np.ndarray  # (J, dim)
    z: np.ndarray  # (J, dim)
    rounds: int
    stop_reason: str
    penalty: PenaltyPath
    bytes_per_round: np.ndarray  # (J,)
    seconds: float
    started_at: float  # time.perf_counter() when the rounds began
    history: list[ProgressRecord] = field(default_factory=list)
    warm_start: WarmStart | None = None  # the last round that did not stop (see run_batched)

    @property
    def c_final(self) -> float:
        return self.penalty.final

    @property
    def n_adapted(self) -> int:
        """How often c changed."""
        return len(self.penalty.changes)

    @property
    def consensus(self) -> np.ndarray:
        """The reported model: the mean of the machines' Z."""
        return self.z.mean(axis=0)


def _rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a_j . b_j for every row j."""
    return np.einsum("ij,ij->i", a, b)


def _py_max(a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    """Python's max(a, b) elementwise (a unless b > a; NaN handling included)."""
    return np.where(b > a, b, a)


def z_update_batched(
    theta: np.ndarray,
    V: np.ndarray,
    z_prev: np.ndarray,
    c: float,
    groups: GroupStructure,
    edges: EdgeIndex,
    alpha_z: float = 1.0,
) -> np.ndarray:
    """Z_j = S(u_j; t) / (c d_j), u_j = sum_{i in Nbar_j} (c theta_i - V_ji), for every j."""
    u = edges.row_sum(c * theta[edges.col] - V)
    target = u.copy()
    target[:, :-1] = groups.soft_threshold(u[:, :-1])
    target /= (c * edges.degree)[:, None]
    if alpha_z == 1.0:
        return target
    return z_prev + alpha_z * (target - z_prev)


@dataclass
class KeptMatrices:
    """Every machine's kept Newton matrix (:class:`~dpnet.decentralized.steps.ChordNewton`
    for all machines at once), formed with ``rho[j]``, valid where ``kept[j]``: for a machine
    that keeps it its inverse ``inverse[j]``, so that a step on it is one product (a batched
    solve factorized every (J, dim, dim) matrix again in every iteration), and its data part
    X~^T D X~ in ``hess[j]`` (lower triangle) for a new rho; else the matrix ``hess[j]``;
    ``chords[j]`` False for a machine whose round loop takes plain Newton steps (a wide
    shard, n_j < p + 1: its Newton system is the Woodbury one there)."""

    hess: np.ndarray  # (J, dim, dim): where not chords the matrix; where chords its data part
    inverse: np.ndarray  # (J, dim, dim), where chords
    rho: np.ndarray  # (J,)
    kept: np.ndarray  # (J,) bool
    chords: np.ndarray  # (J,) bool

    @classmethod
    def none(cls, data: StackedShards) -> KeptMatrices:
        n_mach, _, dim = data.X.shape
        rows = data.X.shape[1] if data.mask is None else data.mask.sum(axis=1)
        return cls(
            np.zeros((n_mach, dim, dim)),
            np.zeros((n_mach, dim, dim)),
            np.full(n_mach, np.nan),
            np.zeros(n_mach, dtype=bool),
            np.broadcast_to(rows >= dim, (n_mach,)).copy(),
        )


def _newton_inverses(
    X: np.ndarray,
    idx: np.ndarray,
    sqrt_weights: np.ndarray,
    rho: np.ndarray,
    out: np.ndarray,
    grams: np.ndarray,
) -> None:
    """out[j] = (S_k^T S_k + rho_k I)^{-1}, S_k = diag(sqrt_weights[k]) X~_j, j = idx[k]: the
    inverse Newton matrices, machine by machine on views of X~ (no copy of the stack), S^T S one
    symmetric product (BLAS dsyrk, half a general product's flops; of S^T, a Fortran-ordered
    view of a row-major S) kept in ``grams[j]`` (its lower triangle: the data part a new rho
    shifts, :func:`_shifted_inverses`), inverted by :func:`_invert_shifted`.

    S and the matrix live in buffers kept for the whole call (a fresh S per machine cost more
    than its product)."""
    n_rows, dim = X.shape[1], X.shape[2]
    scaled = np.empty((n_rows, dim))
    hess = np.zeros((dim, dim), order="F")
    for k, j in enumerate(idx):
        np.multiply(X[j], sqrt_weights[k][:, None], out=scaled)
        hess = dsyrk(1.0, scaled.T, c=hess, lower=1, overwrite_c=1)
        grams[j] = hess
        _invert_shifted(hess, rho[k], out[j])
    _halve_diagonals(out, idx)


def _shifted_inverses(grams: np.ndarray, idx: np.ndarray, rho: np.ndarray, out: np.ndarray) -> None:
    """out[j] = (G_j + rho_k I)^{-1} for the kept data parts G_j = grams[j], j = idx[k] (lower
    triangles, as :func:`_newton_inverses` keeps them): a kept matrix under a new rho, as
    ``ChordNewton`` shifts its kept data part."""
    dim = grams.shape[1]
    hess = np.zeros((dim, dim), order="F")
    for k, j in enumerate(idx):
        hess[...] = grams[j]
        _invert_shifted(hess, rho[k], out[j])
    _halve_diagonals(out, idx)


def _invert_shifted(hess: np.ndarray, rho: float, out: np.ndarray) -> None:
    """out = L + L^T for L the lower triangle of (hess + rho I)^{-1} (hess: its lower
    triangle, Fortran-ordered, overwritten), by its Cholesky factor (LAPACK dpotrf, dpotri:
    d^3 flops against LU's 2 d^3); NaN where it is not numerically positive definite, as
    ``ChordNewton``'s factor (a non-finite iterate: the stop rule's). The routines work on
    the lower triangle in place, so the strict upper triangle stays zero and the diagonal of
    ``out`` is twice the inverse's (:func:`_halve_diagonals`: exact, (x + x) / 2 = x)."""
    hess.ravel(order="K")[:: hess.shape[0] + 1] += rho  # the diagonal: a view, contiguous
    hess, info = dpotrf(hess, lower=1, clean=0, overwrite_a=1)
    if info == 0:
        hess, info = dpotri(hess, lower=1, overwrite_c=1)
    if info == 0:
        np.add(hess, hess.T, out=out)
    else:
        out[...] = np.nan


def _halve_diagonals(out: np.ndarray, idx: np.ndarray) -> None:
    diag = np.arange(out.shape[1])
    out[idx[:, None], diag, diag] *= 0.5


@dataclass
class StackedPoints:
    """Every machine's :class:`~dpnet.decentralized.steps.DescentPoint`: at theta (J, dim) the
    margins y X~ theta (J, n_max), the loss f_j(theta) (J,) and its gradient
    X~^T (y l'/n) (J, dim). Carried along the Newton steps and from one round to the next,
    as the round loop carries its point: a step costs one product with X~ for the margins and
    one for the gradient at the new point, and the next round starts from that point."""

    theta: np.ndarray
    margin: np.ndarray
    loss: np.ndarray
    loss_grad: np.ndarray

    @classmethod
    def at(cls, data: StackedShards, theta: np.ndarray) -> StackedPoints:
        """The points of ``theta`` (every machine's row)."""
        everyone = np.arange(theta.shape[0])
        margin = data.y * matvecs(data.X, theta)
        loss = data.inv_n * data.margin_loss_sum(slice(None), margin)
        return cls(theta.copy(), margin, loss, data.loss_gradient(everyone, margin))

    def gradient(
        self, idx: np.ndarray, center: np.ndarray, rho: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The theta step's gradient f_j' + rho_j (theta_j - m_j) at the points of the machines
        ``idx`` (center, rho: all machines'), and its norm."""
        rows = machine_rows(idx, self.theta.shape[0])
        grad = self.loss_grad[rows] + rho[rows, None] * (self.theta[rows] - center[rows])
        return grad, np.sqrt(_rowdot(grad, grad))


def theta_update_newton_batched(
    data: StackedShards,
    center: np.ndarray,
    rho: np.ndarray,
    theta_prev: np.ndarray,
    *,
    tol: float | np.ndarray = NEWTON_TOL,
    max_iter: int = NEWTON_MAX_ITER,
    kept: KeptMatrices | None = None,
    relative: float = 0.0,
    points: StackedPoints | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""theta_j = argmin f_j(theta) + (rho_j/2) ||theta - m_j||^2 for every j, by the damped
    Newton method of ``theta_step_newton`` (dense system), each machine masked out of the
    stack as soon as its own iteration stops, so it follows exactly its own sequence; with
    ``kept`` (updated in place), the steps of ``ChordNewton``: a machine forms H_j anew only
    without a kept one, when a step on it shrank its gradient norm by less than
    CHORD_CONTRACTION, or after CHORD_STEPS steps on it in this solve; a kept one of another
    rho_j is its kept data part shifted by the new rho_j and inverted again. ``tol``: one
    gradient tolerance, or one per machine; a machine whose gradient at ``theta_prev``
    times ``relative`` is larger stops there instead. ``points``: the
    :class:`StackedPoints` of ``theta_prev`` (computed if None), updated in place to those
    of the result.
    Returns (theta, each machine's gradient norm at its theta: ``ThetaSolve.gradient_norm``).

    H_j = X~_j^T diag(l''/n) X~_j + rho_j I; Armijo: f(theta - t s) <= f - 1e-4 t g^T s,
    halving t until it holds or t < 1e-10; full step once g^T s <= 1e-12 max(1, |f|).
    """
    X, y, inv_n, loss = data.X, data.y, data.inv_n, data.loss
    n_mach, dim = theta_prev.shape
    diag = np.arange(dim)
    if kept is None:  # plain Newton: a matrix formed in every iteration
        kept = KeptMatrices.none(data)
        kept.chords[:] = False
    shifted = np.flatnonzero(kept.kept & kept.chords & (kept.rho != rho))
    if shifted.size:  # a new rho: the kept data part shifted anew, as ChordNewton does
        _shifted_inverses(kept.hess, shifted, rho[shifted], kept.inverse)
        kept.rho[shifted] = rho[shifted]
    kept.kept &= kept.rho == rho
    if points is None:
        points = StackedPoints.at(data, theta_prev)
    last_norm = np.full(n_mach, np.inf)  # before the last step on a kept matrix
    kept_steps = np.zeros(n_mach, dtype=np.int64)  # steps on the kept matrix in this solve

    def proximal(idx: np.ndarray, t: np.ndarray) -> np.ndarray:
        rows = machine_rows(idx, n_mach)
        diff = t - center[rows]
        return 0.5 * rho[rows] * _rowdot(diff, diff)

    everyone = np.arange(n_mach)
    f = points.loss + proximal(everyone, points.theta)
    active = everyone
    tols = np.broadcast_to(tol, (n_mach,)).copy()  # one per machine
    final_norm = np.zeros(n_mach)  # of the machines that stopped on their tolerance
    measured = np.zeros(n_mach, dtype=bool)
    for iteration in range(max_iter):
        if active.size == 0:
            break
        grad, norm = points.gradient(active, center, rho)
        if iteration == 0:
            tols = np.maximum(tols, relative * norm)
        going = ~(norm <= tols[active])
        final_norm[active[~going]], measured[active[~going]] = norm[~going], True
        active, grad, norm = active[going], grad[going], norm[going]
        if active.size == 0:
            break
        rows = machine_rows(active, n_mach)  # views of the points' arrays while all are active
        th, margin = points.theta[rows], points.margin[rows]
        form = (
            ~kept.chords[active]
            | ~kept.kept[active]
            | (norm > CHORD_CONTRACTION * last_norm[active])
            | (kept_steps[active] >= CHORD_STEPS)
        )
        new = active[form]
        if new.size:  # H = S^T S + rho I, S = D^(1/2) X~ (as ChordNewton forms it)
            sqrt_weights = np.sqrt(inv_n * loss.curvature(margin[form]))
            keeps = kept.chords[new]
            if keeps.any():
                on = new[keeps]
                _newton_inverses(X, on, sqrt_weights[keeps], rho[on], kept.inverse, kept.hess)
            off = new[~keeps]
            if off.size:
                scaled = X[off] * sqrt_weights[~keeps][:, :, None]
                hess = np.matmul(scaled.transpose(0, 2, 1), scaled)
                hess[:, diag, diag] += rho[off, None]
                kept.hess[off] = hess
            kept.rho[new], kept.kept[new] = rho[new], True
        last_norm[new], kept_steps[new] = np.inf, 0
        on_kept = active[~form]
        last_norm[on_kept] = norm[~form]
        kept_steps[on_kept] += 1
        chords = kept.chords[active]
        if chords.all():
            step = stack_matvec(kept.inverse, active, grad)
        else:
            step = np.empty_like(grad)
            on, off = active[chords], active[~chords]
            step[chords] = matvecs(kept.inverse[on], grad[chords])
            step[~chords] = np.linalg.solve(kept.hess[off], grad[~chords, :, None])[:, :, 0]
        slope = _rowdot(grad, step)
        moved = y[rows] * stack_matvec(X, active, step)
        f_act = f[rows]
        flat = slope <= FLAT_SLOPE * _py_max(np.abs(f_act), 1.0)
        # the full step for every machine: kept where the slope is flat or the Armijo test
        # holds, else halved, every machine with its own t
        new_theta, new_margin = th - step, margin - moved
        new_loss, first = data.margin_loss_sum_and_derivative(active, new_margin)
        new_loss *= inv_n
        f_new = new_loss + proximal(active, new_theta)
        t = np.ones(active.size)
        searching = np.flatnonzero(~flat & ~(f_new <= f_act - ARMIJO_FRACTION * slope))
        while searching.size:
            t[searching] *= 0.5
            trial = th[searching] - t[searching, None] * step[searching]
            trial_margin = margin[searching] - t[searching, None] * moved[searching]
            trial_loss, trial_first = data.margin_loss_sum_and_derivative(
                active[searching], trial_margin
            )
            trial_loss *= inv_n
            f_trial = trial_loss + proximal(active[searching], trial)
            ok = (
                f_trial <= f_act[searching] - ARMIJO_FRACTION * t[searching] * slope[searching]
            ) | (t[searching] < SMALLEST_STEP)
            done = searching[ok]
            new_theta[done], new_margin[done] = trial[ok], trial_margin[ok]
            new_loss[done], f_new[done], first[done] = trial_loss[ok], f_trial[ok], trial_first[ok]
            searching = searching[~ok]
        points.theta[rows], points.margin[rows], points.loss[rows] = (
            new_theta,
            new_margin,
            new_loss,
        )
        points.loss_grad[rows] = data.loss_gradient(active, new_margin, first)
        f[rows] = f_new
        active = active[~flat | ~form]  # a full Newton step ends the solve
    rest = np.flatnonzero(~measured)  # a final Newton step, or max_iter: measured now
    if rest.size:
        final_norm[rest] = points.gradient(rest, center, rho)[1]
    return points.theta.copy(), final_norm


def _residuals(
    z: np.ndarray, z_prev: np.ndarray, theta: np.ndarray, c: float, edges: EdgeIndex
) -> tuple[np.ndarray, np.ndarray]:
    """Primal max_{i in Nbar_j} ||Z_j - theta_i|| and dual c sqrt(d_j) ||Z_j - Z_j^prev||."""
    gap = np.sqrt(((z[edges.row] - theta[edges.col]) ** 2).sum(axis=1))
    primal = np.maximum.reduceat(gap, edges.ptr[:-1])
    dual = c * np.sqrt(edges.degree) * np.linalg.norm(z - z_prev, axis=1)
    return primal, dual


def tree_sum(graph: nx.Graph, values: np.ndarray) -> np.ndarray:
    """sum_j values[j] (values: (J, ...)) as :func:`dpnet.decentralized.cv.network_sum` forms
    it on the BFS tree: every node adds its children's subtree sums to its own in increasing
    order, so the total is bitwise the one every machine of the round loop holds."""
    order, parent, _ = bfs_tree(graph)
    subtree = {v: np.asarray(values[v], dtype=float).copy() for v in order}
    children: dict[int, list[int]] = {v: [] for v in order}
    for v in order[1:]:
        children[cast(int, parent[v])].append(v)  # not the root: it has a parent
    for v in reversed(order):
        for child in children[v]:
            subtree[v] += subtree[child]
    return subtree[0]


def bytes_per_round(degree: np.ndarray, dim: int) -> np.ndarray:
    """Bytes machine j sends per round: to each of its neighbours Z (dim floats) and theta with
    the stop statistics (dim + MESSAGE_SIZE floats)."""
    return (degree - 1) * FLOAT_BYTES * (2 * dim + MESSAGE_SIZE)


def run_batched(
    shards: Sequence[LocalData] | StackedShards,
    groups: GroupStructure,
    config: ADMMConfig,
    graph: nx.Graph,
    on_progress: Callable[[ProgressRecord], None] | None = None,
    stop_when: Callable[[ProgressRecord], bool] | None = None,
    *,
    start: WarmStart | None = None,
    edges: EdgeIndex | None = None,
) -> BatchedResult:
    """The ADMM of ``run_machine`` for all machines of ``graph`` at once (module docstring).

    ``shards[j]`` is machine j's data (or all of them stacked once, for many runs on the same
    rows); all share n_total, the loss and the columns. Only the Newton theta step is
    supported. The result equals the round loop's up to rounding: same rounds and stop
    reason, iterates within ~1e-10 (tests/test_batched.py).
    ``stop_when`` (simulation only, e.g. a known optimum reached) sees every record after the
    round loop's own checks and ends the run with stop reason ``"stop_when"`` if it is true.
    ``start``: iterates to begin from (round 0, c from ``config``: the round loop's warm
    start); the result's ``warm_start`` holds those of its last round that did not stop (the
    state the round loop shows ``on_round``), or None if it stopped in its first round.
    ``config.fail_at`` = (j, t) raises in round t as machine j would (fault tests).
    """
    if config.theta_solver != "newton":
        raise ValueError("run_batched supports theta_solver='newton' only")
    n_mach = graph.number_of_nodes()
    data = shards if isinstance(shards, StackedShards) else StackedShards.stack(shards)
    if data.X.shape[0] != n_mach or set(graph.nodes) != set(range(n_mach)):
        raise ValueError(f"need one shard per node 0..{n_mach - 1}, got {data.X.shape[0]}")
    started = time.perf_counter()
    edges = EdgeIndex.from_graph(graph) if edges is None else edges
    lag = tree_plan(graph, 0).lag
    dim = data.X.shape[2]
    if start is None:
        theta, z, V = (
            np.zeros((n_mach, dim)),
            np.zeros((n_mach, dim)),
            np.zeros((len(edges.col), dim)),
        )
    else:
        theta, z, V = start.theta, start.z, start.V
    warm: WarmStart | None = None
    pending: dict[int, np.ndarray] = {}
    history: list[ProgressRecord] = []
    stop_reason = "max_rounds"
    rounds = 0
    c = c_start = initial_penalty(config, graph)
    changes = NO_CHANGES
    kept = KeptMatrices.none(data)  # the round loop's ChordNewton anchors, all machines
    points = None if config.record is not None else StackedPoints.at(data, theta)
    theta_tol: np.ndarray | None = None  # per machine, as the round loop's (None: round 1)

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for t in range(1, config.max_rounds + 1):
            rounds = t
            if config.fail_at is not None and config.fail_at[1] == t:
                rank = config.fail_at[0]
                fault = RuntimeError(f"injected fault on machine {rank} in round {t}")
                raise MachineFailure(rank, fault)
            z_prev = z
            z = z_update_batched(theta, V, z_prev, c, groups, edges, config.alpha_z)
            rho = c * edges.degree
            a = config.relaxation
            z_edge = z[edges.row]  # Z_j on edge (j, i); over-relaxed as in admm.relaxed
            if a != 1.0:
                z_edge = a * z_edge + (1.0 - a) * theta[edges.col]
            center = edges.row_sum(z_edge[edges.rev] + V[edges.rev] / c) / edges.degree[:, None]
            theta_error: np.ndarray | float = 0.0  # the fixed-work private step reports none
            if config.record is not None:
                theta = private_thetas(config.record, data, center, rho, t, np.arange(n_mach))
            else:
                assert points is not None  # made for the non-private step
                solve_to = (
                    {"relative": config.theta_rtol} if theta_tol is None else {"tol": theta_tol}
                )
                theta, theta_error = theta_update_newton_batched(
                    data, center, rho, theta, kept=kept, points=points, **solve_to
                )
            V = V + c * (z_edge - theta[edges.col])  # a new array: ``warm`` keeps the last

            primal, dual = _residuals(z, z_prev, theta, c, edges)
            theta_tol = np.asarray(theta_tolerance(config.theta_rtol, c, primal, dual))
            norm = np.linalg.norm(theta, axis=1)
            objective = groups.penalty(theta[:, :-1])
            if points is not None:  # the loss reads the rows: withheld (admm.released_loss)
                objective = points.loss + objective
            pending[t] = np.array(
                [
                    objective.sum(),
                    cast(np.ndarray, scaled_residual(primal, dual, c, norm, theta_error)).max(),
                    primal.max(),
                    dual.max(),
                    norm.max(),
                ]
            )

            complete = pending.pop(t - lag, None)
            if complete is not None:
                record = record_progress(complete, t - lag, config, history, on_progress)
                also_stop = None if stop_when is None else partial(stop_when, record)
                reason, c, changes = take_decision(
                    complete, record.round, t, config, c, changes, history, also_stop
                )
                if reason is not None:
                    stop_reason = reason
                    break
            warm = WarmStart(theta, z, V)

    return BatchedResult(
        theta=theta,
        z=z,
        rounds=rounds,
        stop_reason=stop_reason,
        penalty=PenaltyPath(c_start, c, changes),
        bytes_per_round=bytes_per_round(edges.degree, dim),
        seconds=time.perf_counter() - started,
        started_at=started,
        history=history,
        warm_start=warm,
    )
