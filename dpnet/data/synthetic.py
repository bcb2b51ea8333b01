"""Paper 3's synthetic design: Yuan & Lin (2006) model III with 3-column polynomial groups.

For each row, u_1..u_G ~ N(0, 1) iid and group g holds (u_g, u_g^2, u_g^3), so p = 3G. Only
groups 3 and 6 (1-based) are active:

    D = u_3 + u_3^2 + u_3^3 + u_6^3/3 - u_6^2 + 2 u_6/3 = x^T beta*,
    beta*_3 = (1, 1, 1),  beta*_6 = (2/3, -1, 1/3),  every other group 0.

Labels: ``"bernoulli"`` draws y = +1 with probability sigma(D) (a proper logistic model,
the default); ``"threshold"`` is the paper's rule y = +1 iff sigma(D) >= 0.5, i.e. D >= 0,
which makes the data separable by beta*.
"""

from __future__ import annotations

import numpy as np

from dpnet.data.dataset import GroupData
from dpnet.data.memory import check_fits
from dpnet.errors import ConfigError

LABEL_RULES = ("bernoulli", "threshold")
_ACTIVE = {2: (1.0, 1.0, 1.0), 5: (2.0 / 3.0, -1.0, 1.0 / 3.0)}  # 0-based group -> coefficients


def true_coefficient(n_groups: int = 16) -> np.ndarray:
    """beta* of length 3 * n_groups: (1, 1, 1) on group 3, (2/3, -1, 1/3) on group 6 (1-based)."""
    if n_groups < 6:
        raise ConfigError(f"n_groups must be >= 6 (groups 3 and 6 are active), got {n_groups}")
    beta = np.zeros(3 * n_groups)
    for g, coef in _ACTIVE.items():
        beta[3 * g : 3 * g + 3] = coef
    return beta


def make_group_logistic(
    n_samples: int,
    *,
    n_groups: int = 16,
    label_rule: str = "bernoulli",
    rng: np.random.Generator,
) -> GroupData:
    """Draw ``n_samples`` rows of the model-III design (see the module docstring).

    Returns a :class:`GroupData` with columns ordered group by group (u_g, u_g^2, u_g^3),
    ``groups = [0, 0, 0, 1, 1, 1, ...]`` and ``coef_true`` = beta*.
    """
    if n_samples < 1:
        raise ConfigError(f"n_samples must be >= 1, got {n_samples}")
    if label_rule not in LABEL_RULES:
        raise ConfigError(f"label_rule must be one of {LABEL_RULES}, got {label_rule!r}")
    # u, the powers and X at once, then rank 0's shards cut from X
    check_fits((n_samples, 3 * n_groups), f"{n_samples} synthetic rows", copies=3)
    beta = true_coefficient(n_groups)
    u = rng.standard_normal((n_samples, n_groups))
    # u, u^2 = u u and u^3 = (u u) u, each product rounded once: the same floats on every host
    # (numpy's vectorised pow, which u ** (1, 2, 3) ran, differs between SIMD kernels by an
    # ulp, and took 3.6 s of CPU at 1,000,000 rows against 0.3 s)
    powers = np.empty((n_samples, n_groups, 3))
    powers[:, :, 0] = u
    np.multiply(u, u, out=powers[:, :, 1])
    np.multiply(powers[:, :, 1], u, out=powers[:, :, 2])
    X = powers.reshape(n_samples, 3 * n_groups)
    D = X @ beta
    if label_rule == "bernoulli":
        with np.errstate(over="ignore"):  # exp(-D) = inf: P(y = 1) = 0
            prob = 1.0 / (1.0 + np.exp(-D))  # the logistic function (scipy's expit, to 1 ulp)
        y = np.where(rng.random(n_samples) < prob, 1.0, -1.0)
    else:
        y = np.where(D >= 0.0, 1.0, -1.0)
    names = tuple(f"u{g + 1}^{k}" for g in range(n_groups) for k in (1, 2, 3))
    groups = np.repeat(np.arange(n_groups, dtype=np.int64), 3)
    return GroupData(X=X, y=y, groups=groups, coef_true=beta, feature_names=names)
