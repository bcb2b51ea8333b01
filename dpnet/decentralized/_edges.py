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
  ||Z_j - Z_j^prev||.

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


@entry
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


@entry
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


def warm_up() -> None:
    """Compile every function above (or load it from the cache) with the argument types of a
    run, on a path of two machines."""
    ptr = np.array([0, 2, 4])
    rows, edge = np.zeros((2, 3)), np.zeros((4, 3))
    z_step(edge, edge, ptr, 1.0, np.array([0, 0, 1]), np.array([0.5]))
    relaxed_centers(rows, edge, rows, edge, edge, ptr, 1.7, 1.0, edge.copy(), edge.copy())
    dual_step(edge.copy(), edge.copy(), edge, edge, rows, edge, ptr, 1.0)
    residuals(rows, rows, edge, ptr, 1.0)
