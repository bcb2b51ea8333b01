"""One machine's work in the main job (backend independent): randomized response with a
stream of its own (or, resumed, its stored randomized labels), checkpoints, the ADMM rounds.
It is step 4 of :mod:`dpnet.pipeline`: the set-up before it is :mod:`dpnet.setup`, the release
after it :mod:`dpnet.release`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from dpnet import checkpoint, streams
from dpnet.checkpoint import Checkpointer, Resumed, keep_count
from dpnet.config import RunConfig
from dpnet.decentralized import boundary
from dpnet.decentralized.admm import ADMMConfig
from dpnet.decentralized.boundary import PrivateShard, RawShard
from dpnet.decentralized.columns import PublicColumns
from dpnet.decentralized.cv import CVPath, CVResult, assign_folds, cross_validate
from dpnet.decentralized.machine import MachineOutcome, fit_private_shard, local_problem
from dpnet.decentralized.record import record_noise
from dpnet.decentralized.termination import tree_plan
from dpnet.errors import ConfigError
from dpnet.network.comm import Communicator
from dpnet.report import print_cv_fold


@dataclass
class JobOutcome(MachineOutcome):
    """A machine's outcome in the main job: the fit's, plus its cross-validation (--cv)."""

    cross_validation: CVResult | None = None


def admm_config(config: RunConfig, columns: PublicColumns | None) -> ADMMConfig:
    """The ADMM's parameters of the job ``config`` on shards with the public ``columns``
    (their curvature scales the starting penalty; every machine's shard has the same)."""
    mode = config.privacy_mode
    return ADMMConfig(
        lam=config.lam,
        c=config.c,
        adapt_c=config.adapt_c and mode.adapts_penalty,
        alpha_z=config.alpha_z,
        relaxation=config.over_relaxation,
        theta_solver=config.theta_solver,
        theta_rtol=config.theta_rtol,
        beta_steps=config.beta_steps,
        beta_step_size=config.beta_step_size,
        max_rounds=config.rounds,
        tol=config.tol,
        max_coef_norm=config.max_coef_norm,
        progress_every=config.progress_every,
        record=record_noise(mode, config.rounds, config.seed),
        feature_curvature=None if columns is None else columns.curvature,
    )


def machine_main(
    comm: Communicator,
    raw: RawShard,
    config: RunConfig,
    graph: Any,
    on_progress: Any = None,
    resumed: Resumed | None = None,
) -> JobOutcome:
    """One machine of the main job: randomized response with a stream used for it alone
    (:func:`dpnet.streams.machine_flip_stream`, created for the draw and dropped with it) or,
    resumed, the labels it randomized before; checkpoints if asked; with --cv the
    cross-validation of lambda (on the randomized labels, folds from a stream of their own);
    then the ADMM rounds."""
    p = config.keep_probability
    part = f"machine {comm.rank}"
    keep_oracle = config.oracle_output is not None
    if resumed is None:
        flips = streams.machine_flip_stream(config.seed, comm.rank)  # for this call alone
        crossing = boundary.cross_boundary(
            raw, p, flips, part, keep_oracle=keep_oracle, row_bound=config.row_bound
        )
        del flips
    else:
        crossing = boundary.recross_boundary(
            raw, resumed.y_randomized, part, keep_oracle=keep_oracle
        )
        comm.stats.restore(resumed.traffic)
    on_round = None
    if config.checkpoint is not None:
        on_round = Checkpointer(
            config.checkpoint,
            comm.rank,
            config.checkpoint_every,
            keep_count(tree_plan(graph, comm.rank).drift, config.checkpoint_every),
            checkpoint_prints(config, graph, comm.rank, raw),
            crossing[0].y,
            comm.stats.as_dict,
        )
    del raw  # nothing below may read the raw labels
    admm = admm_config(config, crossing[0].columns)
    cv = None
    if config.cv:
        cv = machine_cross_validation(
            comm,
            crossing[0],
            config,
            graph,
            admm,
            streams.machine_fold_stream(config.seed, comm.rank),
            on_progress is not None,
        )
        admm = replace(admm, lam=cv.selected)
        comm.stats.reset()  # the final fit's counters start at zero, as without --cv
    outcome = fit_private_shard(
        comm,
        *crossing,
        keep_prob=p,
        loss=config.loss,
        admm=admm,
        graph=graph,
        on_progress=on_progress,
        start_state=None if resumed is None else resumed.state,
        on_round=on_round,
    )
    return JobOutcome(outcome.release, outcome.oracle, cv)


def machine_cross_validation(
    comm: Communicator,
    shard: PrivateShard,
    config: RunConfig,
    graph: Any,
    admm: ADMMConfig,
    rng: np.random.Generator,
    verbose: bool,
) -> CVResult:
    """``--cv K`` on one machine: its own folds (``rng``: its fold stream), the network's CV
    curve and selected lambda, from its randomized shard only; rank 0 prints a line per fold
    when ``verbose``."""
    assert config.cv is not None  # called with --cv K only
    data, groups = local_problem(
        shard,
        lam=admm.lam,
        loss=config.loss,
        keep_prob=config.keep_probability,
        n_machines=comm.size,
    )

    on_fold = partial(print_cv_fold, config.cv) if verbose and comm.rank == 0 else None

    return cross_validate(
        comm,
        graph,
        data,
        groups.grp_ptr,
        groups.grp_indices,
        shard.group_weights,
        assign_folds(len(shard.y), config.cv, rng),
        config.cv,
        admm,
        path=cv_path(config),
        on_fold=on_fold,
    )


def cv_path(config: RunConfig) -> CVPath:
    """``--lam-grid``, ``--n-lambdas``, ``--lambda-ratio`` and ``--cv-rule`` as one path."""
    return CVPath(config.lam_grid, config.n_lambdas, config.lambda_ratio, config.cv_rule)


def checkpoint_prints(config: RunConfig, graph: Any, rank: int, raw: RawShard) -> dict[str, str]:
    """Fingerprints a checkpoint must match: graph, data, and every setting that changes the
    iterates or what the results say of them, the seed included (not --max-rounds: a resumed
    run may go on longer)."""
    # feature_curvature: a fact of the data, which has its own fingerprint
    ignored = ("max_rounds", "progress_every", "fail_at", "stall_at", "feature_curvature")
    admm = asdict(admm_config(config, raw.columns))
    settings = {k: v for k, v in admm.items() if k not in ignored}
    settings |= {"keep_prob": config.keep_probability, "loss": config.loss, "seed": config.seed}
    return checkpoint.fingerprints(rank, graph, settings, raw)


def resume_machine(config: RunConfig, graph: Any, rank: int, raw: RawShard, round_: int) -> Resumed:
    """Machine ``rank``'s checkpoint of ``round_`` from ``--resume`` (CheckpointError if it
    is missing, corrupt or of another run)."""
    assert config.resume is not None  # called with --resume only
    return checkpoint.load(config.resume, rank, round_, checkpoint_prints(config, graph, rank, raw))


def check_checkpoint_dir(config: RunConfig) -> None:
    """``--checkpoint DIR`` must be a directory this process can write, or one it can create
    (its nearest existing ancestor a writable directory), before round 1 (ConfigError
    otherwise). Nothing is created here: a run refused later leaves no directory behind; the
    first checkpoint creates it."""
    if config.checkpoint is None:
        return
    path = Path(config.checkpoint).absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"--checkpoint {config.checkpoint}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "not writable" if existing == path else f"cannot create it in {existing}"
        raise ConfigError(f"--checkpoint {config.checkpoint}: {what}")
