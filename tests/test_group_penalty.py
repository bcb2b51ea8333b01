"""The group-lasso penalty (dpnet.penalties.group): the objective's term, the selection rule
and the proximal operator, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from dpnet.decentralized import GroupStructure, _edges
from dpnet.penalties import objective_penalty, selected_groups

GRP_PTR, GRP_INDICES = np.array([0, 2, 3, 5]), np.arange(5)  # columns 0-1, 2, 3-4


def test_the_objective_term_and_the_selection_rule_by_hand() -> None:
    """(lam/2) sum_g w_g ||beta_g|| and the groups above 1e-6 max(1, ||beta||), on a vector
    whose group norms are 5, 1e-7 and 0 (columns 0-1, 2, 3-4)."""
    beta = np.array([3.0, 4.0, 1e-7, 0.0, 0.0])
    weights = np.array([1.0, 2.0, 3.0])
    assert objective_penalty(0.2, beta, GRP_PTR, GRP_INDICES, weights) == 0.1 * (5.0 + 2e-7)
    # threshold 1e-6 * 5: the 1e-7 group is below it
    assert selected_groups(beta, GRP_PTR, GRP_INDICES).tolist() == [0]
    small = np.array([0.0, 0.0, 2e-6, 0.0, 0.0])  # ||beta|| < 1: the threshold is 1e-6
    assert selected_groups(small, GRP_PTR, GRP_INDICES).tolist() == [1]


def _prox(groups: GroupStructure, u: np.ndarray) -> np.ndarray:
    """S(u) (rows of u) by the Z step's kernel: one edge per row (the machine itself), c = 1
    and no duals, so u_j is the row itself, exactly; an intercept 1 appended, kept as it is."""
    rows = np.atleast_2d(u)
    theta = np.hstack([rows, np.ones((len(rows), 1))])
    ptr = np.arange(len(rows) + 1)
    z = _edges.z_step(theta, np.zeros_like(theta), ptr, 1.0, groups.theta_group, groups.thresholds)
    assert np.array_equal(z[:, -1], np.ones(len(rows)))  # the intercept is never shrunk
    return z[:, :-1].reshape(np.shape(u))


def test_block_soft_threshold_scales_each_group_by_its_own_norm() -> None:
    """u_g (1 - t_g / ||u_g||) above the threshold, 0 at or below it."""
    u = np.array([3.0, 4.0, 0.5, 1.0, 0.0])
    groups = GroupStructure(GRP_PTR, GRP_INDICES, np.array([1.0, 0.5, 2.0]))
    np.testing.assert_allclose(_prox(groups, u), [2.4, 3.2, 0.0, 0.0, 0.0], rtol=1e-15)


def test_soft_threshold_of_permuted_groups_rows_and_unpenalised_groups() -> None:
    """Groups whose columns are not in order, a group with t_g = 0 (kept as it is, a zero
    block too) and rows of a matrix (every machine's u at once): against the prox written
    group by group."""
    rng = np.random.default_rng(0)
    labels = np.array([2, 0, 1, 0, 2, 1, 1])
    order = np.argsort(labels, kind="stable")
    grp_ptr = np.array([0, 2, 5, 7])
    thresholds = np.array([0.7, 0.0, 1.5])
    groups = GroupStructure(grp_ptr, order, thresholds)
    u = rng.standard_normal((4, 7))
    u[1, labels == 1] = 0.0  # a zero block of the unpenalised group
    expected = u.copy()
    for row in expected:
        for g, t in enumerate(thresholds):
            norm = np.linalg.norm(row[labels == g])
            row[labels == g] *= 1.0 if t == 0 else max(0.0, 1.0 - t / norm)
    np.testing.assert_allclose(_prox(groups, u), expected, rtol=1e-15, atol=0)
    for row, want in zip(u, expected, strict=True):
        assert np.array_equal(_prox(groups, row), _prox(groups, u)[u.tolist().index(row.tolist())])
        np.testing.assert_allclose(_prox(groups, row), want, rtol=1e-15)
    penalties = [
        sum(t * np.linalg.norm(r[labels == g]) for g, t in enumerate(thresholds)) for r in u
    ]
    np.testing.assert_allclose(groups.penalty(u), penalties, rtol=1e-14)


def test_soft_threshold_of_non_finite_blocks() -> None:
    """A NaN makes its group NaN (the stop rule then ends the run as non-finite); an infinite
    entry keeps its group unshrunk (1 - t / inf = 1); the other groups are as without them."""
    labels = np.array([2, 0, 1, 0, 2, 1, 1])
    groups = GroupStructure(
        np.array([0, 2, 5, 7]), np.argsort(labels, kind="stable"), np.array([0.7, 0.0, 1.5])
    )
    clean = np.array([0.1, 3.0, 0.2, 4.0, 0.3, 0.5, 0.6])
    for bad, value in [(1, np.nan), (0, np.inf)]:
        u = clean.copy()
        u[bad] = value
        with np.errstate(invalid="ignore"):
            got = _prox(groups, u)
        same = labels != labels[bad]
        assert np.array_equal(got[same], _prox(groups, clean)[same])
        if np.isnan(value):
            assert np.isnan(got[~same]).all()
        else:
            assert np.array_equal(got[~same], u[~same])


def test_group_structure_refuses_indices_that_are_not_a_permutation() -> None:
    with pytest.raises(ValueError, match="permutation"):
        GroupStructure(np.array([0, 2, 3]), np.array([0, 1, 1]), np.ones(2))
