r"""The edge arithmetic of a round, compiled: the one implementation of every block.

A block (:mod:`dpnet.decentralized.block`) holds, for each of its machines j and every i in
Nbar_j, one directed edge e = (j, i), in CSR rows (``ptr``). Per edge the round reads the
exchanged rows Z_i and theta_i and the dual copies V_ji (``v_out``) and V_ij (``v_in``). Each
function below makes one pass over the edges, machine by machine, writing into buffers the
caller keeps, and sums a row's edges left to right in edge order: the same floats for a
machine whatever block it is in (an MPI rank's block of one, or the simulator's J), because
the same code does the same operations on the same operands.

- :func:`z_step`: Z_j = S(u_j) / (c d_j), u_j = sum_i (c theta_i - V_ji), S the group
  soft-threshold (``steps.z_update``);
- :func:`relaxed_centers`: the over-relaxed copies (Boyd et al. 2011, section 3.4.3)
  Z^_ij = alpha Z_i + (1 - alpha) theta_j (into j's theta step) and
  Z^_ji = (1 - alpha) theta_i + alpha Z_j (towards i's), theta the iterates before this
  round's theta step, and the centres m_j = (sum_i (Z^_ij + V_ij / c)) / d_j of j's theta
  step. Both ends of an edge form Z^ from the same two numbers in the same order, so the two
  copies of a multiplier stay bitwise equal with no third exchange; alpha = 1 is the plain
  ADMM (Z^_ij = Z_i, Z^_ji = Z_j);
- :func:`dual_step`: V_ji += c (Z^_ji - theta_i), V_ij += c (Z^_ij - theta_j), in place,
  theta the new iterates;
- :func:`residuals`: r_j = max_i ||Z_j - theta_i|| (NaN wins) and s_j = c sqrt(d_j)
  ||Z_j - Z_j^prev||;
- :func:`close_round`: the round's end in one call: the dual step, the residuals, and each
  machine's stop statistics and next theta tolerance, by the rules
  :func:`scaled_residual`, :func:`theta_tolerance` and :func:`penalties` (the one
  implementation of each: ``steps`` and the audits call them).

Compiled by numba on first use and cached on disk (:mod:`dpnet.decentralized._compiled`);
tests/test_edges.py holds each equal to a numpy statement of its formula.
"""

from __future__ import annotations

import numpy as np

from dpnet.decentralized._compiled import compiled, entry


@entry
@compiled
def z_step(
    theta_nbhd: np.ndarray,
    v_out: np.ndarray,
    ptr: np.ndarray,
    c: float,
    theta_group: np.ndarray,
    thresholds: np.ndarray,
) -> np.ndarray:
    """Z (k, dim): Z_j = S(u_j) / (c d_j), u_j = sum over row j's edges of (c theta_e -
    V_out_e), d_j its edge count, S the group soft-threshold of the coordinates: a coordinate
    a of group g = ``theta_group[a]`` scaled by 1 - t_g / max(||u_g||, t_g) (0 at or below
    the threshold), t_g = ``thresholds[g]``; a coordinate of group G = len(thresholds) (the
    intercept) is not shrunk. A threshold of 0 gives the factor 1 (no 0 / 0 on a zero
    block: the divisor is at least the smallest positive float)."""
    k, dim = len(ptr) - 1, theta_nbhd.shape[1]
    n_groups = len(thresholds)
    tiny = np.finfo(np.float64).tiny
    z = np.empty((k, dim))
    squares = np.empty(n_groups + 1)
    for j in range(k):
        first, last = ptr[j], ptr[j + 1]
        squares[:] = 0.0
        for a in range(dim):
            total = c * theta_nbhd[first, a] - v_out[first, a]
            for e in range(first + 1, last):
                total += c * theta_nbhd[e, a] - v_out[e, a]
            z[j, a] = total
            squares[theta_group[a]] += total * total
        for g in range(n_groups):  # squares[g] becomes group g's factor
            t = thresholds[g]
            floor = t if t > tiny else tiny
            norm = np.sqrt(squares[g])
            squares[g] = 1.0 - t / (floor if norm < floor else norm)  # NaN stays NaN
        squares[n_groups] = 1.0
        scale = c * (last - first)
        for a in range(dim):
            z[j, a] = z[j, a] * squares[theta_group[a]] / scale
    return z


@entry
@compiled
def relaxed_centers(
    z: np.ndarray,
    z_nbhd: np.ndarray,
    theta: np.ndarray,
    theta_nbhd: np.ndarray,
    v_in: np.ndarray,
    ptr: np.ndarray,
    alpha: float,
    c: float,
    z_in: np.ndarray,
    z_out: np.ndarray,
) -> np.ndarray:
    """The centres m (k, dim); Z^_ij into ``z_in`` and Z^_ji into ``z_out`` (E, dim)."""
    k, dim = len(ptr) - 1, z.shape[1]
    beta = 1.0 - alpha
    plain = alpha == 1.0
    center = np.empty((k, dim))
    for j in range(k):
        first, last = ptr[j], ptr[j + 1]
        for e in range(first, last):
            for a in range(dim):
                if plain:
                    z_in[e, a] = z_nbhd[e, a]
                    z_out[e, a] = z[j, a]
                else:
                    z_in[e, a] = alpha * z_nbhd[e, a] + beta * theta[j, a]
                    z_out[e, a] = beta * theta_nbhd[e, a] + alpha * z[j, a]
        degree = float(last - first)
        for a in range(dim):
            total = z_in[first, a] + v_in[first, a] / c
            for e in range(first + 1, last):
                total += z_in[e, a] + v_in[e, a] / c
            center[j, a] = total / degree
    return center


@compiled
def dual_step(
    v_out: np.ndarray,
    v_in: np.ndarray,
    z_out: np.ndarray,
    z_in: np.ndarray,
    theta: np.ndarray,
    theta_nbhd: np.ndarray,
    ptr: np.ndarray,
    c: float,
) -> None:
    """V_out_e += c (Z^_ji - theta_i), V_in_e += c (Z^_ij - theta_j), in place."""
    dim = v_out.shape[1]
    for j in range(len(ptr) - 1):
        for e in range(ptr[j], ptr[j + 1]):
            for a in range(dim):
                v_out[e, a] += (z_out[e, a] - theta_nbhd[e, a]) * c
                v_in[e, a] += (z_in[e, a] - theta[j, a]) * c


@compiled
def residuals(
    z: np.ndarray, z_prev: np.ndarray, theta_nbhd: np.ndarray, ptr: np.ndarray, c: float
) -> tuple[np.ndarray, np.ndarray]:
    """(primal, dual) (k,): r_j = max_e ||Z_j - theta_e|| over row j (NaN wins),
    s_j = c sqrt(d_j) ||Z_j - Z_j^prev||."""
    k, dim = len(ptr) - 1, z.shape[1]
    primal, dual = np.empty(k), np.empty(k)
    for j in range(k):
        first, last = ptr[j], ptr[j + 1]
        worst = 0.0
        for e in range(first, last):
            total = 0.0
            for a in range(dim):
                apart = z[j, a] - theta_nbhd[e, a]
                total += apart * apart
            if not total <= worst and worst == worst:  # larger, or NaN (which then stays)
                worst = total
        primal[j] = np.sqrt(worst)
        total = 0.0
        for a in range(dim):
            moved = z[j, a] - z_prev[j, a]
            total += moved * moved
        dual[j] = c * np.sqrt(float(last - first)) * np.sqrt(total)
    return primal, dual


@compiled
def scaled_residual(primal: float, dual: float, c: float, norm: float, theta_error: float) -> float:
    """The stop rule's rho_j = max(r_j max(1, c), s_j, g_j) / max(1, ||theta_j||), NaN
    compared as Python's max does (``steps.scaled_residual`` states the rule)."""
    scaled = primal * max(1.0, c)
    worst = dual if dual > scaled else scaled
    worst = theta_error if theta_error > worst else worst
    return worst / (norm if norm > 1.0 else 1.0)  # a NaN norm divides by 1


@compiled
def _nan_max(a: float, b: float) -> float:
    """max(a, b) as np.maximum: NaN if either is."""
    if a != a or b != b:
        return a + b
    return a if a > b else b


@compiled
def theta_tolerance(floor: float, rtol: float, c: float, primal: float, dual: float) -> float:
    """max(floor, rtol max(c r_j, s_j)), NaN propagated (``steps.theta_tolerance`` states
    the rule)."""
    return _nan_max(floor, rtol * _nan_max(c * primal, dual))


@compiled
def _penalty(
    row: np.ndarray, theta_group: np.ndarray, thresholds: np.ndarray, squares: np.ndarray
) -> float:
    """sum_g t_g ||row_g|| over ``row``'s penalised coordinates (its first
    len(theta_group) - 1; a theta's intercept after them is left out): the squares summed in
    coordinate order, then the groups' terms in group order. ``squares`` (G,): scratch."""
    n_groups = len(thresholds)
    squares[:] = 0.0
    for a in range(len(theta_group) - 1):
        squares[theta_group[a]] += row[a] * row[a]
    total = 0.0
    for g in range(n_groups):
        total += thresholds[g] * np.sqrt(squares[g])
    return total


@entry
@compiled
def penalties(beta: np.ndarray, theta_group: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """sum_g t_g ||beta_g|| of every row of ``beta`` (k, p) (``GroupStructure.penalty``)."""
    out = np.empty(beta.shape[0])
    squares = np.empty(len(thresholds))
    for j in range(beta.shape[0]):
        out[j] = _penalty(beta[j], theta_group, thresholds, squares)
    return out


@entry
@compiled
def close_round(
    v_out: np.ndarray,
    v_in: np.ndarray,
    z_out: np.ndarray,
    z_in: np.ndarray,
    theta: np.ndarray,
    theta_nbhd: np.ndarray,
    z: np.ndarray,
    z_prev: np.ndarray,
    ptr: np.ndarray,
    c: float,
    theta_group: np.ndarray,
    thresholds: np.ndarray,
    loss: np.ndarray,
    theta_error: np.ndarray,
    floor: float,
    rtol: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The round's end: :func:`dual_step` in place, then (own, tol): each machine's stop
    statistics (k, 5) in ``termination.STAT_NAMES`` order, penalty + ``loss`` (0 where the
    loss is withheld), :func:`scaled_residual` with ``theta_error``, r_j, s_j (:func:`
    residuals`) and ||theta_j||, and its next theta step's :func:`theta_tolerance`."""
    dual_step(v_out, v_in, z_out, z_in, theta, theta_nbhd, ptr, c)
    primal, dual = residuals(z, z_prev, theta_nbhd, ptr, c)
    k, dim = theta.shape
    own, tol = np.empty((k, 5)), np.empty(k)
    squares = np.empty(len(thresholds))
    for j in range(k):
        total = 0.0
        for a in range(dim):
            total += theta[j, a] * theta[j, a]
        norm = np.sqrt(total)
        own[j, 0] = _penalty(theta[j], theta_group, thresholds, squares) + loss[j]
        own[j, 1] = scaled_residual(primal[j], dual[j], c, norm, theta_error[j])
        own[j, 2], own[j, 3], own[j, 4] = primal[j], dual[j], norm
        tol[j] = theta_tolerance(floor, rtol, c, primal[j], dual[j])
    return own, tol


def warm_up() -> None:
    """Compile every function above (or load it from the cache) with the argument types of a
    run, on a path of two machines."""
    ptr = np.array([0, 2, 4])
    rows, edge = np.zeros((2, 3)), np.zeros((4, 3))
    z_step(edge, edge, ptr, 1.0, np.array([0, 0, 1]), np.array([0.5]))
    relaxed_centers(rows, edge, rows, edge, edge, ptr, 1.7, 1.0, edge.copy(), edge.copy())
    residuals(rows, rows, edge, ptr, 1.0)
    groups, thresholds = np.array([0, 0, 1]), np.array([0.5])
    penalties(rows[:, :-1], groups, thresholds)
    scaled_residual(1.0, 1.0, 1.0, 1.0, 0.0)
    theta_tolerance(1e-12, 0.1, 1.0, 1.0, 1.0)
    v = edge.copy()
    close_round(v, v.copy(), edge, edge, rows, edge, rows, rows, ptr, 1.0, groups, thresholds,
                np.zeros(2), np.zeros(2), 1e-12, 0.1)  # fmt: skip
