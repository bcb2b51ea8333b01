"""The compiled edge arithmetic of a round (dpnet.decentralized._edges) against numpy
statements of its formulas, and the same floats for a machine whatever block it is in."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from dpnet.decentralized import GroupStructure, _edges
from dpnet.decentralized.block import BlockEdges

GRAPHS = {
    "regular": nx.random_regular_graph(3, 40, seed=1),
    "star-13": nx.star_graph(12),  # a row of 13 edges beside rows of 2
    "no-edges": nx.empty_graph(3),  # rows of one edge: the machine itself
}
DIM = 5
LABELS = np.array([0, 2, 0, 1])  # the penalised columns' groups (not in order); the last: b
GROUPS = GroupStructure(
    np.array([0, 2, 3, 4]), np.argsort(LABELS, kind="stable"), np.array([0.3, 0.0, 0.5])
)  # group 1 unpenalised (t = 0)


def _z_step(theta_nbhd: np.ndarray, v_out: np.ndarray, edges: BlockEdges, c: float) -> np.ndarray:
    return _edges.z_step(theta_nbhd, v_out, edges.ptr, c, GROUPS.theta_group, GROUPS.thresholds)


def _soft_threshold(u: np.ndarray) -> np.ndarray:
    """The prox of sum_g t_g ||u_g|| written group by group, the intercept kept."""
    out = u.copy()
    for row in out:
        for g, t in enumerate(GROUPS.thresholds):
            block = row[:-1][LABELS == g]
            norm = np.linalg.norm(block)
            row[:-1][LABELS == g] = block * (1.0 if t == 0 else max(0.0, 1.0 - t / norm))
    return out


def _round(graph: nx.Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """A whole network's round state: iterates per machine, exchanged rows and duals per edge."""
    rng = np.random.default_rng(seed)
    edges = BlockEdges.of(graph)
    k, n_edges = graph.number_of_nodes(), len(edges.col)
    z, z_prev, theta, new = (rng.standard_normal((k, DIM)) for _ in range(4))
    return {
        "z": z,
        "z_prev": z_prev,
        "theta": theta,
        "new": new,
        "v_in": rng.standard_normal((n_edges, DIM)),
        "v_out": rng.standard_normal((n_edges, DIM)),
        "edges": edges,  # type: ignore[dict-item]
    }


def _sums(values: np.ndarray, edges: BlockEdges) -> np.ndarray:
    return np.add.reduceat(values, edges.ptr[:-1], axis=0)


@pytest.mark.parametrize("name", list(GRAPHS))
@pytest.mark.parametrize("alpha", [1.0, 1.7])
def test_each_step_is_its_formula(name: str, alpha: float) -> None:
    s = _round(GRAPHS[name])
    edges: BlockEdges = s["edges"]  # type: ignore[assignment]
    row, col, c = edges.row, edges.col, 0.37
    degree = edges.degree[:, None]
    z, theta = s["z"], s["theta"]
    z_nbhd, theta_nbhd = z[col], theta[col]

    z_new = _z_step(theta_nbhd, s["v_out"], edges, c)
    u = _sums(c * theta_nbhd - s["v_out"], edges)
    want = _soft_threshold(u) / (c * degree)
    assert np.allclose(z_new, want, rtol=1e-13, atol=1e-13)
    assert (z_new[:, :-1] == 0).any() and (z_new[:, :-1] != 0).any()  # shrunk to 0, and not

    z_in, z_out = np.empty_like(s["v_in"]), np.empty_like(s["v_in"])
    center = _edges.relaxed_centers(
        z, z_nbhd, theta, theta_nbhd, s["v_in"], edges.ptr, alpha, c, z_in, z_out
    )
    want_in = alpha * z[col] + (1 - alpha) * theta[row]
    want_out = (1 - alpha) * theta[col] + alpha * z[row]
    assert np.allclose(z_in, want_in, rtol=1e-14, atol=1e-14)
    assert np.allclose(z_out, want_out, rtol=1e-14, atol=1e-14)
    if alpha == 1.0:  # the plain ADMM: the Z's themselves
        assert np.array_equal(z_in, z[col]) and np.array_equal(z_out, z[row])
    want_center = _sums(want_in + s["v_in"] / c, edges) / degree
    assert np.allclose(center, want_center, rtol=1e-13, atol=1e-13)

    v_out, v_in = s["v_out"].copy(), s["v_in"].copy()
    new = s["new"]
    _edges.dual_step(v_out, v_in, z_out, z_in, new, new[col], edges.ptr, c)
    assert np.allclose(v_out, s["v_out"] + c * (want_out - new[col]), rtol=1e-13, atol=1e-13)
    assert np.allclose(v_in, s["v_in"] + c * (want_in - new[row]), rtol=1e-13, atol=1e-13)

    primal, dual = _edges.residuals(z, s["z_prev"], new[col], edges.ptr, c)
    apart = np.linalg.norm(z[row] - new[col], axis=1)
    assert np.allclose(primal, np.maximum.reduceat(apart, edges.ptr[:-1]), rtol=1e-14)
    moved = np.linalg.norm(z - s["z_prev"], axis=1)
    assert np.allclose(dual, c * np.sqrt(edges.degree) * moved, rtol=1e-14)


def test_a_machine_gets_the_same_floats_in_any_block() -> None:
    """Each machine as a block of one (an MPI rank), fed its rows of the whole network's
    arrays: bitwise what the whole network's block (the simulator) gives it."""
    graph = GRAPHS["star-13"]
    s = _round(graph, seed=3)
    edges: BlockEdges = s["edges"]  # type: ignore[assignment]
    col, c, alpha = edges.col, 0.21, 1.7
    z, theta, new = s["z"], s["theta"], s["new"]
    z_in, z_out = np.empty_like(s["v_in"]), np.empty_like(s["v_in"])
    whole = {
        "z": _z_step(theta[col], s["v_out"], edges, c),
        "center": _edges.relaxed_centers(
            z, z[col], theta, theta[col], s["v_in"], edges.ptr, alpha, c, z_in, z_out
        ),
    }
    v_out, v_in = s["v_out"].copy(), s["v_in"].copy()
    _edges.dual_step(v_out, v_in, z_out, z_in, new, new[col], edges.ptr, c)
    primal, dual = _edges.residuals(z, s["z_prev"], new[col], edges.ptr, c)
    for j in graph.nodes:
        one = BlockEdges.of(graph, [j])
        span = slice(edges.ptr[j], edges.ptr[j + 1])
        own = slice(j, j + 1)
        assert np.array_equal(one.col, col[span])
        assert np.array_equal(_z_step(theta[one.col], s["v_out"][span], one, c), whole["z"][own])
        j_in, j_out = np.empty((len(one.col), DIM)), np.empty((len(one.col), DIM))
        center = _edges.relaxed_centers(
            z[own], z[one.col], theta[own], theta[one.col], s["v_in"][span], one.ptr, alpha, c,
            j_in, j_out,
        )  # fmt: skip
        assert np.array_equal(center, whole["center"][own])
        j_vout, j_vin = s["v_out"][span].copy(), s["v_in"][span].copy()
        _edges.dual_step(j_vout, j_vin, j_out, j_in, new[own], new[one.col], one.ptr, c)
        assert np.array_equal(j_vout, v_out[span]) and np.array_equal(j_vin, v_in[span])
        p, d = _edges.residuals(z[own], s["z_prev"][own], new[one.col], one.ptr, c)
        assert p[0] == primal[j] and d[0] == dual[j]


def test_a_non_finite_iterate_makes_its_rows_residual_nan() -> None:
    """NaN wins the primal residual's max wherever it sits in the row (the stop rule then ends
    the run as non-finite); the other rows are untouched."""
    s = _round(GRAPHS["regular"])
    edges: BlockEdges = s["edges"]  # type: ignore[assignment]
    theta_nbhd = s["new"][edges.col]
    clean, _ = _edges.residuals(s["z"], s["z_prev"], theta_nbhd, edges.ptr, 1.0)
    for position in range(edges.degree[0]):
        bad = theta_nbhd.copy()
        bad[edges.ptr[0] + position, 2] = np.nan
        primal, _ = _edges.residuals(s["z"], s["z_prev"], bad, edges.ptr, 1.0)
        assert np.isnan(primal[0])
        assert np.array_equal(primal[1:], clean[1:])
