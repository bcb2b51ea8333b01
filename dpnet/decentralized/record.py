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

so ||theta*(D) - theta*(D')|| <= 2 L R~ / (n rho). The solver returns theta^ with
||grad F(theta^)|| <= tau, checked (PrivacyError otherwise), hence ||theta^ - theta*|| <= tau/rho
and the released value has L2 sensitivity

    Delta(rho) = (2 L R~ / n + 2 tau) / rho,   tau = SOLVE_FRACTION * 2 L R~ / n.

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
from dpnet.decentralized.steps import LocalData, theta_gradient, theta_update_newton
from dpnet.errors import ConfigError, PrivacyError

DEFAULT_ROUNDS = 100  # the rounds the budget is spread over (measured: penalty_factor)
DEFAULT_DELTA = 1e-5
RECORD_RELAXATION = 1.5
"""Over-relaxation under record privacy, where it was measured (docs/privacy.md, "Defaults,
measured"); label privacy's default is ``ADMMConfig.relaxation``."""
SOLVE_FRACTION = 1e-6  # solver tolerance tau as a fraction of the exact sensitivity's numerator
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
    Delta(rho) each round; ``row_bound`` = R; ``seed`` of the noise streams (None: OS entropy,
    :func:`dpnet.streams.machine_theta_stream`)."""

    noise_multiplier: float
    row_bound: float
    seed: int | None = None

    def __post_init__(self) -> None:
        positive("noise_multiplier", self.noise_multiplier, error=ConfigError)
        positive("row_bound", self.row_bound, error=ConfigError)

    def numerator(self, n_total: int, lipschitz: float) -> float:
        """rho * Delta(rho) = (2 L R~ / n)(1 + 2 SOLVE_FRACTION): the sensitivity at rho = 1."""
        exact = 2.0 * lipschitz * math.hypot(self.row_bound, 1.0) / n_total
        return exact * (1.0 + 2.0 * SOLVE_FRACTION)

    def solve_tol(self, n_total: int, lipschitz: float) -> float:
        """tau: the gradient norm the theta step must reach."""
        return SOLVE_FRACTION * 2.0 * lipschitz * math.hypot(self.row_bound, 1.0) / n_total


CERTIFY_ATTEMPTS = 3  # Newton restarts from its own result before the step is refused


def private_theta_step(
    noise: RecordNoise,
    data: LocalData,
    z_nbhd: np.ndarray,
    v_in: np.ndarray,
    theta_prev: np.ndarray,
    c: float,
    rank: int,
    round_: int,
) -> np.ndarray:
    """Machine ``rank``'s released theta of round ``round_``: the theta step solved until its
    gradient norm is <= tau (checked), then :func:`boundary.release_theta` with sensitivity
    Delta(c d_j) and a stream made for this draw alone."""
    n, lipschitz = data.n_total, data.loss.lipschitz_bound
    tol = noise.solve_tol(n, lipschitz)
    theta = theta_prev
    for _ in range(CERTIFY_ATTEMPTS):
        theta = theta_update_newton(data, z_nbhd, v_in, theta, c, tol=tol)
        if np.linalg.norm(theta_gradient(data, z_nbhd, v_in, theta, c)) <= tol:
            break
    else:
        raise PrivacyError(
            f"machine {rank}: the theta step of round {round_} did not reach the gradient "
            f"norm {tol:.3g} its sensitivity bound needs"
        )
    rho = c * z_nbhd.shape[0]
    return boundary.release_theta(
        theta,
        noise.numerator(n, lipschitz) / rho,
        noise.noise_multiplier,
        streams.machine_theta_stream(noise.seed, rank, round_),
        rank,
        round_,
    )


def release_all(
    noise: RecordNoise, thetas: np.ndarray, rho: np.ndarray, numerator: float, round_: int
) -> np.ndarray:
    """:func:`boundary.release_theta` of every machine's certified theta (rows of ``thetas``,
    the simulator's stack), machine j with sensitivity numerator / rho[j] and its own stream."""
    return np.stack(
        [
            boundary.release_theta(
                thetas[j],
                numerator / rho[j],
                noise.noise_multiplier,
                streams.machine_theta_stream(noise.seed, j, round_),
                j,
                round_,
            )
            for j in range(thetas.shape[0])
        ]
    )
