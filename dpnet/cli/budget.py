"""``--budget-file``: every machine's budget across jobs (:mod:`dpnet.privacy.budget_file`).

What a job spends on machine j's data is known from the options before any data is read
(:func:`machine_spend`): the basic composition of the releases the run's ledger will record
for those rows (:func:`dpnet.decentralized.machine.privacy_ledger`, the baselines' charges).
Step 1 of :mod:`dpnet.cli.pipeline` checks every machine's file (the job is refused, exit 2,
if any machine's would pass its cap: no machine is charged), then charges each one durably,
before any data is read and so before the first release. A charge is never refunded.
"""

from __future__ import annotations

from dpnet.cli.config import RunConfig
from dpnet.errors import ConfigError
from dpnet.privacy.budget import composed
from dpnet.privacy.budget_file import charge_budget, check_budget
from dpnet.privacy.modes import RecordPrivacy

RANK_PLACEHOLDER = "{rank}"


def machine_spend(config: RunConfig, machine: int) -> tuple[float, float]:
    """(ε, δ) under replace-one that the job spends on machine ``machine``'s rows, by basic
    composition of what the run's ledger records for them:

    - its own releases: randomized response on its labels, ln(p/(1 - p)) (label privacy,
      or record privacy with --keep-prob), and under record privacy the T noisy thetas and,
      with --standardize, the two noisy column releases: (ε, δ) together, the Gaussian-DP
      composition their calibration makes exact (``RecordPrivacy.spend``);
    - machine 0 only: ``--baselines rdp-admm``, four fits on its raw rows, each (ε, δ) at the
      job's budget (docs/privacy.md, "The baselines of the main job");
    - machine 0 only: the held-out rows rank 0 splits off the data (or generates), disjoint
      from its shard: by parallel composition the larger of their cost (randomized response;
      under record privacy the noisy count, ε) and the shard's.

    ε = inf (a job that is not private) passes no finite cap."""
    mode = config.privacy_mode
    label: tuple[float, float] = (mode.label_epsilon, 0.0)
    own = [label]
    holdout = [label]
    if isinstance(mode, RecordPrivacy):
        randomized = [label] if mode.keep_probability < 1.0 else []
        own = [*randomized, mode.spend()]
        holdout = [*randomized, (mode.epsilon, 0.0)]
    shard = composed(*own)
    if machine != 0:
        return shard
    if "rdp-admm" in config.baselines:
        from dpnet.baselines.rdp_admm.experiment import ESTABLISHED_METHODS  # the fits run
        from dpnet.cli.release import baseline_budget  # at the job's budget

        shard = composed(shard, *[baseline_budget(config)] * len(ESTABLISHED_METHODS))
    rest = composed(*holdout)
    return max(shard[0], rest[0]), max(shard[1], rest[1])


def budget_path(config: RunConfig, machine: int) -> str:
    """Machine ``machine``'s budget file: ``--budget-file`` with {rank} replaced."""
    assert config.budget_file is not None  # called with --budget-file only
    return config.budget_file.replace(RANK_PLACEHOLDER, str(machine))


def job_description(config: RunConfig, machine: int, n_machines: int) -> str:
    """The public words a charge is recorded with (options only: no data, seed or clock)."""
    mode = config.privacy_mode
    what = f"{mode.name} privacy" if mode.private else "not private"
    baselines = f", --baselines {','.join(config.baselines)}" if config.baselines else ""
    return f"python -m dpnet.run ({what}{baselines}), machine {machine} of {n_machines}"


def check_budget_paths(config: RunConfig, n_machines: int) -> None:
    """A --budget-file without {rank} for a job of several machines is refused (ConfigError):
    each machine keeps its own budget, and one file for all would be charged once per
    machine (threads, simulated) or be a different file on every host (MPI)."""
    if config.budget_file is None or n_machines == 1:
        return
    if RANK_PLACEHOLDER not in config.budget_file:
        raise ConfigError(
            f"--budget-file {config.budget_file} names one file for {n_machines} machines: "
            "every machine keeps its own budget; put {rank} in the path "
            "(e.g. budget-{rank}.json)"
        )


def machine_budget(config: RunConfig, machine: int, n_machines: int, *, charge: bool) -> None:
    """Machine ``machine``'s file with this job's spend: checked only (nothing written: would it
    take the charge?) or charged durably (never refunded)."""
    step = charge_budget if charge else check_budget
    step(
        budget_path(config, machine),
        machine_spend(config, machine),
        config.budget_cap_pair,
        job_description(config, machine, n_machines),
    )
