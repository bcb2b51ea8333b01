"""``python -m tests.fault_entry ARGS``: the main job (``dpnet.run``) with a fault injected
from the environment, for the tests that need a machine to fail or hang mid-run:
DPNET_FAIL_AT="rank:round" makes that machine raise in that round, DPNET_STALL_AT="rank:round"
makes it go silent there (``ADMMConfig.fail_at`` / ``stall_at``). dpnet itself reads neither
variable; :func:`tests.launch.start_job` starts this module when a test sets one of them."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from dpnet import run

if run.launched_by_open_mpi():  # before numpy's BLAS threads start: they inherit the mask
    run._watch_launcher_teardown()

from dpnet.cli import RunConfig, job  # noqa: E402
from dpnet.decentralized import ADMMConfig, PublicColumns  # noqa: E402

Build = Callable[[RunConfig, PublicColumns | None], ADMMConfig]


def _at(variable: str) -> tuple[int, int] | None:
    """(rank, round) from ``variable`` = "rank:round"; None if it is not set."""
    spec = os.environ.get(variable)
    if not spec:
        return None
    rank, _, round_ = spec.partition(":")
    return int(rank), int(round_)


def _with_faults(build: Build) -> Build:
    def admm_config(config: RunConfig, columns: PublicColumns | None) -> ADMMConfig:
        faults = {"fail_at": _at("DPNET_FAIL_AT"), "stall_at": _at("DPNET_STALL_AT")}
        return dataclasses.replace(build(config, columns), **faults)

    return admm_config


if __name__ == "__main__":
    job.admm_config = _with_faults(job.admm_config)
    run.entry()
