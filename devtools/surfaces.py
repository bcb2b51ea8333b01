"""Every surface the main job can produce: what it prints, writes and sends, under any option.

This is the one inventory of the job's outputs. The release-boundary tests iterate it
(tests/test_release_invariance.py): for every surface marked ``released`` they hold the
randomized labels fixed, vary the raw labels *and* the randomness that produced the randomized
labels from them, and require identical bytes. A new output must be added here, or those tests
fail (a RunConfig path option that is neither a surface nor an input is refused by
tests/test_release_invariance.py::test_every_path_option_is_classified).

``released``: inside the release boundary, i.e. a function of public inputs (features, public
parameters and files, the graph) and the randomized labels only; under ``--privacy record`` of
public inputs (not the features) and the noisy thetas (tests/test_release_invariance.py holds
those fixed instead). The surfaces outside it are
the oracle (raw-label diagnostics a simulation asks for) and rank 0's delivery of raw rows in a
simulation (it stands for every machine reading its own; with ``--data 'part-{rank}.npz'``
nothing is sent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dpnet.cli import RunConfig


@dataclass(frozen=True)
class Surface:
    """One output of the main job."""

    name: str
    kind: Literal["stream", "file", "directory", "message", "work"]
    option: str | None  # the RunConfig field that asks for it; None: every run has it
    released: bool  # inside the release boundary
    holds: str


SURFACES: tuple[Surface, ...] = (
    Surface("stdout", "stream", None, True, "the summary lines; 'results written to'"),
    Surface(
        "stderr",
        "stream",
        None,
        True,
        "progress lines, --cv fold lines, warnings, one-line errors",
    ),
    Surface(
        "neighbour messages",
        "message",
        None,
        True,
        "every buffer a machine sends a neighbour: ADMM iterates, termination waves, network "
        "sums (--cv), stop notes",
    ),
    Surface(
        "final gather",
        "message",
        None,
        True,
        "what each machine sends rank 0 at the end: its MachineRelease and CVResult",
    ),
    Surface(
        "operations",
        "work",
        None,
        True,
        "what each process computes on the rows (loss evaluations and their sizes, Newton "
        "solves and factorizations): it sets when every message leaves, so it is released",
    ),
    Surface("results", "file", "output", True, "the results JSON (dpnet.cli.report)"),
    Surface("plot", "file", "plot", True, "the convergence figure"),
    Surface("cv plot", "file", "cv_plot", True, "the cross-validation curve"),
    Surface(
        "checkpoints",
        "directory",
        "checkpoint",
        True,
        "machine-R/round-T.npz: loop state, randomized labels, traffic counters, "
        "fingerprints (dpnet.cli.checkpoint)",
    ),
    Surface(
        "budget files",
        "file",
        "budget_file",
        True,
        "each machine's budget file ({rank}): its cap and one line per job, the job's "
        "(epsilon, delta) and public description (dpnet.privacy.budget_file)",
    ),
    Surface(
        "oracle",
        "file",
        "oracle_output",
        False,
        "raw-label diagnostics (dpnet.cli.oracle): outside the guarantee, says so in every field",
    ),
    Surface(
        "oracle gather",
        "message",
        "oracle_output",
        False,
        "each machine's MachineOracle, sent to rank 0 only for the oracle file",
    ),
    Surface(
        "shard delivery",
        "message",
        None,
        False,
        "rank 0's delivery of each machine's raw rows from one --data file or synthetic data "
        "(a simulation of machines that read their own; none with {rank} files)",
    ),
)

INPUT_PATH_OPTIONS = ("topology", "data", "groups", "test_data", "resume")
"""RunConfig options naming files the job reads (never writes)."""

NON_PATH_OPTIONS = ("labels",)
"""RunConfig string options that are not paths."""


def active_surfaces(config: RunConfig) -> list[Surface]:
    """The surfaces a run with ``config`` produces; the simulated backend sends no messages
    (its machines are arrays of one process)."""
    return [
        s
        for s in SURFACES
        if (s.option is None or getattr(config, s.option))
        and not (config.backend == "simulated" and s.kind == "message")
    ]
