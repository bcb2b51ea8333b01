r"""Record-level privacy of the decentralized ADMM: the theta step as a Gaussian release.

Neighbouring relation: machine j's shard D_j and D'_j differ in one record, (x_i, y_i) replaced
by any (x', y') (features and label); every row is clipped to ||x|| <= R, R = ``row_bound``
public (:func:`dpnet.decentralized.boundary.cross_boundary`), so x~ = (x, 1) has
||x~|| <= R~ = sqrt(R^2 + 1).

The theta step is the only computation of a round that reads the rows:

    theta*(D) = argmin F_D,   F_D(theta) = (1/n) sum_{i in D_j} l(y_i x~_i^T theta)
                                           + (rho/2) ||theta - m||^2,   rho = c d_j,

with m, c and d_j functions of earlier releases and the public graph. F_D' = F_D + g with
g(theta) = (1/n) [l(y' x~'^T theta) - l(y_i x~_i^T theta)], ||grad g|| <= 2 L R~ / n (L the
loss's Lipschitz bound). Both are rho-strongly convex; with grad F_D(theta*) = 0 and
grad F_D(theta'*) = -grad g(theta'*),

    rho ||theta'* - theta*||^2 <= <grad F_D(theta'*) - grad F_D(theta*), theta'* - theta*>
                               <= ||grad g(theta'*)|| ||theta'* - theta*||,

so ||theta*(D) - theta*(D')|| <= 2 L R~ / (n rho). The machines do not release theta*: they
release K gradient steps from m, theta_{k+1} = G_D(theta_k) = theta_k - eta grad F_D(theta_k),
eta = 2 / (rho + M), with K and eta public (:func:`fixed_work`). G_D is a contraction by
q = (M - rho) / (M + rho) (the Hessian of F_D lies between rho and M), and
||G_D(t) - G_D'(t)|| = eta ||grad g(t)|| <= eta 2 L R~ / n, so from the same start

    d_{k+1} = ||G_D(theta_k) - G_D'(theta'_k)|| <= q d_k + eta 2 L R~ / n,   d_0 = 0,
    d_K <= (1 - q^K) eta 2 L R~ / (n (1 - q)) = (1 - q^K) 2 L R~ / (n rho),

whatever K: the released value has L2 sensitivity at most

    Delta(rho) = 2 L R~ / (n rho),

the exact step's, and the count only sets how near theta* it ends (:data:`ACCURACY`).

Everything else a machine sends (Z_j, the dual updates, the stop statistics) is computed from
released thetas and public values only, so it is post-processing. docs/privacy.md, "Record-level
privacy", has the whole argument, the accounting and the stop rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpnet import streams
from dpnet.checks import positive
from dpnet.decentralized import boundary
from dpnet.decentralized.stacked import StackedShards, machine_rows, stack_matvec
from dpnet.errors import ConfigError
from dpnet.losses.margin import MarginLoss
from dpnet.privacy.modes import MAX_ROW_BOUND, PrivacyMode, RecordPrivacy

DEFAULT_ROUNDS = 100  # the rounds the budget is spread over (measured: penalty_factor)
RECORD_RELAXATION = 1.5
"""Over-relaxation under record privacy, where it was measured (docs/privacy.md, "Defaults,
measured"); label privacy's default is ``ADMMConfig.relaxation``."""
ACCURACY = 1e-3
"""How near its minimiser the theta step ends, as a fraction of the standard deviation s Delta
of the noise added to it (:func:`fixed_work`): a utility setting; privacy holds for any count."""
PENALTY_NOISE_SCALE = 12.0  # penalty_factor: s at which the start begins to grow with the noise
PENALTY_FACTOR_MAX = 3.0


def penalty_factor(noise_multiplier: float) -> float:
    """The factor on the spectral starting penalty under record privacy:
    clip(s / 12, 1, 3), s the per-round noise multiplier (public).

    The noise on theta is s Delta with Delta ~ 1/(c d_j): a larger c shrinks it, but slows the
    ADMM. Measured on Adult (a9a, lambda = 1e-3, J = 1, 5, 20, epsilon 0.5 to 5, T = 20 to
    200, 3 seeds; docs/privacy.md, "Record-level privacy"): 3x the spectral start was best or
    within 0.3 points at epsilon <= 1, T = 100 (s >= 37), 1x at epsilon = 5 (s = 12.6), and
    10x or more lost in every cell at T <= 100.
    """
    return min(max(noise_multiplier / PENALTY_NOISE_SCALE, 1.0), PENALTY_FACTOR_MAX)


@dataclass(frozen=True)
class RecordNoise:
    """Gaussian noise on every theta a machine sends: ``noise_multiplier`` = noise std /
    Delta(rho) each round; ``row_bound`` = R, the bound on the rows the theta step sees (with
    standardization the standardized rows' clip, not the raw rows' bound); ``seed`` of the
    noise streams (None: OS entropy, :func:`dpnet.streams.machine_theta_stream`);
    ``column_multiplier``: with standardization, the multiplier of the column releases made
    before the rounds (their ledger entry; None without)."""

    noise_multiplier: float
    row_bound: float
    seed: int | None = None
    column_multiplier: float | None = None

    def __post_init__(self) -> None:
        positive("noise_multiplier", self.noise_multiplier, error=ConfigError)
        positive("row_bound", self.row_bound, error=ConfigError)
        if not self.row_bound <= MAX_ROW_BOUND:
            raise ConfigError(
                f"row_bound must be at most {MAX_ROW_BOUND:g} (its square enters the theta "
                f"step), got {self.row_bound:g}"
            )

    def numerator(self, n_total: int, lipschitz: float) -> float:
        """rho * Delta(rho) = 2 L R~ / n: the sensitivity at rho = 1."""
        return 2.0 * lipschitz * math.hypot(self.row_bound, 1.0) / n_total


def record_noise(
    mode: PrivacyMode, rounds: int, seed: int | None, row_clip: float | None = None
) -> RecordNoise | None:
    """The theta noise of ``mode`` over ``rounds`` rounds (its multiplier calibrated to the
    mode's (epsilon, delta), less the standardization's share if any), ``seed`` naming the
    noise streams; ``row_clip``: the bound of the standardized rows the theta step sees
    (:attr:`dpnet.decentralized.columns.PublicColumns.row_clip`), else the mode's row bound;
    None under label privacy."""
    if not isinstance(mode, RecordPrivacy):
        return None
    bound = mode.row_bound if row_clip is None else row_clip
    return RecordNoise(mode.noise_multiplier(rounds), bound, seed, mode.column_noise_multiplier)


def fixed_work(
    noise: RecordNoise, loss: MarginLoss, rows: np.ndarray, n_total: int, rho: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""The theta step's step size and iteration count for machines with ``rows`` rows n_j and
    prox weights ``rho`` = c d_j: public numbers only, so every machine does the same work in
    every round whatever its records (docs/privacy.md, "Record-level privacy", Lemma 1a).

    F(theta) = f_j(theta) + (rho/2) ||theta - m||^2 is rho-strongly convex and M-smooth,
    M = rho + L2 n_j R~^2 / n (L2 the loss's curvature bound, ||x~|| <= R~). Gradient descent
    with the step 2 / (rho + M) brings every iterate closer to the minimiser theta* by the
    factor q = (M - rho) / (M + rho); from theta_0 = m, ||m - theta*|| <= ||grad f_j(m)|| / rho
    <= G / rho with G = L n_j R~ / n (L the loss's Lipschitz bound). After

        K = max(1, ceil(ln(n_j / (2 a s)) / ln(1 / q))),   a = ACCURACY, s the noise multiplier,

    steps ||theta_K - theta*|| <= q^K G / rho <= a s Delta(rho): the step ends within a of the
    noise's standard deviation from theta*. (Its sensitivity is Delta(rho) for any K: the
    module docstring.)
    """
    rows_f = np.asarray(rows, dtype=np.float64)
    rho = np.asarray(rho, dtype=np.float64)
    curvature = loss.curvature_bound * rows_f * (noise.row_bound**2 + 1.0) / n_total  # M - rho
    step = 2.0 / (2.0 * rho + curvature)
    contraction = curvature / (2.0 * rho + curvature)
    reach = rows_f / (2.0 * ACCURACY * noise.noise_multiplier)  # G / (a s Delta rho)
    with np.errstate(divide="ignore"):  # no curvature at all: one step is exact
        count = np.ceil(np.log(np.maximum(reach, 1.0)) / -np.log(contraction))
    return step, np.maximum(count, 1.0).astype(np.int64)


def private_thetas(
    noise: RecordNoise,
    data: StackedShards,
    center: np.ndarray,
    rho: np.ndarray,
    round_: int,
    ranks: np.ndarray,
) -> np.ndarray:
    """The released thetas of round ``round_`` of a block of machines (``ranks``: machine i of
    the block is machine ``ranks[i]`` of the network): each one's theta step by
    :func:`fixed_work`'s gradient descent from its prox centre ``center[i]``, then
    :func:`boundary.release_theta` with the sensitivity Delta(rho[i]) and a stream made for
    this draw alone. An MPI rank or a thread is a block of one, the simulator a block of J."""
    step, count = fixed_work(noise, data.loss, data.rows, data.n_total, rho)
    theta = center.copy()
    n_block = theta.shape[0]
    for k in range(int(count.max())):
        idx = np.flatnonzero(count > k)
        rows = machine_rows(idx, n_block)
        margin = data.y[rows] * stack_matvec(data.X, idx, theta[rows])
        grad = data.loss_gradient(idx, margin) + rho[rows, None] * (theta[rows] - center[rows])
        theta[rows] -= step[rows, None] * grad
    numerator = noise.numerator(data.n_total, data.loss.lipschitz_bound)
    return np.stack(
        [
            boundary.release_theta(
                theta[i],
                numerator / rho[i],
                noise.noise_multiplier,
                streams.machine_theta_stream(noise.seed, rank, round_),
                rank,
                round_,
            )
            for i, rank in enumerate(ranks.tolist())
        ]
    )
