"""The group-lasso penalty (dpnet.penalties.group): the objective's term, the selection rule
and the proximal operator, against hand-computed values."""

from __future__ import annotations

import numpy as np

from dpnet.penalties.group import block_soft_threshold, objective_penalty, selected_groups

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
    out = block_soft_threshold(u, np.array([1.0, 0.5, 2.0]), GRP_PTR, GRP_INDICES)
    np.testing.assert_allclose(out, [2.4, 3.2, 0.0, 0.0, 0.0], rtol=1e-15)
