"""Figures of a finished run (rank 0 only; matplotlib with the non-interactive Agg backend)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from dpnet.cli.report import write_atomic


def save_figure(fig: Any, path: str | Path) -> None:
    """Render ``fig`` in the format its suffix names, close it, then write the bytes atomically
    (:func:`dpnet.cli.report.write_atomic`: a full disk or an interrupt leaves the previous
    plot, not a truncated one). Rendered first: matplotlib imports while it renders, and a
    signal inside an import ends the job at once (:func:`dpnet.run._raise_signal`), which
    would leave the temporary file behind."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = path.suffix.lstrip(".").lower() or None
    rendered = io.BytesIO()
    try:
        fig.savefig(rendered, format=fmt, dpi=110)
    finally:
        plt.close(fig)
    write_atomic(path, lambda handle: handle.write(rendered.getbuffer()))


def plot_convergence(report: dict[str, Any], path: str | Path) -> None:
    """Convergence from the report's history (every round): the distance of the objective to
    its final value and the primal (consensus) and dual residuals, on log scales. A function
    of the released report only: the plot is inside the release boundary."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = report["history"]
    rounds = np.array([h["round"] for h in history])
    objective = np.array([h["objective"] for h in history], dtype=float)
    fig, (ax_obj, ax_res) = plt.subplots(1, 2, figsize=(10, 4))
    if objective.size and np.isnan(objective).all():  # record-level privacy: not released
        ax_obj.text(0.5, 0.5, "objective not released\n(record-level privacy)", ha="center")
    elif len(objective) > 1:
        # distance to the final value: how far each round was from where the run ended
        gap = np.abs(objective[:-1] - objective[-1])
        shown = gap > 0
        ax_obj.semilogy(rounds[:-1][shown], gap[shown])
    ax_obj.set(
        xlabel="round",
        ylabel="|objective - final objective| (randomized labels)",
        title=f"{report['n_machines']} machines, {report['topology']['name']}",
    )
    ax_res.semilogy(
        rounds,
        [h["primal_residual"] for h in history],
        label="primal (consensus gap max ||Z_j - theta_i||)",
    )
    ax_res.semilogy(rounds, [h["dual_residual"] for h in history], label="dual")
    ax_res.set(
        xlabel="round",
        ylabel="max over machines",
        title=f"stop: {report['stop_reason']} after {report['rounds']} rounds",
    )
    ax_res.legend()
    fig.tight_layout()
    save_figure(fig, path)


def plot_cross_validation(report: dict[str, Any], path: str | Path) -> None:
    """The CV curve of ``--cv``: mean validation loss per lambda (log scale) with +-1 standard
    error bars, lambda_min and lambda_1se marked; from the released report only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cv = report["cross_validation"]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.errorbar(cv["grid"], cv["mean"], yerr=cv["standard_error"], fmt="o-", ms=3, capsize=3)
    ax.axvline(cv["lambda_min"], ls="--", color="C1", label=f"lambda_min {cv['lambda_min']:.3g}")
    ax.axvline(cv["lambda_1se"], ls=":", color="C2", label=f"lambda_1se {cv['lambda_1se']:.3g}")
    ax.set_xscale("log")
    ax.set(
        xlabel="lambda",
        ylabel="validation loss per row (randomized labels)",
        title=f"{cv['K']}-fold cross-validation, {report['n_machines']} machines",
    )
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)
