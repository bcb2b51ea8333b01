"""The round loop of the decentralized ADMM, written against the communicator interface.

Per round: Z step -> exchange Z with neighbours -> theta step -> exchange theta (with the
termination pipeline piggybacked) -> dual step. No global collective is used.

Termination by pipelined max-consensus: every machine keeps ``pipe`` of shape (D+1, J, K),
where ``pipe[k, i]`` holds machine i's statistics from k rounds ago once they can have reached
it (-inf before). Each round, row k is the elementwise max of row k-1 over the closed
neighbourhood. By induction ``pipe[k]`` holds exactly the machines within distance k, so
with D = diameter(G) row D holds every machine's statistics of round t - D, identical on all
machines: they all take the same stop decision in the same round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dpnet.decentralized.steps import (
    GroupStructure,
    LocalData,
    dual_update,
    local_objective,
    residuals,
    theta_update_gradient,
    theta_update_newton,
    z_update,
)
from dpnet.network.comm import Communicator
from dpnet.penalties.group import group_penalty

# Statistics carried through the pipeline, per machine.
STAT_NAMES = ("objective_part", "scaled_residual", "primal_residual", "dual_residual",
              "coef_norm")
N_STATS = len(STAT_NAMES)
# residual balancing stops near the tolerance: there the residuals sit at rounding noise and a
# change of c only restarts the transient
ADAPT_FLOOR = 100.0


@dataclass(frozen=True)
class ADMMConfig:
    """Parameters of the decentralized ADMM and the one place of their defaults (the CLI and
    the estimator take theirs from here; docs/algorithms.md says why these values)."""

    lam: float = 0.1
    c: float = 0.005
    adapt_c: bool = True
    adapt_every: int = 10
    adapt_max: int = 30
    adapt_ratio: float = 10.0
    adapt_factor: float = 2.0
    alpha_z: float = 1.0
    theta_solver: str = "newton"
    beta_steps: int = 10
    beta_step_size: float = 0.4
    max_rounds: int = 3000
    tol: float = 1e-9
    max_coef_norm: float = 1e4
    progress_every: int = 0
    fail_at: tuple[int, int] | None = None  # (rank, round): fault injection for abort tests


@dataclass
class ProgressRecord:
    round: int
    objective: float
    primal_residual: float
    dual_residual: float


@dataclass
class MachineResult:
    """What one machine ends with; gathered to rank 0 for reporting."""

    rank: int
    theta: np.ndarray
    z: np.ndarray
    rounds: int
    stop_reason: str
    local_objective: float
    n_rows: int
    traffic: dict[str, float | int]
    total_seconds: float
    compute_seconds: float
    history: list[ProgressRecord] = field(default_factory=list)


def _stats_row(size: int) -> np.ndarray:
    return np.full((size, N_STATS), -np.inf)


def balance_penalty(primal: float, dual: float, ratio: float, factor: float) -> float:
    """Residual balancing (Boyd et al. 2011, eq. 3.13): the factor to multiply c by.

    Every machine calls it with the same network-wide residuals from the pipeline, so the
    penalty changes in the same round everywhere and the dual copies stay consistent.
    """
    if primal > ratio * dual:
        return factor
    if dual > ratio * primal:
        return 1.0 / factor
    return 1.0


def run_machine(comm: Communicator, data: LocalData, groups: GroupStructure, config: ADMMConfig,
                diameter: int,
                on_progress: Callable[[ProgressRecord], None] | None = None) -> MachineResult:
    """Run the ADMM on one machine until the network-wide stop decision; see module docstring."""
    start = time.perf_counter()
    n_nbhd = len(comm.neighbours) + 1
    own_pos = sum(v < comm.rank for v in comm.neighbours)  # position of j inside Nbar_j, sorted
    dim = data.n_features + 1
    theta = np.zeros(dim)
    z = np.zeros(dim)
    theta_nbhd = np.zeros((n_nbhd, dim))
    v_out = np.zeros((n_nbhd, dim))
    v_in = np.zeros((n_nbhd, dim))
    depth = diameter + 1
    pipe = np.full((depth, comm.size, N_STATS), -np.inf)
    history: list[ProgressRecord] = []
    stop_reason = "max_rounds"
    rounds = 0
    c = config.c
    n_adapted = 0

    def with_own(own: np.ndarray, received: np.ndarray) -> np.ndarray:
        return np.insert(received, own_pos, own, axis=0)

    for t in range(1, config.max_rounds + 1):
        rounds = t
        if config.fail_at is not None and config.fail_at == (comm.rank, t):
            raise RuntimeError(f"injected fault on machine {comm.rank} in round {t}")
        z_prev = z
        z = z_update(theta_nbhd, v_out, z_prev, c, groups, config.alpha_z)
        z_nbhd = with_own(z, comm.neighbour_exchange(z))
        if config.theta_solver == "newton":
            theta = theta_update_newton(data, z_nbhd, v_in, theta, c)
        else:
            theta = theta_update_gradient(data, z_nbhd, v_in, theta, c,
                                          n_steps=config.beta_steps,
                                          step_size=config.beta_step_size)
        received = comm.neighbour_exchange(np.concatenate([theta, pipe.ravel()]))
        theta_nbhd = with_own(theta, received[:, :dim])
        dual_update(v_out, v_in, z, z_nbhd, theta, theta_nbhd, c)

        nbr_pipes = received[:, dim:].reshape(-1, depth, comm.size, N_STATS)
        shifted = np.maximum(pipe[:-1], nbr_pipes[:, :-1].max(axis=0)) if len(nbr_pipes) \
            else pipe[:-1]
        primal, dual = residuals(z, z_prev, theta_nbhd, c)
        own = _stats_row(comm.size)
        scale = max(1.0, float(np.linalg.norm(theta)))
        own[comm.rank] = (
            local_objective(data, theta)
            + group_penalty(theta[:-1], groups.grp_ptr, groups.grp_indices, groups.thresholds),
            max(primal, dual) / scale, primal, dual, float(np.linalg.norm(theta)),
        )
        pipe = np.concatenate([own[None], shifted])

        done_round = t - diameter
        if done_round >= 1:
            complete = pipe[-1]
            record = ProgressRecord(done_round, float(complete[:, 0].sum()),
                                    float(complete[:, 2].max()), float(complete[:, 3].max()))
            if on_progress is not None and config.progress_every and (
                    done_round % config.progress_every == 0):
                on_progress(record)
            if config.progress_every and done_round % config.progress_every == 0:
                history.append(record)
            if not np.isfinite(complete).all():
                # NaN or inf in any machine's iterate or objective: nothing after it can be
                # trusted (max-based tests are false for NaN), so stop everyone now
                stop_reason = "non-finite"
                history.append(record)
                break
            if complete[:, 4].max() > config.max_coef_norm:
                # the objective has no minimiser (or c is badly off): relative residuals
                # would look small on a run-away iterate, so stop and say so
                stop_reason = "diverged"
                history.append(record)
                break
            if complete[:, 1].max() <= config.tol:
                stop_reason = "converged"
                history.append(record)
                break
            if (config.adapt_c and n_adapted < config.adapt_max
                    and done_round % config.adapt_every == 0
                    and complete[:, 1].max() > ADAPT_FLOOR * config.tol):
                factor = balance_penalty(record.primal_residual, record.dual_residual,
                                         config.adapt_ratio, config.adapt_factor)
                if factor != 1.0:
                    c *= factor
                    n_adapted += 1

    total = time.perf_counter() - start
    return MachineResult(
        rank=comm.rank, theta=theta, z=z, rounds=rounds, stop_reason=stop_reason,
        local_objective=local_objective(data, theta), n_rows=len(data.y),
        traffic=comm.stats.as_dict(), total_seconds=total,
        compute_seconds=total - comm.stats.comm_seconds, history=history,
    )
