"""Simulation oracles: diagnostics computed from raw labels, outside the release boundary.

A researcher simulating a deployment wants to know how far the private fit is from the truth:
the objective on the true labels, how many labels randomized response flipped, the accuracy
on the raw held-out labels. None of these is a function of the randomized labels alone (a
flip count is the Hamming distance between raw and randomized labels; a true-label objective
of the released model identifies a changed label exactly), so none is covered by the privacy
guarantee. They are computed only when ``--oracle-output FILE`` is given, written to that file
alone, and every field says so. The machines send their part (flip count, local loss on raw
labels) to rank 0 only in that case.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpnet.cli.config import RunConfig
from dpnet.cli.evaluation import EvaluationSet, predict_pm1
from dpnet.cli.setup import PublicSetUp
from dpnet.decentralized.machine import MachineOracle
from dpnet.penalties.group import groups_from_labels, objective_penalty

NOT_COVERED = "NOT covered by the privacy guarantee (computed from raw labels)"
WARNING = (
    "simulation oracle: every value in this file is computed from raw labels and is "
    "NOT covered by the privacy guarantee; do not publish it"
)


def _field(value: Any, meaning: str) -> dict[str, Any]:
    return {"value": value, "meaning": meaning, "privacy": NOT_COVERED}


def build_oracle_report(
    config: RunConfig,
    public: PublicSetUp,
    oracles: list[MachineOracle],
    coef: np.ndarray,
    intercept: float,
    holdout_raw: np.ndarray | None,
) -> dict[str, Any]:
    """The oracle file's content: each field with its meaning and the privacy caveat."""
    grp_ptr, grp_indices = groups_from_labels(public.group_labels)
    penalty = objective_penalty(config.lam, coef, grp_ptr, grp_indices, public.group_weights)
    fields = {
        "objective_on_true_labels": _field(
            float(sum(o.loss_true_labels for o in oracles) + penalty),
            "logistic objective on the raw training labels: each machine's loss at its final "
            "theta plus the penalty at the consensus",
        ),
        "labels_flipped": _field(
            [o.labels_flipped for o in oracles],
            "per machine, the number of labels randomized response flipped",
        ),
    }
    evaluation: EvaluationSet | None = public.evaluation
    if holdout_raw is not None and evaluation is not None:
        fields["test_accuracy_on_raw_labels"] = _field(
            float(np.mean(predict_pm1(evaluation.X, coef, intercept) == holdout_raw)),
            "accuracy of the released model on the held-out rows' raw labels",
        )
    return {"warning": WARNING, "fields": fields}
