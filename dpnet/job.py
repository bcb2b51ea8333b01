"""One machine's work in the main job (backend independent): its own random stream,
randomized response (or, resumed, its stored randomized labels), checkpoints, the ADMM rounds.
The set-up before it is :mod:`dpnet.setup`; the release after it, :mod:`dpnet.report`.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from dpnet import checkpoint
from dpnet.checkpoint import Checkpointer, Resumed
from dpnet.config import RunConfig
from dpnet.decentralized import boundary
from dpnet.decentralized.admm import ADMMConfig
from dpnet.decentralized.boundary import RawShard
from dpnet.decentralized.machine import MachineOutcome, fit_private_shard
from dpnet.errors import ConfigError


def machine_rng(seed_entropy: int | None, rank: int, size: int) -> np.random.Generator:
    """Machine ``rank``'s own stream: child ``rank + 1`` of the run seed (child 0 is rank 0's
    data stream), or fresh OS entropy drawn on this machine when no seed is given."""
    if seed_entropy is None:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence(seed_entropy).spawn(size + 1)[rank + 1])


def admm_config(config: RunConfig) -> ADMMConfig:
    return ADMMConfig(
        lam=config.lam,
        c=config.c,
        adapt_c=config.adapt_c,
        alpha_z=config.alpha_z,
        theta_solver=config.theta_solver,
        beta_steps=config.beta_steps,
        beta_step_size=config.beta_step_size,
        max_rounds=config.max_rounds,
        tol=config.tol,
        max_coef_norm=config.max_coef_norm,
        progress_every=config.progress_every,
        fail_at=fault_injection("DPNET_FAIL_AT"),
        stall_at=fault_injection("DPNET_STALL_AT"),
    )


def machine_main(
    comm: Any,
    raw: RawShard,
    config: RunConfig,
    graph: Any,
    on_progress: Any = None,
    resumed: Resumed | None = None,
) -> MachineOutcome:
    """One machine of the main job: randomized response with its own stream (or, resumed,
    the labels it randomized before), checkpoints if asked, then the ADMM rounds."""
    rng = machine_rng(raw.seed_entropy, comm.rank, comm.size)
    p = config.keep_probability
    part = f"machine {comm.rank}"
    keep_oracle = config.oracle_output is not None
    if resumed is None:
        crossing = boundary.cross_boundary(raw, p, rng, part, keep_oracle=keep_oracle)
    else:
        crossing = boundary.recross_boundary(
            raw, resumed.y_randomized, p, part, keep_oracle=keep_oracle
        )
        rng.bit_generator.state = resumed.rng_state
        comm.stats.restore(resumed.traffic)
    on_round = None
    if config.checkpoint is not None:
        on_round = Checkpointer(
            config.checkpoint,
            comm.rank,
            config.checkpoint_every,
            checkpoint_prints(config, graph, comm.rank, raw),
            crossing[0].y,
            comm.stats.as_dict,
            rng.bit_generator.state,
        )
    del raw  # nothing below may read the raw labels
    return fit_private_shard(
        comm,
        *crossing,
        keep_prob=p,
        loss=config.loss,
        admm=admm_config(config),
        graph=graph,
        on_progress=on_progress,
        start_state=None if resumed is None else resumed.state,
        on_round=on_round,
    )


def checkpoint_prints(config: RunConfig, graph: Any, rank: int, raw: RawShard) -> dict[str, str]:
    """Fingerprints a checkpoint must match: graph, data, and every setting that changes the
    iterates (not --max-rounds: a resumed run may go on longer)."""
    ignored = ("max_rounds", "progress_every", "fail_at", "stall_at")
    settings = {k: v for k, v in asdict(admm_config(config)).items() if k not in ignored}
    settings |= {"keep_prob": config.keep_probability, "loss": config.loss}
    return checkpoint.fingerprints(rank, graph, settings, raw)


def resume_machine(config: RunConfig, graph: Any, rank: int, raw: RawShard, round_: int) -> Resumed:
    """Machine ``rank``'s checkpoint of ``round_`` from ``--resume`` (CheckpointError if it
    is missing, corrupt or of another run)."""
    return checkpoint.load(config.resume, rank, round_, checkpoint_prints(config, graph, rank, raw))


def check_checkpoint_dir(config: RunConfig) -> None:
    """``--checkpoint DIR`` must be a directory this process can create and write, before
    round 1 (ConfigError otherwise)."""
    if config.checkpoint is None:
        return
    path = Path(config.checkpoint)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--checkpoint {path}: cannot create it ({exc.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"--checkpoint {path}: not writable")


def fault_injection(variable: str) -> tuple[int, int] | None:
    """Tests' fault injection from the environment: "rank:round". DPNET_FAIL_AT makes that
    machine raise in that round (abort tests), DPNET_STALL_AT makes it go silent there
    (peer-deadline tests)."""
    spec = os.environ.get(variable)
    if not spec:
        return None
    rank, rnd = spec.split(":")
    return int(rank), int(rnd)
