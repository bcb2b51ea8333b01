"""Rank 0's release at the end of the main job: the baselines, the oracle file (if asked), the
results file, the summary and the plots, in that order; the job's exit code.

Release boundary: everything here is built from public inputs and the machines' releases
(:mod:`dpnet.report`); only the oracle file, asked for by name, reads the oracle parts.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Any, cast

import networkx as nx

from dpnet.config import RunConfig
from dpnet.decentralized.cv import CVResult
from dpnet.decentralized.machine import MachineOracle, consensus_model
from dpnet.errors import EXIT_NO_ESTIMATE, EXIT_PLOT_FAILED
from dpnet.job import JobOutcome
from dpnet.network.topology import describe_topology
from dpnet.report import FROZEN_HINT, STOP_WARNINGS, build_report, summary_lines, write_json_atomic
from dpnet.setup import SetUp

NO_ESTIMATE = ("non-finite", "diverged")


def run_baselines(config: RunConfig) -> dict[str, Any]:
    """Rank 0's single-node baselines, each on its own synthetic data with its own ledger."""
    from dpnet.privacy.ledger import PrivacyLedger  # rank 0 only: machines skip the import

    out: dict[str, Any] = {}
    # without --seed the baselines draw OS entropy too (a fixed default would be public)
    seed = config.seed
    eps = 1.0 if config.label_epsilon == float("inf") else config.label_epsilon
    if "median" in config.baselines:
        from dpnet.baselines.median import run_median_baselines

        ledger = PrivacyLedger()
        out["median"] = run_median_baselines(epsilon=eps, seed=seed, ledger=ledger)
        out["median"]["ledger"] = ledger.to_dict()
    if "rdp-admm" in config.baselines:
        from dpnet.baselines.rdp_admm import run_rdp_admm_baselines

        ledger = PrivacyLedger(delta=1e-8)
        out["rdp-admm"] = run_rdp_admm_baselines(epsilon=eps, delta=1e-8, seed=seed, ledger=ledger)
        out["rdp-admm"]["ledger"] = ledger.to_dict()
    return out


def exit_code(stop_reason: str) -> int:
    """0 for an estimate (converged or max_rounds), EXIT_NO_ESTIMATE otherwise."""
    return EXIT_NO_ESTIMATE if stop_reason in NO_ESTIMATE else 0


def to_stdout(text: str) -> None:
    """``text`` and a newline on stdout. A reader that went away (``| head -2``) ends the output,
    not the job: stdout is sent to /dev/null from then on (the Python docs' "Note on SIGPIPE"),
    so the plots are still drawn, the exit code stays the job's and no later flush fails."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def finish(
    config: RunConfig,
    graph: nx.Graph,
    setup: SetUp,
    outcomes: list[JobOutcome],
    wall: float,
    backend: str,
) -> int:
    """Rank 0: the release (report, file, summary, plot) and, if asked, the oracle file."""
    baselines = run_baselines(config) if config.baselines else None
    releases = [o.release for o in outcomes]
    report = build_report(
        config,
        describe_topology(graph),
        setup.public,
        releases,
        wall,
        backend,
        baselines,
        # --cv: every machine has its CVResult
        [cast(CVResult, o.cross_validation) for o in outcomes] if config.cv else None,
    )
    if config.oracle_output:
        from dpnet.oracle import build_oracle_report

        coef, intercept = consensus_model(releases)
        fitted = config  # the oracle's objective uses the fit's lambda: with --cv, the selected
        if config.cv:
            fitted = replace(config, lam=report["cross_validation"]["lambda_selected"])
        write_json_atomic(
            config.oracle_output,
            build_oracle_report(
                fitted,
                setup.public,
                [cast(MachineOracle, o.oracle) for o in outcomes],  # kept: --oracle-output
                coef,
                intercept,
                setup.holdout_raw,
            ),
        )
    if config.output:
        write_json_atomic(config.output, report)
    if not config.quiet or config.output is None:
        written = [f"  results written to {config.output}"] if config.output else []
        to_stdout("\n".join([*summary_lines(report), *written]))
    else:  # --quiet with --output: the summary is in the file, say where
        to_stdout(f"dpnet: results written to {config.output}")
    budgeted = config.privacy == "record" and report["stop_reason"] == "max_rounds"
    if report["stop_reason"] in STOP_WARNINGS and not budgeted:  # also with --quiet
        # (under --privacy record the noise keeps the residuals up: the rounds are the budget)
        reason = report["stop_reason"]
        hint = FROZEN_HINT if reason == "max_rounds" and config.c is not None else ""
        print(
            f"dpnet: warning: stop {reason}: {STOP_WARNINGS[reason]}{hint}",
            file=sys.stderr,
            flush=True,
        )
    from dpnet.plots import plot_convergence, plot_cross_validation

    for path, draw in ((config.plot, plot_convergence), (config.cv_plot, plot_cross_validation)):
        if not path:
            continue
        try:
            draw(report, path)
        except (OSError, ValueError, RuntimeError) as exc:
            kept = f"results in {config.output}" if config.output else "summary above"
            print(
                f"dpnet: error: the plot {path} could not be written "
                f"({type(exc).__name__}: {exc}); the run itself finished ({kept})",
                file=sys.stderr,
                flush=True,
            )
            return EXIT_PLOT_FAILED
    return exit_code(report["stop_reason"])
