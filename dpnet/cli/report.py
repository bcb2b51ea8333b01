"""Rank 0's report of a finished run: the results dict, its JSON file and the summary lines.

Release boundary: the report is built from public inputs (config, graph, PublicSetUp) and the
machines' MachineRelease objects only, which were computed from randomized labels; nothing
here can reach a raw label (docs/privacy.md, "The release boundary").
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import numpy as np

from dpnet import streams
from dpnet.cli.config import RunConfig
from dpnet.cli.evaluation import accuracy_estimate
from dpnet.cli.provenance import run_provenance
from dpnet.cli.setup import PublicSetUp
from dpnet.data.labels import LabelDomain
from dpnet.decentralized.admm import ROUND_STEPS, MachineResult, ProgressRecord
from dpnet.decentralized.columns import PublicColumns
from dpnet.decentralized.cv import CVResult
from dpnet.decentralized.machine import (
    RR_PROTECTS,
    RR_RELATION,
    MachineRelease,
    consensus_model,
    privacy_ledger,
)
from dpnet.errors import ConfigError
from dpnet.penalties.group import groups_from_labels, objective_penalty, selected_groups
from dpnet.privacy.modes import (
    RECORD_DISTANCE,
    RECORD_WORK,
    STANDARDIZE_SHARE,
    RecordPrivacy,
)

if TYPE_CHECKING:  # rank 0 imports the accounting when it builds the report
    from dpnet.privacy.ledger import PrivacyLedger

STOP_WARNINGS = {
    "non-finite": "an iterate or objective became NaN or inf: the run stopped at once and the "
    "coefficients are not an estimate (scale the columns: --standardize, or check --lam / --c)",
    "diverged": "the iterates ran away (||theta|| > --max-coef-norm): the objective may have "
    "no minimiser (the unbiased loss at small epsilon can be unbounded below); the "
    "coefficients are not an optimum",
    "max_rounds": "--max-rounds reached before the residuals fell below --tol: the "
    "coefficients are not the optimum",
}
FROZEN_HINT = " (a --c far above the default freezes the iterates: leave --c out)"
FEATURES_NOTE = (
    "features are NOT protected: randomized response privatises labels only "
    "(epsilon-label-DP for one replaced label)"
)
RELEASE_NOTE = (
    "everything in this file, on stdout and in the plot is a function of public "
    "inputs (features, parameters, files declared public, the graph) and of the "
    "randomized labels only"
)
NOT_PRIVATE_RELEASE_NOTE = (
    "not private (--epsilon inf): everything in this file, on stdout and in the plot is "
    "computed from the labels as given"
)
RECORD_RELEASE_NOTE = (
    "everything in this file, on stdout and in the plot is a function of public inputs (the "
    "graph, parameters, files declared public) and of the noisy thetas (with --standardize "
    "also the noisy column sums; and randomized labels) only; the objective, which reads the "
    "rows, is not released"
)
TIMING_NOTE = (
    "timings: every round's operations are set by public numbers (the theta step takes a "
    "public count of gradient steps), but wall-clock seconds in this file and the times at "
    "which messages arrive still vary with the hardware, the load and the latency of "
    "floating-point operations on particular values; like other DP libraries dpnet does not "
    "defend such side channels"
)
CV_LEDGER_NOTE = "cross-validation: post-processing of the randomized labels, no extra privacy cost"
FILE_MODE = 0o644


SIMULATED_TIMES = (
    "simulated: one process did every machine's work (dpnet.cli.simulation); a machine's seconds "
    "are 1/J of it, its communication is counted, not timed"
)


class ProgressPrinter:
    """One progress line per call on stderr (results and the summary go to stdout): round,
    objective (none under record-level privacy: NaN, not released), residuals, the time since
    set-up began, and from the second line on the time left if the run went on to
    ``max_rounds`` at the pace since the first line (it stops earlier once converged)."""

    def __init__(self, max_rounds: int) -> None:
        self.max_rounds = max_rounds
        self.started = time.perf_counter()
        self.first: tuple[int, float] | None = None  # (round, clock) of the first line

    def __call__(self, record: ProgressRecord) -> None:
        now = time.perf_counter()
        if self.first is None:
            self.first = (record.round, now)
        rounds, seconds = record.round - self.first[0], now - self.first[1]
        left = max(self.max_rounds - record.round, 0) * seconds / rounds if rounds > 0 else None
        objective = "" if math.isnan(record.objective) else f"objective {record.objective:.8f}  "
        line = (
            f"round {record.round:5d}  {objective}"
            f"primal {record.primal_residual:.2e}  dual {record.dual_residual:.2e}  "
            f"{_duration(now - self.started)}"
            + ("" if left is None else f", at most {_duration(left)} left")
        )
        # one write, newline included: print() writes the text and the newline apart, and a
        # signal between the two put the job's last line ("dpnet: interrupted ...") after
        # this one's text, on the same line (CI: the line was lost among the progress lines)
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _duration(seconds: float) -> str:
    """``12.3 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min {int(seconds % 60):02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def print_cv_fold(k: int, fold: int, rounds: np.ndarray, reasons: tuple[str, ...]) -> None:
    """One line per fold of ``--cv k`` (stderr): the fits of its path and how many did not
    converge."""
    unconverged = sum(r != "converged" for r in reasons)
    print(
        f"cv fold {fold + 1}/{k}: {len(rounds)} lambdas, {int(rounds.sum())} rounds"
        + (f", {unconverged} not converged" if unconverged else ""),
        file=sys.stderr,
        flush=True,
    )


def _privacy_block(config: RunConfig, public: PublicSetUp, ledger: PrivacyLedger) -> dict[str, Any]:
    seeded = (
        None
        if config.seed is None
        else (
            f"seeded run (--seed {config.seed}): every flip and every noise draw is a function "
            "of the seed, so the guarantee does NOT hold against anyone who knows it"
        )
    )
    mode = config.privacy_mode
    if isinstance(mode, RecordPrivacy):  # the block of its noisy thetas
        return _record_privacy_block(config, mode, ledger, seeded, public.columns)
    if not mode.private:  # --epsilon inf, asked for: say so plainly, claim nothing
        return {
            "mechanism": "none: --epsilon inf, every machine's labels used as given",
            "keep_prob": 1.0,
            "epsilon_requested": None,
            "epsilon_per_machine": None,
            "guarantee": mode.guarantee,
            "protected": "nothing",
            "not_protected": "labels and features: this run is not private",
            "seed": seeded or "no seed",
            "label_domain": public_label_domain(config),
            "release_boundary": NOT_PRIVATE_RELEASE_NOTE,
            "public_inputs": _public_inputs(config),
            "loss": config.loss,
            "ledger": ledger.to_dict(),
        }
    return {
        "mechanism": "randomized response on labels, applied by each machine locally",
        "keep_prob": config.keep_probability,
        # as asked, and as spent: the budget of the keep probability (a double), <= the ask
        "epsilon_requested": None if math.isinf(mode.epsilon) else mode.epsilon,
        "epsilon_per_machine": None if math.isinf(config.label_epsilon) else config.label_epsilon,
        "neighbouring_relation": mode.neighbours,
        "guarantee": f"{mode.guarantee}; parallel composition over disjoint shards",
        "protected": mode.protects,
        "not_protected": FEATURES_NOTE,
        "seed": seeded or "no seed: every machine drew its flips from its own OS entropy",
        "label_domain": public_label_domain(config),
        "release_boundary": RELEASE_NOTE,
        "public_inputs": _public_inputs(config),
        "loss": config.loss,
        "ledger": ledger.to_dict(),
    }


def _record_privacy_block(
    config: RunConfig,
    mode: RecordPrivacy,
    ledger: PrivacyLedger,
    seeded: str | None,
    columns: PublicColumns | None,
) -> dict[str, Any]:
    """The privacy block of ``--privacy record`` (docs/privacy.md, "Record-level privacy")."""
    multiplier = config.theta_noise_multiplier
    assert multiplier is not None
    p = config.keep_probability
    standardized = columns is not None and columns.row_clip is not None
    return {
        "mechanism": "Gaussian noise on every theta a machine sends, each round (discrete "
        "Gaussian on a grid); rows scaled to norm <= --row-bound; everything else a machine "
        "sends is computed from released thetas"
        + (" and the released column sums (--standardize)" if standardized else ""),
        "epsilon_per_machine": mode.epsilon,
        "delta": mode.delta,
        "exact_delta_at_epsilon": mode.exact_delta(config.rounds),
        "rounds_budget": config.rounds,
        "noise_multiplier": multiplier,
        "row_bound": config.row_bound,
        "sensitivity": "2 L sqrt(R^2 + 1) / (n c d_j) per round (L the loss's "
        "Lipschitz bound, n the training rows, c the round's penalty, d_j = degree + 1"
        + (
            "; R here the standardized rows' bound standardization.row_clip)"
            if standardized
            else ")"
        ),
        "standardization": _record_standardization(mode, columns),
        "neighbouring_relation": mode.neighbours,
        "guarantee": f"{mode.guarantee}, per machine; parallel composition over disjoint "
        "shards; a run that stops before --max-rounds is post-processing of one that ran them",
        "distance": RECORD_DISTANCE,
        "work": RECORD_WORK,
        "protected": mode.protects,
        "labels": "randomized response too, keep probability "
        f"{p:.6g} (epsilon {config.label_epsilon:.6g} label-DP)"
        if p < 1.0
        else "no randomized response (the record guarantee covers them)",
        "not_protected": TIMING_NOTE,
        "seed": seeded or "no seed: every machine drew its noise from its own OS entropy",
        "label_domain": public_label_domain(config),
        "release_boundary": RECORD_RELEASE_NOTE,
        "public_inputs": _public_inputs(config),
        "loss": config.loss,
        "ledger": ledger.to_dict(),
    }


def public_label_domain(config: RunConfig) -> str:
    return LabelDomain.parse(config.labels).describe()


def _public_inputs(config: RunConfig) -> list[str]:
    items = ["the graph", "the configuration"]
    if config.privacy_mode.features_public:
        items.insert(0, "features of every row")
    if config.test_data is not None:
        items.append(f"--test-data {config.test_data} (declared public: labels used as given)")
    return items


def _record_standardization(
    mode: RecordPrivacy, columns: PublicColumns | None
) -> dict[str, Any] | None:
    """--standardize under --privacy record: its release (docs/privacy.md, "Standardization
    under record privacy"); None without it."""
    if columns is None or columns.row_clip is None:
        return None
    return {
        "mechanism": "every machine released the sums of its rows' columns and of their "
        "squares (rows scaled to norm <= --row-bound R), each with Gaussian noise (discrete "
        "Gaussian on a grid); the centre and scale are computed from the released sums alone",
        "sensitivity": "2 R for the column sums, sqrt(2) R^2 for the sums of squares "
        "(replace one record)",
        "noise_multiplier": mode.column_noise_multiplier,
        "budget_share": f"{STANDARDIZE_SHARE:g} of the budget's Gaussian-DP mu^2 (the thetas "
        "take the rest: the total is the (epsilon, delta) above)",
        "row_clip": columns.row_clip,
    }


def _standardization(columns: PublicColumns | None) -> dict[str, list[float]] | None:
    """``--standardize``: every column's centre and divisor over all training rows (public
    under label privacy; under record privacy computed from the released column sums), which
    the fit's columns (x - center) / scale used; else None."""
    if columns is None or columns.scale is None:
        return None
    return {"center": columns.shift.tolist(), "scale": columns.scale.tolist()}


def build_report(
    config: RunConfig,
    topo: dict[str, Any],
    public: PublicSetUp,
    releases: list[MachineRelease],
    wall_seconds: float,
    backend: str,
    baselines: dict[str, Any] | None = None,
    cross_validation: list[CVResult] | None = None,
    *,
    charges: Sequence[dict[str, Any]] = (),
    charges_delta: float | None = None,
) -> dict[str, Any]:
    """Rank 0: the results file's content (see docs/results-file.md); with
    ``cross_validation`` (every machine's CVResult, --cv) the fit's lambda is the selected one;
    ``charges``: releases of the baselines on a machine's rows (``PrivacyLedger.record``
    arguments), composed in the run's ledger at ``charges_delta`` (dpnet.cli.release)."""
    results = [r.result for r in releases]
    cv = None if cross_validation is None else cross_validation[0]
    lam = config.lam if cv is None else cv.selected
    J = len(results)
    z_all = np.stack([r.z for r in results])
    theta_all = np.stack([r.theta for r in results])
    coef, intercept = consensus_model(releases)
    grp_ptr, grp_indices = groups_from_labels(public.group_labels)
    selected = selected_groups(coef, grp_ptr, grp_indices)
    fitted = coef if public.columns is None else public.columns.fitted_coef(coef)
    penalty = objective_penalty(lam, fitted, grp_ptr, grp_indices, public.group_weights)
    mode = config.privacy_mode
    noisy_objective = (
        float(sum(r.local_objective for r in results) + penalty)
        if mode.releases_objective
        else None
    )
    accuracy, count_event = None, None
    if public.evaluation is not None and public.evaluation.n_samples:
        # private features: the held-out rows are scored through a noisy count
        rng = None if mode.features_public else streams.holdout_count_stream(config.seed, J)
        accuracy, count_event = accuracy_estimate(public.evaluation, coef, intercept, rng)
        del rng  # made for the one draw
    ledger = privacy_ledger(
        releases,
        public.holdout_event,
        count_event,
        delta=charges_delta if mode.guarantee_delta is None else mode.guarantee_delta,
    )
    for charge in charges:
        ledger.record(**charge)
    if cv is not None:
        from dp_accounting import dp_event

        ledger.record(
            dp_event.NoOpDpEvent(),
            label=CV_LEDGER_NOTE,
            relation=RR_RELATION,
            protects=RR_PROTECTS,
            guarantee="post-processing",
        )
    # times are this process's: a resumed run timed only the rounds after its checkpoint
    per_round = [r.total_seconds / max(r.rounds - r.start_round, 1) for r in results]
    comm_round = [r.traffic["comm_seconds"] / max(r.rounds - r.start_round, 1) for r in results]
    cpu_round = [r.compute_cpu_seconds / max(r.rounds - r.start_round, 1) for r in results]
    return {
        "dpnet_version": __import__("dpnet").__version__,
        "backend": backend,
        "provenance": run_provenance(),
        "config": config.as_dict(),
        "seed": config.seed,
        "topology": {**topo, "spec": config.topology},
        "privacy": _privacy_block(config, public, ledger),
        "machines": [
            {
                "rank": r.rank,
                "host": r.host,
                "rows": r.n_rows,
                "rounds": r.rounds,
                "total_seconds": r.total_seconds,
                "compute_seconds": r.compute_seconds,
                "compute_cpu_seconds": r.compute_cpu_seconds,
                "startup_seconds": r.startup_seconds,
                **r.traffic,
                "bytes_per_round": r.traffic["bytes_sent"] / max(r.rounds, 1),
            }
            for r in results
        ],
        "rounds": results[0].rounds,
        "resumed_from_round": results[0].start_round,
        "stop_reason": results[0].stop_reason,
        # the same on every machine: they change c in the same rounds
        "penalty": None if results[0].penalty is None else results[0].penalty.as_dict(),
        "objective": {"on_randomized_labels": noisy_objective},
        "standardization": _standardization(public.columns),
        "data_layout": public.data_layout,
        "max_consensus_gap": float(np.abs(z_all - np.append(coef, intercept)).max()),
        "max_theta_z_gap": float(np.abs(theta_all - z_all).max()),
        "test_accuracy": accuracy,
        "n_train": sum(r.n_rows for r in results),
        "n_test": None if public.evaluation is None else public.evaluation.n_samples,
        "selected_groups": selected.tolist(),
        "column_groups": public.group_labels.tolist(),  # coef[k] is in group column_groups[k]
        # public: the CSV header's names, the labels --groups gave (else null)
        "feature_names": None if public.feature_names is None else list(public.feature_names),
        **_group_labels(public, selected),
        "coef": coef.tolist(),
        "intercept": intercept,
        "timing": {
            "per_machine": SIMULATED_TIMES if backend == "simulated" else "measured",
            "wall_seconds": wall_seconds,
            "seconds_per_round": float(np.mean(per_round)),
            "comm_seconds_per_round": float(np.mean(comm_round)),
            "compute_seconds_per_round": float(np.mean(per_round) - np.mean(comm_round)),
            # CPU time outside communication: what a machine on a core of its own spends
            "compute_cpu_seconds_per_round": float(np.mean(cpu_round)),
            # the job's start to the first round, slowest machine (dpnet.run.main: imports,
            # MPI, data, set-up); every result is stamped by pipeline._timed_startup
            "startup_seconds": max(cast(float, r.startup_seconds) for r in results),
            "cpu_seconds_per_round_by_step": _step_split(results),
        },
        "history": [vars(h) for h in results[0].history],
        "baselines": baselines or {},
        "n_machines": J,
        **({} if cross_validation is None else {"cross_validation": _cv_block(cross_validation)}),
    }


def _group_labels(public: PublicSetUp, selected: np.ndarray) -> dict[str, list[Any] | None]:
    """Each column's and each selected group's label as --groups gave it (null without)."""
    names = public.group_names
    if names is None:
        return {"column_group_labels": None, "selected_group_labels": None}
    return {
        "column_group_labels": [names[g] for g in public.group_labels.tolist()],
        "selected_group_labels": [names[g] for g in selected.tolist()],
    }


def _step_split(results: list[MachineResult]) -> dict[str, float] | None:
    """Mean over machines of each round step's CPU seconds per round (ROUND_STEPS, then
    communication), None where the backend does not time the steps (the simulator)."""
    if any(r.step_cpu_seconds is None for r in results):
        return None
    rounds = [max(r.rounds - r.start_round, 1) for r in results]
    split = {
        step: float(np.mean([_seconds(r)[step] / k for r, k in zip(results, rounds, strict=True)]))
        for step in ROUND_STEPS
    }
    comm = [r.traffic["comm_cpu_seconds"] / k for r, k in zip(results, rounds, strict=True)]
    return {**split, "communication": float(np.mean(comm))}


def _seconds(result: MachineResult) -> dict[str, float]:
    assert result.step_cpu_seconds is not None
    return result.step_cpu_seconds


def _cv_block(parts: list[CVResult]) -> dict[str, Any]:
    """The network's CV curve (every machine holds the same; rank 0's is reported) and each
    machine's CV traffic."""
    cv = parts[0]
    return {
        "K": int(len(cv.fold_sizes)),
        "fold_sizes": cv.fold_sizes.tolist(),
        "loss": "validation loss per row: the training loss on the randomized labels",
        "grid": cv.grid.tolist(),
        "grid_source": cv.grid_source,
        "mean": cv.mean.tolist(),
        "standard_error": cv.se.tolist(),
        "fold_losses": cv.fold_losses.tolist(),
        "lambda_min": cv.lambda_min,
        "lambda_1se": cv.lambda_1se,
        "rule": cv.rule,
        "lambda_selected": cv.selected,
        "rounds": cv.rounds.tolist(),
        "fits_not_converged": int(sum(r != "converged" for fold in cv.stop_reasons for r in fold)),
        "machines": [{"rank": j, **part.traffic} for j, part in enumerate(parts)],
        "privacy": CV_LEDGER_NOTE,
    }


def check_output_paths(config: RunConfig) -> None:
    """Before the first round: every output path (--output, --oracle-output, --plot,
    --cv-plot) can be written in a directory that exists (none is created) and is not an
    existing non-regular file (a device, a pipe: the atomic rename would replace it), so that a
    bad path never costs a whole run (ConfigError naming the option)."""
    outputs = {
        "--output": config.output,
        "--oracle-output": config.oracle_output,
        "--plot": config.plot,
        "--cv-plot": config.cv_plot,
    }
    given = [(option, Path(path)) for option, path in outputs.items() if path]
    for i, (option, path) in enumerate(given):
        if path.is_dir():
            raise ConfigError(f"{option} {path} is a directory; give a file name")
        if path.exists() and not path.is_file():  # a device or a pipe: rename would replace it
            raise ConfigError(f"{option} {path} is not a regular file; give a file name")
        if any(path.resolve() == other.resolve() for _, other in given[:i]):
            raise ConfigError(f"{option} {path} is also another output's file")
        folder = path.parent
        if not folder.is_dir():  # never created: a typo in a path would be a new tree
            what = "is not a directory" if folder.exists() else "does not exist"
            raise ConfigError(f"{option} {path}: the directory {folder} {what}")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ConfigError(f"{option} {path}: no permission to write in {folder}")
    for option, plot in (("--plot", config.plot), ("--cv-plot", config.cv_plot)):
        if not plot:
            continue
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        formats = FigureCanvasAgg.get_supported_filetypes()
        suffix = Path(plot).suffix.lower().lstrip(".")
        if suffix not in formats:
            raise ConfigError(
                f"{option} {plot}: unknown image format {suffix!r}; use "
                f"one of {', '.join(sorted(formats))}"
            )


def write_atomic(path: str | Path, write: Callable[[IO[bytes]], object]) -> None:
    """``write(handle)`` into a temporary file in the same folder, then rename: the file at
    ``path`` is the old one or the complete new one, never half of it (a full disk, a signal,
    a crash while writing); the temporary file is removed on any failure.

    The file gets mode 0644 (less what the umask removes), like a file created by ``open``:
    mkstemp's 0600 would make results unreadable to anyone but their owner.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, FILE_MODE & ~umask)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, payload: dict[str, Any]) -> None:
    """The JSON of ``payload`` (:func:`strict_json`), written by :func:`write_atomic`."""
    text = json.dumps(strict_json(payload), indent=2, allow_nan=False)
    write_atomic(path, lambda handle: handle.write(text.encode()))


def strict_json(obj: Any) -> Any:
    """``obj`` with numpy values as Python ones and non-finite floats as JSON-valid values:
    NaN -> null, +-inf -> "inf" / "-inf" (the ledger's convention): the file is valid JSON."""
    if isinstance(obj, dict):
        return {str(k): strict_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [strict_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return strict_json(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def summary_lines(report: dict[str, Any]) -> list[str]:
    priv = report["privacy"]
    private = priv["epsilon_per_machine"] is not None or "rounds_budget" in priv
    return [
        f"dpnet: {report['n_machines']} machine{'s' if report['n_machines'] != 1 else ''} on "
        f"'{report['topology']['name']}' "
        f"({report['backend']}), {report['rounds']} rounds, stop: {report['stop_reason']}",
        f"  {_objective_text(report['objective']['on_randomized_labels'], private)}, "
        f"test accuracy {_accuracy_text(report['test_accuracy'])}",
        *_cv_lines(report.get("cross_validation")),
        f"  selected groups {report['selected_groups']}",
        f"  max consensus gap {report['max_consensus_gap']:.2e}, "
        f"{report['timing']['seconds_per_round'] * 1e3:.2f} ms/round per machine ("
        f"{'1/J of the simulation; ' if report['backend'] == 'simulated' else ''}"
        f"{report['timing']['comm_seconds_per_round'] * 1e3:.2f} ms communication), "
        f"start-up {report['timing']['startup_seconds']:.2f} s",
        *_step_lines(report["timing"]["cpu_seconds_per_round_by_step"]),
        _privacy_line(priv),
        *([f"  privacy: {priv['seed']}"] if report["seed"] is not None else []),
        *(
            f"  baseline {name}: {line}" if k == 0 else f"  {line}"
            for name, b in report["baselines"].items()
            for k, line in enumerate(b["summary"])
        ),
    ]


def _objective_text(objective: float | None, private: bool) -> str:
    if objective is None:
        return "objective not released (it reads the rows)"
    return f"objective ({'randomized labels' if private else 'labels as given'}) {objective:.6f}"


def _privacy_line(priv: dict[str, Any]) -> str:
    eps = priv["epsilon_per_machine"]
    if "rounds_budget" not in priv:
        if eps is None:  # --epsilon inf
            return f"  privacy: none, {priv['guarantee']}"
        return (
            f"  privacy: randomized response, epsilon = {'inf' if eps is None else f'{eps:.6g}'} "
            f"label-DP per machine; {FEATURES_NOTE}"
        )
    total = priv["ledger"]["total"]
    return (
        f"  privacy: record-level, (epsilon, delta) = ({eps:.6g}, {priv['delta']:.3g}) per machine "
        f"against every other machine, {priv['rounds_budget']} noisy rounds (noise multiplier "
        f"{priv['noise_multiplier']:.4g}){_standardized_text(priv)}; ledger: RDP epsilon "
        f"{total['epsilon']:.4g}, PLD epsilon {_pld_text(total.get('pld_epsilon'))}"
    )


def _standardized_text(priv: dict[str, Any]) -> str:
    """The summary's words for --standardize under record privacy (empty without it)."""
    standardization = priv.get("standardization")
    if standardization is None:
        return ""
    return (
        f" after noisy column sums for --standardize (noise multiplier "
        f"{standardization['noise_multiplier']:.4g})"
    )


def _pld_text(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _step_lines(split: dict[str, float] | None) -> list[str]:
    if split is None:
        return []
    parts = ", ".join(f"{step.replace('_', ' ')} {sec * 1e3:.3f}" for step, sec in split.items())
    return [f"  CPU ms per round (mean machine): {parts}"]


def _cv_lines(cv: dict[str, Any] | None) -> list[str]:
    if cv is None:
        return []
    i_min, i_1se = cv["grid"].index(cv["lambda_min"]), cv["grid"].index(cv["lambda_1se"])
    return [
        f"  cross-validation ({cv['K']}-fold, {len(cv['grid'])} lambdas): lambda_min "
        f"{cv['lambda_min']:.6g} (CV loss {cv['mean'][i_min]:.6f} +- "
        f"{cv['standard_error'][i_min]:.6f}), lambda_1se {cv['lambda_1se']:.6g} "
        f"({cv['mean'][i_1se]:.6f}); fitted with lambda_{cv['rule']} = "
        f"{cv['lambda_selected']:.6g}"
        + (
            f" ({cv['fits_not_converged']} CV fits stopped before --tol)"
            if cv["fits_not_converged"]
            else ""
        )
    ]


def _accuracy_text(accuracy: dict[str, Any] | None) -> str:
    if accuracy is None:
        return "not measured (no held-out rows, no --test-data)"
    return (
        f"{accuracy['estimate']:.3f} +- {accuracy['standard_error']:.3f} "
        f"({accuracy['source']}, n = {accuracy['n']})"
    )
