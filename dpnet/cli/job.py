"""One machine's work in the main job (backend independent): randomized response with a
stream of its own (or, resumed, its stored randomized labels), checkpoints, the ADMM rounds.
It is step 4 of :mod:`dpnet.cli.pipeline`: the set-up before it is :mod:`dpnet.cli.setup`, the
release after it :mod:`dpnet.cli.release`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from dpnet import streams
from dpnet.cli import checkpoint
from dpnet.cli.checkpoint import Checkpointer, Resumed, keep_count
from dpnet.cli.config import RunConfig
from dpnet.cli.report import print_cv_fold
from dpnet.decentralized import boundary
from dpnet.decentralized.admm import ADMMConfig, fit_settings
from dpnet.decentralized.block import Block, CommBlock
from dpnet.decentralized.boundary import PrivateShard, RawShard
from dpnet.decentralized.columns import PublicColumns
from dpnet.decentralized.cv import CVPath, CVResult, assign_folds, cross_validate
from dpnet.decentralized.machine import (
    MachineOutcome,
    fit_private_block,
    local_problem,
    randomize_all,
)
from dpnet.decentralized.termination import tree_plan
from dpnet.errors import ConfigError
from dpnet.privacy.modes import CLI


@dataclass
class JobOutcome(MachineOutcome):
    """A machine's outcome in the main job: the fit's, plus its cross-validation (--cv)."""

    cross_validation: CVResult | None = None


def admm_config(config: RunConfig, columns: PublicColumns | None) -> ADMMConfig:
    """The ADMM's parameters of the job ``config`` on shards with the public ``columns``
    (their curvature scales the starting penalty; every machine's shard has the same), by the
    rules both front doors share (:func:`~dpnet.decentralized.admm.fit_settings`)."""
    return fit_settings(
        config.privacy_mode,
        config.seed,
        columns,
        CLI,
        max_rounds=config.max_rounds,
        relaxation=config.relaxation,
        adapt_c=config.adapt_c,
        lam=config.lam,
        c=config.c,
        alpha_z=config.alpha_z,
        theta_solver=config.theta_solver,
        theta_rtol=config.theta_rtol,
        beta_steps=config.beta_steps,
        beta_step_size=config.beta_step_size,
        tol=config.tol,
        max_coef_norm=config.max_coef_norm,
        progress_every=config.progress_every,
    )


def block_main(
    block: Block,
    raws: Sequence[RawShard],
    config: RunConfig,
    graph: Any,
    on_progress: Any = None,
    resumed: Resumed | None = None,
) -> list[JobOutcome]:
    """The main job's work of a block of machines (``raws[r]`` its r-th machine's shard):
    randomized response, each machine with a stream used for it alone
    (:func:`dpnet.streams.machine_flip_stream`, created for the draw and dropped with it) or,
    resumed (a block of one), the labels it randomized before; checkpoints if asked (a block
    of one); with --cv the cross-validation of lambda (on the randomized labels, folds from a
    stream of their own); then the ADMM rounds."""
    ids = block.edges.ids.tolist()
    keep_oracle = config.oracle_output is not None
    if resumed is None:
        crossings = randomize_all(
            raws,
            config.keep_probability,
            config.seed,
            ids,
            keep_oracle=keep_oracle,
            row_bound=config.row_bound,
        )
    else:
        assert isinstance(block, CommBlock)  # a machine resumes its own checkpoint
        part = f"machine {ids[0]}"
        crossings = [
            boundary.recross_boundary(raws[0], resumed.y_randomized, part, keep_oracle=keep_oracle)
        ]
        block.comm.stats.restore(resumed.traffic)
    on_round = None
    if config.checkpoint is not None:
        assert isinstance(block, CommBlock)  # RunConfig refuses it for the simulator
        comm = block.comm
        on_round = Checkpointer(
            config.checkpoint,
            comm.rank,
            config.checkpoint_every,
            keep_count(tree_plan(graph, comm.rank).drift, config.checkpoint_every),
            checkpoint_prints(config, graph, comm.rank, raws[0]),
            crossings[0][0].y,
            comm.stats.as_dict,
        )
    del raws  # nothing below may read the raw labels
    shards = [shard for shard, _ in crossings]
    admm = admm_config(config, shards[0].columns)
    cvs: list[CVResult | None] = [None] * len(ids)
    if config.cv:
        done = block_cross_validation(block, shards, config, graph, admm, on_progress)
        admm = replace(admm, lam=done[0].selected)
        cvs = list(done)
        block.reset_traffic()  # the final fit's counters start at zero, as without --cv
    outcomes = fit_private_block(
        block,
        crossings,
        keep_prob=config.keep_probability,
        loss=config.loss,
        admm=admm,
        graph=graph,
        on_progress=on_progress,
        start_state=None if resumed is None else resumed.state,
        on_round=on_round,
    )
    return [JobOutcome(o.release, o.oracle, cv) for o, cv in zip(outcomes, cvs, strict=True)]


def block_cross_validation(
    block: Block,
    shards: Sequence[PrivateShard],
    config: RunConfig,
    graph: Any,
    admm: ADMMConfig,
    on_progress: Any,
) -> list[CVResult]:
    """``--cv K`` on a block: each machine's own folds (from its fold stream), the network's
    CV curve and selected lambda, from the randomized shards only; the block holding
    machine 0 prints a line per fold when there is progress to show."""
    assert config.cv is not None  # called with --cv K only
    problems = [
        local_problem(
            shard,
            lam=admm.lam,
            loss=config.loss,
            keep_prob=config.keep_probability,
            n_machines=graph.number_of_nodes(),
        )
        for shard in shards
    ]
    folds = [
        assign_folds(len(shard.y), config.cv, streams.machine_fold_stream(config.seed, rank))
        for rank, shard in zip(block.edges.ids.tolist(), shards, strict=True)
    ]
    verbose = on_progress is not None and 0 in block.edges.ids
    groups = problems[0][1]
    return cross_validate(
        block,
        graph,
        [data for data, _ in problems],
        groups.grp_ptr,
        groups.grp_indices,
        shards[0].group_weights,
        folds,
        config.cv,
        admm,
        path=cv_path(config),
        on_fold=partial(print_cv_fold, config.cv) if verbose else None,
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
    if config.standardize:  # the fit's columns (absent otherwise: earlier checkpoints resume)
        settings["standardize"] = True
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
