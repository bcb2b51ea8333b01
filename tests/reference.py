"""Independent reference for the group-lasso logistic problem: skglm's GroupProxNewton.

    F(beta, b) = (1/n) sum log(1 + exp(-y (x^T beta + b))) + (lam/2) sum_g w_g ||beta_g||

The unpenalised intercept is a ones column forming its own group of weight 0.
"""

from __future__ import annotations

import numpy as np
from skglm.datafits import LogisticGroup
from skglm.penalties import WeightedGroupL2
from skglm.solvers import GroupProxNewton


def skglm_problem(
    X: np.ndarray, groups: np.ndarray, lam: float, weights: np.ndarray | None = None
) -> tuple[np.ndarray, LogisticGroup, WeightedGroupL2]:
    """(X with a ones column, datafit, penalty) of skglm for the group-lasso logistic problem:
    one group per label of ``groups`` (weights ``weights``, default 1), an unpenalised
    intercept group last, penalty (lam / 2) sum_g w_g ||beta_g||."""
    n, p = X.shape
    labels = np.unique(groups)
    order = np.argsort(groups, kind="stable")
    counts = np.array([np.sum(groups == g) for g in labels])
    grp_ptr = np.concatenate([[0], np.cumsum(counts), [p + 1]]).astype(np.int32)
    grp_indices = np.concatenate([order, [p]]).astype(np.int32)
    w = np.ones(len(labels)) if weights is None else np.asarray(weights, float)
    w = np.concatenate([w, [0.0]])
    X_aug = np.hstack([X, np.ones((n, 1))])
    return (
        X_aug,
        LogisticGroup(grp_ptr, grp_indices),
        WeightedGroupL2(lam / 2, w, grp_ptr, grp_indices),
    )


def group_logistic_optimum(
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    lam: float,
    weights: np.ndarray | None = None,
    *,
    max_iter: int = 200,
    tol: float = 1e-12,
) -> np.ndarray:
    """theta* = (beta*, b*) from skglm, solved to tol 1e-12 (at most 200 outer iterations);
    ``max_iter`` and ``tol`` are GroupProxNewton's (benchmarks/paper3.py caps the iterations
    to time skglm to a given gap)."""
    X_aug, datafit, penalty = skglm_problem(X, groups, lam, weights)
    solver = GroupProxNewton(tol=tol, max_iter=max_iter, fit_intercept=False)
    return np.asarray(solver.solve(X_aug, y, datafit, penalty)[0])


def group_logistic_objective(
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    lam: float,
    theta: np.ndarray,
    weights: np.ndarray | None = None,
) -> float:
    """F at theta = (beta, b), written directly from the formula."""
    beta, b = theta[:-1], theta[-1]
    labels = np.unique(groups)
    w = np.ones(len(labels)) if weights is None else weights
    pen = sum(wg * np.linalg.norm(beta[groups == g]) for wg, g in zip(w, labels, strict=True))
    return float(np.mean(np.logaddexp(0.0, -y * (X @ beta + b))) + lam / 2 * pen)
