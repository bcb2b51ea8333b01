r"""The steps of the decentralized group-lasso logistic ADMM (paper 3, Algorithm 1).

Machine j holds theta_j = (beta_j, b_j) in R^{p+1} (intercept last), an auxiliary Z_j and, for
every i in its closed neighbourhood Nbar_j = N_j + {j} (d_j = |Nbar_j|), two dual copies:

- ``v_out[i]`` = V_{ji}, the multiplier of Z_j = theta_i  (used in j's Z step),
- ``v_in[i]``  = V_{ij}, the multiplier of Z_i = theta_j  (used in j's theta step).

With f_j(theta) = (1/n) sum_{local} l(y x~^T theta), l the logistic loss log(1 + e^{-m}) or its
flip-corrected version (:mod:`dpnet.losses.margin`), and h(Z) = (lam/(2J)) sum_g w_g ||Z_g|| (the
intercept coordinate unpenalised), one round is

    Z_j     <- argmin h(Z) + (c/2) sum_{i in Nbar_j} ||Z - theta_i + V_ji/c||^2
             = S(u_j; lam w/(2J)) / (c d_j),  u_j = sum_i (c theta_i - V_ji)  (block soft-threshold)
    theta_j <- argmin f_j(theta) + (c d_j/2) ||theta - m_j||^2,  m_j = mean_i (Z_i + V_ij/c)
    V_ji    += c (Z_j - theta_i),   V_ij += c (Z_i - theta_j)

Both copies of every multiplier are updated from the same two numbers on the two machines that
hold them, so they stay bitwise equal without a third exchange. See docs/algorithms.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from dpnet.decentralized import _edges
from dpnet.decentralized.block import BlockEdges
from dpnet.losses.margin import Logistic, MarginLoss
from dpnet.penalties.group import group_norms

NEWTON_TOL = 1e-12
"""The theta step's gradient-norm floor: a solve to rounding (every machine's, the simulator's)."""
THETA_RTOL = 0.1
"""The default of :attr:`~dpnet.decentralized.admm.ADMMConfig.theta_rtol`, measured in
docs/algorithms.md ("How exactly the theta step is solved")."""


def theta_tolerance(rtol: float, c: float, primal: float, dual: float) -> float:
    r"""The gradient norm at which the next round's theta step stops:
    max(NEWTON_TOL, rtol max(c r_j, s_j)), with r_j, s_j this round's primal and dual
    residuals of the machine (:func:`~dpnet.decentralized._edges.residuals`); compiled in
    :func:`~dpnet.decentralized._edges.theta_tolerance`, which the round's end
    (:func:`~dpnet.decentralized._edges.close_round`) applies to every machine.

    c r_j and s_j are in gradient units (the dual variables' and the Z's motion in one
    round), so the subproblem is solved a factor rtol below the error the round itself still
    makes: an inexact ADMM whose errors shrink with the residuals (Eckstein & Bertsekas 1992
    need them summable, which the residuals' linear decrease gives), and at the stop rule's
    tolerance the solve is exact to rtol times it (docs/algorithms.md). rtol = 0: every
    solve to NEWTON_TOL. NaN residuals give a NaN tolerance: the solve runs NEWTON_MAX_ITER
    iterations, as it did on a non-finite iterate, and the stop rule ends the run.
    """
    return _edges.theta_tolerance(NEWTON_TOL, rtol, c, primal, dual)


@dataclass(frozen=True)
class GroupStructure:
    """Groups of the p penalised columns (CSR: ``grp_indices`` a permutation of 0..p-1) and
    their thresholds t_g = lam * w_g / (2J). The Z step's group soft-threshold, the prox of
    sum_g t_g ||.||, is compiled with the edge arithmetic (:func:`dpnet.decentralized.
    _edges.z_step`)."""

    grp_ptr: np.ndarray
    grp_indices: np.ndarray
    thresholds: np.ndarray
    theta_group: np.ndarray = field(init=False, repr=False, compare=False)
    """The group of each of a theta's p + 1 coordinates; the intercept (last) is in a group
    of its own, index G = len(thresholds), never shrunk."""
    _in_order: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n_cols = len(self.grp_indices)
        if not np.array_equal(np.sort(self.grp_indices), np.arange(n_cols)):
            raise ValueError("grp_indices must be a permutation of the penalised columns")
        n_groups = len(self.grp_ptr) - 1
        theta_group = np.full(n_cols + 1, n_groups, dtype=np.int64)
        theta_group[self.grp_indices] = np.repeat(np.arange(n_groups), np.diff(self.grp_ptr))
        object.__setattr__(self, "theta_group", theta_group)
        object.__setattr__(
            self, "_in_order", bool(np.array_equal(self.grp_indices, np.arange(n_cols)))
        )

    def norms(self, beta: np.ndarray) -> np.ndarray:
        """||beta_g|| of every group, along the last axis (a machine's beta, or one per row)."""
        return group_norms(beta, self.grp_ptr, None if self._in_order else self.grp_indices)

    def penalty(self, beta: np.ndarray) -> np.ndarray:
        """sum_g t_g ||beta_g|| (of each row; 0-d for one beta), bitwise the round's
        (:func:`~dpnet.decentralized._edges.penalties`)."""
        rows = np.ascontiguousarray(np.atleast_2d(beta), dtype=float)
        return _edges.penalties(rows, self.theta_group, self.thresholds).reshape(beta.shape[:-1])


@dataclass(frozen=True)
class LocalData:
    """One machine's shard: design with a ones column appended, labels in {-1, +1}, and the
    margin loss (:class:`~dpnet.losses.margin.UnbiasedLogistic` for randomized labels)."""

    X_aug: np.ndarray
    y: np.ndarray
    n_total: int
    loss: MarginLoss = Logistic()

    @property
    def n_features(self) -> int:
        return self.X_aug.shape[1] - 1

    @cached_property
    def y_over_n(self) -> np.ndarray:
        """(1/n) y, the loss gradient's weights of l'(margin): X~^T ((1/n) y l'), formed once."""
        return (1.0 / self.n_total) * self.y


def z_update(
    theta_nbhd: np.ndarray,
    v_out: np.ndarray,
    z_prev: np.ndarray,
    c: float,
    groups: GroupStructure,
    edges: BlockEdges,
    alpha_z: float = 1.0,
) -> np.ndarray:
    """Z step of a block: Z_j = S(u_j; t) / (c d_j), u_j = sum_{i in Nbar_j} (c theta_i -
    V_ji) over the edges of row j (``theta_nbhd``, ``v_out``: one row per edge), the exact
    group soft-threshold target, approached with step ``alpha_z`` (1 = exact)."""
    target = _edges.z_step(theta_nbhd, v_out, edges.ptr, c, groups.theta_group, groups.thresholds)
    if alpha_z == 1.0:
        return target
    return z_prev + alpha_z * (target - z_prev)


def local_objective(data: LocalData, theta: np.ndarray) -> float:
    """f_j(theta) = (1/n) sum over the shard of l(y x~^T theta)."""
    return float(data.loss.value(data.y * (data.X_aug @ theta)).sum() / data.n_total)


def scaled_residual(
    primal: float, dual: float, c: float, norm: float, theta_error: float = 0.0
) -> float:
    """The stop rule's rho_j = max(r_j max(1, c), s_j, g_j) / max(1, ||theta_j||) (Python's
    max semantics, NaN included), compiled in
    :func:`~dpnet.decentralized._edges.scaled_residual`, which the round's end applies to
    every machine.

    r_j is the primal iterates' disagreement, s_j the dual residual (the primal iterates'
    motion in gradient units), and c r_j is the dual variables' motion in one round
    (V += c (Z - theta)): the global KKT residual is at most a graph constant times
    max_j max(c r_j, s_j) plus L r_j. A penalty so large that nothing moves (c = 1e10: r_j
    ~ 1e-11, s_j = 0 in the group threshold's dead zone) has small r_j and s_j but not c r_j,
    so it is not mistaken for convergence; for c <= 1 the rule is max(r_j, s_j) as before.
    g_j (``theta_error``) is the gradient norm of the round's theta subproblem at theta_j
    (:attr:`~dpnet.decentralized.theta.ThetaResult.error`): the bound above assumes each
    theta step solved, and a step solved only to a fraction of the residuals
    (:func:`theta_tolerance`) adds g_j to it. Without it a first step solved to no better
    than its start (``--theta-rtol 1``) left every residual 0 and stopped "converged" at
    theta = 0. 0 for the steps that report none (fixed numbers of majorized or gradient
    iterations; the fixed-work private step).
    """
    return _edges.scaled_residual(primal, dual, c, norm, theta_error)
