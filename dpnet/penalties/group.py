"""Group L2 penalty sum_g w_g ||beta_g||_2 with groups stored CSR-style.

``grp_ptr`` (length G+1) and ``grp_indices`` (a permutation of the penalised columns):
group g holds columns ``grp_indices[grp_ptr[g]:grp_ptr[g+1]]``. The proximal operator of
t * w_g ||.||_2 is block soft-thresholding: u -> max(0, 1 - t w_g / ||u||) u.
"""

from __future__ import annotations

import numpy as np

from dpnet.errors import DataError


def groups_from_labels(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR (grp_ptr, grp_indices) from one group label per column (labels kept in sorted order)."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise DataError("groups must be a non-empty 1-D array with one group id per column")
    order = np.argsort(labels, kind="stable")
    _, counts = np.unique(labels[order], return_counts=True)
    grp_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return grp_ptr, order.astype(np.int64)


GROUP_WEIGHTS = ("ones", "sqrt-size")  # the kinds of w_g: 1, or sqrt(size of group g)


def group_weights(labels: np.ndarray, kind: str) -> np.ndarray:
    """w_g of every group of ``labels`` (ids 0..G-1, one per column) for a GROUP_WEIGHTS kind."""
    sizes = np.bincount(labels)
    return np.ones(len(sizes)) if kind == "ones" else np.sqrt(sizes.astype(float))


def group_norms(
    beta: np.ndarray, grp_ptr: np.ndarray, grp_indices: np.ndarray | None
) -> np.ndarray:
    """||beta_g||_2 for every group along the last axis, vectorised with np.add.reduceat;
    ``grp_indices`` None when the columns are already in group order (no gather)."""
    sq = (beta if grp_indices is None else beta[..., grp_indices]) ** 2
    if not sq.shape[-1]:
        return np.zeros((*sq.shape[:-1], 0))
    return np.sqrt(np.add.reduceat(sq, grp_ptr[:-1], axis=-1))


def group_penalty(
    beta: np.ndarray, grp_ptr: np.ndarray, grp_indices: np.ndarray, weights: np.ndarray
) -> float:
    """sum_g w_g ||beta_g||_2."""
    return float(weights @ group_norms(beta, grp_ptr, grp_indices))


SELECT_RTOL = 1e-6
"""A group counts as selected when its norm exceeds SELECT_RTOL max(1, ||beta||): ADMM's zeros
are exact only in the limit."""


def objective_penalty(
    lam: float,
    beta: np.ndarray,
    grp_ptr: np.ndarray,
    grp_indices: np.ndarray,
    weights: np.ndarray,
) -> float:
    """The objective's group-lasso term (lam/2) sum_g w_g ||beta_g||_2 (paper 3, model (1))."""
    return 0.5 * lam * group_penalty(beta, grp_ptr, grp_indices, weights)


def selected_groups(beta: np.ndarray, grp_ptr: np.ndarray, grp_indices: np.ndarray) -> np.ndarray:
    """The groups (in ``grp_ptr``'s order) with norm > :data:`SELECT_RTOL` max(1, ||beta||)."""
    norms = group_norms(beta, grp_ptr, grp_indices)
    return np.flatnonzero(norms > SELECT_RTOL * max(1.0, float(np.linalg.norm(beta))))
