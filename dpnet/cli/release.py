"""Rank 0's release at the end of the main job: the baselines, the oracle file (if asked), the
results file, the summary and the plots, in that order; the job's exit code.

Release boundary: everything here is built from public inputs and the machines' releases
(:mod:`dpnet.cli.report`); only the oracle file, asked for by name, reads the oracle parts, and
``--baselines rdp-admm`` reads machine 0's raw rows through DP fits that the run's ledger
charges to machine 0 (docs/privacy.md, "The baselines of the main job").
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from typing import Any, cast

import networkx as nx
import numpy as np

from dpnet import streams
from dpnet.cli.config import RunConfig
from dpnet.cli.job import JobOutcome
from dpnet.cli.report import (
    FROZEN_HINT,
    STOP_WARNINGS,
    build_report,
    summary_lines,
    write_json_atomic,
)
from dpnet.cli.setup import SetUp
from dpnet.decentralized.cv import CVResult
from dpnet.decentralized.machine import MachineOracle, MachineRelease, consensus_model
from dpnet.errors import EXIT_NO_ESTIMATE, EXIT_PLOT_FAILED
from dpnet.network.topology import describe_topology
from dpnet.privacy.modes import DEFAULT_DELTA, RecordPrivacy

NO_ESTIMATE = ("non-finite", "diverged")


MEDIAN_DATA = (
    "paper 1's own public synthetic regression data (y = 2 + 3 x1 - 4 x3 + Laplace noise, "
    "x in the unit ball; drawn from the baseline's seed), not the job's: median regression "
    "needs a continuous response and the job's labels are +-1; no record of the job is read"
)


@dataclass(frozen=True)
class Baselines:
    """Rank 0's baselines: what the results file shows (``results``) and the releases of
    machine 0's rows they made (``charges``: keyword arguments of ``PrivacyLedger.record``,
    machine 0), which the run's ledger composes with the job's (docs/privacy.md, "The
    baselines of the main job")."""

    results: dict[str, Any]
    charges: list[dict[str, Any]]
    delta: float | None


def baseline_budget(config: RunConfig) -> tuple[float, float]:
    """(epsilon, delta) of every baseline fit: the job's per-machine spend
    (``privacy_mode.spend()``). A label-private job is pure (delta 0): the Gaussian baselines
    then take the spec's default delta, :data:`~dpnet.privacy.modes.DEFAULT_DELTA`.
    RunConfig.validate refuses --baselines for a non-private job (epsilon inf)."""
    epsilon, delta = config.privacy_mode.spend()
    return epsilon, (delta if delta > 0 else DEFAULT_DELTA)


def rank0_rows(config: RunConfig, setup: SetUp) -> tuple[np.ndarray, np.ndarray]:
    """Machine 0's raw training rows (features, labels in {-1, +1}): its shard as rank 0
    delivered it, or its own file ({rank} in --data), read again."""
    if setup.shards is not None:
        return setup.shards[0].X, setup.shards[0].y_raw
    from dpnet.cli.setup import load_own_shard

    own = load_own_shard(config, 0)
    return own.X, own.y


def run_baselines(config: RunConfig, setup: SetUp, releases: list[MachineRelease]) -> Baselines:
    """Rank 0's single-node baselines at the job's (epsilon, delta) (:func:`baseline_budget`).

    median (paper 1): :data:`MEDIAN_DATA`, its own ledger (three pure epsilon fits). rdp-admm
    (paper 2): the four methods with an established guarantee on machine 0's raw rows, each
    (epsilon, delta)-DP for one row, charged to machine 0 (:class:`Baselines`); rows scaled
    by R = --row-bound under record privacy, else by the largest row norm of machine 0's
    features (public under label privacy). Each is compared with the network's released
    model: the cosine of the coefficients, and the accuracy on the job's evaluation rows when
    measuring it is post-processing (public or randomized labels; a noisy count under record
    privacy would spend the held-out rows' budget again: not measured)."""
    from dpnet.privacy.ledger import PrivacyLedger  # rank 0 only: machines skip the import

    epsilon, delta = baseline_budget(config)
    J = len(releases)
    out: dict[str, Any] = {}
    charges: list[dict[str, Any]] = []
    if "median" in config.baselines:
        from dpnet.baselines.median import run_median_baselines

        ledger = PrivacyLedger()
        median = run_median_baselines(
            epsilon=epsilon, seed=streams.baseline_seed(config.seed, J, 0), ledger=ledger
        )
        errors = [m["l2_error_vs_exact"] for k, m in median["methods"].items() if k != "exact"]
        compares = (
            f"paper 1's three DP median regressions (objective, irls, coordinate), each at the "
            f"job's epsilon {epsilon:.6g}, vs the exact LAD fit on {MEDIAN_DATA}"
        )
        out["median"] = {
            **median,
            "compares": compares,
            "ledger": ledger.to_dict(),
            "summary": [
                f"paper 1's DP median regression at the job's epsilon {epsilon:.6g} vs the "
                f"exact fit, on its own public synthetic regression data (not the job's: "
                f"the job's labels are +-1); L2 distance to it {min(errors):.3g}-"
                f"{max(errors):.3g}; own ledger, pure epsilon {ledger.pure_epsilon():.6g}, "
                "no record of the job read"
            ],
        }
    if "rdp-admm" in config.baselines:
        from dpnet.baselines.rdp_admm import fit_rdp_admm_on_rows

        X, y = rank0_rows(config, setup)
        mode = config.privacy_mode
        if isinstance(mode, RecordPrivacy):
            row_bound = mode.row_bound
        else:  # the features are public under label privacy (all zero: any R scales nothing)
            row_bound = float(np.linalg.norm(X, axis=1).max()) or 1.0
        ledger = PrivacyLedger(delta)
        fits = fit_rdp_admm_on_rows(
            X,
            y,
            epsilon=epsilon,
            delta=delta,
            row_bound=row_bound,
            seed=streams.baseline_seed(config.seed, J, 1),
            ledger=ledger,
            machine=0,
        )
        charges = [_as_charge(r) for r in ledger.releases]
        out["rdp-admm"] = _compare_rdp_admm(config, setup, releases, fits, charges, delta)
    return Baselines(out, charges, delta if charges else None)


def _as_charge(release: Any) -> dict[str, Any]:
    return {
        "event": release.event,
        "label": f"--baselines {release.label} on machine 0's rows",
        "relation": release.relation,
        "protects": release.protects,
        "machine": release.machine,
        "guarantee": release.guarantee,
    }


def _compare_rdp_admm(
    config: RunConfig,
    setup: SetUp,
    releases: list[MachineRelease],
    fits: dict[str, Any],
    charges: list[dict[str, Any]],
    delta: float,
) -> dict[str, Any]:
    """The fits of paper 2's methods beside the network's model, and machine 0's total."""
    from dpnet.cli.evaluation import NOISY_COUNT, accuracy_estimate
    from dpnet.decentralized.machine import privacy_ledger

    epsilon = baseline_budget(config)[0]
    coef, intercept = consensus_model(releases)
    network = np.append(coef, intercept)
    evaluation = setup.public.evaluation
    free = evaluation is not None and evaluation.source != NOISY_COUNT and evaluation.n_samples
    scored = evaluation if free else None
    lines = []
    for name, fit in fits["methods"].items():
        w = np.append(fit["coef"], fit["intercept"])
        norms = float(np.linalg.norm(w) * np.linalg.norm(network))
        fit["cosine_to_network_model"] = float(w @ network) / norms if norms > 0 else None
        fit["test_accuracy"] = (
            None if scored is None else accuracy_estimate(scored, w[:-1], float(w[-1]))[0]
        )
        accuracy = "" if scored is None else f"accuracy {fit['test_accuracy']['estimate']:.3f}, "
        cosine = fit["cosine_to_network_model"]
        lines.append(
            f"  {name}: {accuracy}cosine to the network's coefficients "
            + ("n/a" if cosine is None else f"{cosine:.3f}")
        )
    rank0 = privacy_ledger(releases[:1], delta=delta)  # machine 0's own releases in the job
    for charge in charges:
        rank0.record(**charge)
    total = rank0.accounting(delta, with_pld=False)
    where = (
        f"accuracy on the {scored.source}, as the network's test accuracy"
        if scored is not None
        else "accuracy not measured: no held-out rows, or private ones that only a noisy count "
        "may score"
    )
    return {
        **fits,
        "compares": f"paper 2's single-node methods ({', '.join(fits['methods'])}) on machine "
        f"0's own shard ({fits['rows']} raw rows), each at the job's (epsilon, delta) = "
        f"({epsilon:.6g}, {delta:.3g}), vs the network's model; {where}",
        "machine_0_records": {
            "epsilon": total["epsilon"],
            "delta": delta,
            "label": "machine 0's records: the job's releases and these fits composed "
            "(sequentially: the same rows)",
        },
        "summary": [
            f"paper 2's methods on machine 0's own shard ({fits['rows']} rows), each at the "
            f"job's (epsilon, delta) = ({epsilon:.6g}, {delta:.3g}), vs the network's model "
            f"({where}); ADMM-objP not run (no established guarantee)",
            *lines,
            f"  machine 0's records: (epsilon, delta) = ({total['epsilon']:.4g}, {delta:.3g}) "
            "in total, the job's releases and these fits composed (run ledger, machine 0)",
        ],
    }


def charge_note(report: dict[str, Any], baselines: Baselines) -> None:
    """The privacy block's guarantee and release boundary, amended for machine 0's records
    when a baseline read them."""
    if not baselines.charges:
        return
    rank0 = baselines.results["rdp-admm"]["machine_0_records"]
    priv = report["privacy"]
    priv["guarantee"] += (
        f"; EXCEPT machine 0's rows, which --baselines rdp-admm also read: for their "
        f"{priv['protected']} the run is ({rank0['epsilon']:.6g}, {rank0['delta']:.3g})-DP in "
        "total (the ledger's machine 0)"
    )
    priv["release_boundary"] += (
        "; except baselines.rdp-admm: DP fits on machine 0's raw rows, charged to the ledger "
        "on machine 0"
    )


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
    releases = [o.release for o in outcomes]
    baselines = run_baselines(config, setup, releases) if config.baselines else None
    report = build_report(
        config,
        describe_topology(graph),
        setup.public,
        releases,
        wall,
        backend,
        None if baselines is None else baselines.results,
        # --cv: every machine has its CVResult
        [cast(CVResult, o.cross_validation) for o in outcomes] if config.cv else None,
        charges=() if baselines is None else baselines.charges,
        charges_delta=None if baselines is None else baselines.delta,
    )
    if baselines is not None:
        charge_note(report, baselines)
    if config.oracle_output:
        from dpnet.cli.oracle import build_oracle_report

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
    budgeted = config.privacy_mode.noisy_thetas and report["stop_reason"] == "max_rounds"
    if report["stop_reason"] in STOP_WARNINGS and not budgeted:  # also with --quiet
        # (under --privacy record the noise keeps the residuals up: the rounds are the budget)
        reason = report["stop_reason"]
        hint = FROZEN_HINT if reason == "max_rounds" and config.c is not None else ""
        print(
            f"dpnet: warning: stop {reason}: {STOP_WARNINGS[reason]}{hint}",
            file=sys.stderr,
            flush=True,
        )
    from dpnet.cli.plots import plot_convergence, plot_cross_validation

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
