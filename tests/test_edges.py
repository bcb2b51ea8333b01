"""The compiled edge arithmetic of a round (dpnet.decentralized._edges) against numpy
statements of its formulas, and the same floats for a machine whatever block it is in."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from dpnet.decentralized import GroupStructure, _edges
from dpnet.decentralized.block import BlockEdges
from dpnet.decentralized.steps import scaled_residual

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


def _close_round(s: dict[str, np.ndarray], edges: BlockEdges, c: float, own: slice | None = None):
    """close_round on rows ``own`` of the round ``s`` (all: None), after relaxed_centers."""
    rows = slice(None) if own is None else own
    one = edges if own is None else BlockEdges.of(GRAPHS["star-13"], [own.start])
    span = slice(None) if own is None else slice(edges.ptr[own.start], edges.ptr[own.stop])
    z, theta, new = s["z"][rows], s["theta"][rows], s["new"]
    z_in, z_out = np.empty((len(one.col), DIM)), np.empty((len(one.col), DIM))
    _edges.relaxed_centers(
        z, s["z"][one.col], theta, s["theta"][one.col], s["v_in"][span], one.ptr, 1.7, c,
        z_in, z_out,
    )  # fmt: skip
    v_out, v_in = s["v_out"][span].copy(), s["v_in"][span].copy()
    machines = len(s["z"])
    loss, error = np.linspace(0.1, 0.2, machines)[rows], np.linspace(0.0, 3.0, machines)[rows]
    stats, tol = _edges.close_round(
        v_out, v_in, z_out, z_in, new[rows], new[one.col], z, s["z_prev"][rows], one.ptr, c,
        GROUPS.theta_group, GROUPS.thresholds, loss, error, 1e-12, 0.1,
    )  # fmt: skip
    return stats, tol, v_out, v_in, z_out, z_in, loss, error


@pytest.mark.parametrize("name", list(GRAPHS))
def test_the_rounds_end_is_its_formulas(name: str) -> None:
    """close_round: the dual step, then each machine's statistics (penalty + loss, the scaled
    residual, r, s, ||theta||) and next tolerance, against numpy statements of the rules."""
    s = _round(GRAPHS[name], seed=5)
    edges: BlockEdges = s["edges"]  # type: ignore[assignment]
    c, new = 2.5, s["new"]
    stats, tol, v_out, v_in, z_out, z_in, loss, error = _close_round(s, edges, c)
    want_out, want_in = s["v_out"].copy(), s["v_in"].copy()
    _edges.dual_step(want_out, want_in, z_out, z_in, new, new[edges.col], edges.ptr, c)
    assert np.array_equal(v_out, want_out) and np.array_equal(v_in, want_in)
    primal, dual = _edges.residuals(s["z"], s["z_prev"], new[edges.col], edges.ptr, c)
    norm = np.linalg.norm(new, axis=1)
    penalty = [
        sum(t * np.linalg.norm(row[:-1][LABELS == g]) for g, t in enumerate(GROUPS.thresholds))
        for row in new
    ]
    np.testing.assert_allclose(stats[:, 0], np.add(penalty, loss), rtol=1e-14)
    worst = np.maximum(np.maximum(primal * max(1.0, c), dual), error)
    np.testing.assert_allclose(stats[:, 1], worst / np.fmax(norm, 1.0), rtol=1e-14)
    assert np.array_equal(stats[:, 2], primal) and np.array_equal(stats[:, 3], dual)
    np.testing.assert_allclose(stats[:, 4], norm, rtol=1e-14)
    np.testing.assert_allclose(tol, np.maximum(1e-12, 0.1 * np.maximum(c * primal, dual)))
    assert np.array_equal(stats[:, 0], GROUPS.penalty(new[:, :-1]) + loss)  # the same code
    rules = zip(primal, dual, stats[:, 4], error, strict=True)
    assert np.array_equal(stats[:, 1], [scaled_residual(r, s, c, n, g) for r, s, n, g in rules])


def test_the_rounds_end_gives_a_machine_the_same_floats_in_any_block() -> None:
    s = _round(GRAPHS["star-13"], seed=6)
    edges: BlockEdges = s["edges"]  # type: ignore[assignment]
    whole, tol = _close_round(s, edges, 0.4)[:2]
    for j in range(len(edges.ptr) - 1):
        alone, alone_tol = _close_round(s, edges, 0.4, slice(j, j + 1))[:2]
        assert np.array_equal(alone[0], whole[j]) and alone_tol[0] == tol[j]


def test_the_rounds_end_carries_nan() -> None:
    """A NaN iterate makes its machine's statistics and tolerance NaN (the stop rule ends the
    run as non-finite, the Newton step runs its cap), the others untouched."""
    s = _round(GRAPHS["regular"], seed=7)
    edges: BlockEdges = s["edges"]  # type: ignore[assignment]
    clean, clean_tol = _close_round(s, edges, 1.0)[:2]
    s["z"][0, 1] = np.nan
    stats, tol = _close_round(s, edges, 1.0)[:2]
    assert np.isnan(stats[0, 1:4]).all() and np.isnan(tol[0])
    assert np.array_equal(stats[1:], clean[1:]) and np.array_equal(tol[1:], clean_tol[1:])
