"""Figures of a finished run (rank 0 only; matplotlib with the non-interactive Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_convergence(report: dict[str, Any], path: str | Path) -> None:
    """Objective and residuals against the round, from the report's progress history (a
    function of the released report only: the plot is inside the release boundary)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = report["history"]
    rounds = [h["round"] for h in history]
    fig, (ax_obj, ax_res) = plt.subplots(1, 2, figsize=(10, 4))
    ax_obj.plot(rounds, [h["objective"] for h in history], marker=".")
    ax_obj.set(xlabel="round", ylabel="network objective (randomized labels)",
               title=f"{report['n_machines']} machines, {report['topology']['name']}")
    ax_res.semilogy(rounds, [h["primal_residual"] for h in history], label="primal")
    ax_res.semilogy(rounds, [h["dual_residual"] for h in history], label="dual")
    ax_res.set(xlabel="round", ylabel="max residual over machines",
               title=f"stop: {report['stop_reason']} after {report['rounds']} rounds")
    ax_res.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
