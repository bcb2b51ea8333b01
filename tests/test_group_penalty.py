"""The group-lasso penalty (dpnet.penalties.group): the objective's term, the selection rule
and the proximal operator, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from dpnet.decentralized import GroupStructure
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


def test_block_soft_threshold_scales_each_group_by_its_own_norm() -> None:
    """u_g (1 - t_g / ||u_g||) above the threshold, 0 at or below it."""
    u = np.array([3.0, 4.0, 0.5, 1.0, 0.0])
    groups = GroupStructure(GRP_PTR, GRP_INDICES, np.array([1.0, 0.5, 2.0]))
    np.testing.assert_allclose(groups.soft_threshold(u), [2.4, 3.2, 0.0, 0.0, 0.0], rtol=1e-15)


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
    np.testing.assert_allclose(groups.soft_threshold(u), expected, rtol=1e-15, atol=0)
    for row, want in zip(u, expected, strict=True):
        assert np.array_equal(groups.soft_threshold(row), groups.soft_threshold(row[None, :])[0])
        np.testing.assert_allclose(groups.soft_threshold(row), want, rtol=1e-15)
    penalties = [
        sum(t * np.linalg.norm(r[labels == g]) for g, t in enumerate(thresholds)) for r in u
    ]
    np.testing.assert_allclose(groups.penalty(u), penalties, rtol=1e-14)


def test_theta_shrinkage_is_the_soft_threshold_of_beta_and_keeps_the_intercept() -> None:
    """u times the factors of a whole theta is (S(u_beta), u_b) bit for bit (the Z step's
    form of the prox): permuted groups, t_g = 0, zero blocks, non-finite entries."""
    rng = np.random.default_rng(1)
    labels = np.array([2, 0, 1, 0, 2, 1, 1])
    groups = GroupStructure(
        np.array([0, 2, 5, 7]), np.argsort(labels, kind="stable"), np.array([0.7, 0.0, 1.5])
    )
    for u in [*rng.standard_normal((5, 8)), np.zeros(8), np.r_[np.inf, np.zeros(6), np.nan]]:
        with np.errstate(invalid="ignore"):
            got = u * groups.theta_shrinkage(u)
            want = np.append(groups.soft_threshold(u[:-1]), u[-1])
        assert got.tobytes() == want.tobytes()


def test_group_structure_refuses_indices_that_are_not_a_permutation() -> None:
    with pytest.raises(ValueError, match="permutation"):
        GroupStructure(np.array([0, 2, 3]), np.array([0, 1, 1]), np.ones(2))
