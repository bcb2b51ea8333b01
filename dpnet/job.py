"""The main job's pieces that do not depend on the backend.

``prepare_problem`` (rank 0): load or generate data, split rows over machines.
``machine_main`` (every machine): randomized response on its own labels with its own random
stream, then the decentralized ADMM. ``build_report`` (rank 0): one JSON-ready dict.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from dpnet.config import RunConfig
from dpnet.data.dataset import GroupData
from dpnet.data.loaders import load_dataset
from dpnet.data.partition import split_rows, train_test_split_indices
from dpnet.data.synthetic import make_group_logistic
from dpnet.decentralized.admm import ADMMConfig, MachineResult, ProgressRecord, run_machine
from dpnet.decentralized.steps import GroupStructure, LocalData, MarginLoss
from dpnet.errors import ConfigError
from dpnet.penalties.group import group_norms, group_penalty, groups_from_labels
from dpnet.privacy.ledger import PrivacyLedger
from dpnet.privacy.mechanisms import randomized_response

SELECT_RTOL = 1e-6
STOP_WARNINGS = {
    "diverged": "the iterates ran away (||theta|| > --max-coef-norm): the objective may have "
                "no minimiser (the unbiased loss at small epsilon can be unbounded below); the "
                "coefficients are not an optimum",
    "max_rounds": "--max-rounds reached before the residuals fell below --tol",
}
RR_RELATION = "replace_one"
RR_PROTECTS = "labels"
FEATURES_NOTE = ("features are NOT protected: randomized response privatises labels only "
                 "(epsilon-label-DP for one replaced label)")


@dataclass(frozen=True)
class Shard:
    """What one machine receives at set-up: its rows and the public problem description."""

    X: np.ndarray
    y: np.ndarray
    n_total: int
    group_labels: np.ndarray
    group_weights: np.ndarray
    seed_entropy: int | None


@dataclass
class Problem:
    """Rank 0's view: training and test data, the shards' row indices, group structure.

    ``train`` and ``parts`` are None when every machine loads its own shard (rank 0 then
    never sees the other machines' rows).
    """

    train: GroupData | None
    test: GroupData | None
    parts: list[np.ndarray] | None
    group_labels: np.ndarray
    group_weights: np.ndarray
    seed_entropy: int | None


def group_weights(groups: np.ndarray, kind: str) -> np.ndarray:
    sizes = np.bincount(groups)
    return np.ones(len(sizes)) if kind == "ones" else np.sqrt(sizes.astype(float))


def prepare_problem(config: RunConfig, n_machines: int) -> Problem:
    """Rank 0: data (synthetic from ``config.seed`` or loaded), test split, row partition."""
    seed_entropy = config.seed
    data_rng = np.random.default_rng(np.random.SeedSequence(config.seed).spawn(1)[0]) \
        if config.seed is not None else np.random.default_rng()
    if config.data is None:
        train = make_group_logistic(config.n_samples, n_groups=config.n_groups,
                                    label_rule=config.label_rule, rng=data_rng).validate()
        test = make_group_logistic(config.n_test, n_groups=config.n_groups,
                                   label_rule=config.label_rule, rng=data_rng).validate() \
            if config.n_test > 0 else None
    else:
        full = load_dataset(config.data, groups=config.groups)
        if config.test_data is not None:
            train = full
            test = load_dataset(config.test_data, groups=config.groups)
            if test.n_features != train.n_features:
                raise ConfigError(f"--test-data has {test.n_features} columns, --data has "
                                  f"{train.n_features}")
        elif config.test_fraction > 0:
            tr, te = train_test_split_indices(full.n_samples, config.test_fraction, data_rng)
            train, test = full.subset(tr), full.subset(te)
        else:
            train, test = full, None
    if train.n_samples < n_machines:
        raise ConfigError(f"{train.n_samples} training rows cannot be split over "
                          f"{n_machines} machines")
    parts = split_rows(train.n_samples, n_machines, sizes=config.shard_sizes)
    return Problem(train, test, parts, train.groups,
                   group_weights(train.groups, config.group_weights), seed_entropy)


def make_shards(problem: Problem) -> list[Shard]:
    tr = problem.train
    return [Shard(np.ascontiguousarray(tr.X[idx]), tr.y[idx].copy(), tr.n_samples, tr.groups,
                  problem.group_weights, problem.seed_entropy) for idx in problem.parts]


RANK_PLACEHOLDER = "{rank}"


def data_per_machine(config: RunConfig) -> bool:
    """``--data 'shard-{rank}.npz'``: every machine loads its own file."""
    return config.data is not None and RANK_PLACEHOLDER in config.data


def load_own_shard(config: RunConfig, rank: int) -> GroupData:
    """Machine ``rank``'s own rows, from ``--data`` with {rank} replaced by its rank."""
    return load_dataset(config.data.replace(RANK_PLACEHOLDER, str(rank)), groups=config.groups)


def check_shards_agree(rows: list[int], groups: list[list[int]]) -> None:
    """All machines' files must describe the same columns and groups (ConfigError if not)."""
    for j, g in enumerate(groups):
        if len(g) != len(groups[0]):
            raise ConfigError(f"machine {j}'s data has {len(g)} columns, machine 0's has "
                              f"{len(groups[0])}")
        if g != groups[0]:
            raise ConfigError(f"machine {j}'s data has other column groups than machine 0's")


def own_data_problem(config: RunConfig, groups: np.ndarray) -> Problem:
    """Rank 0's view when every machine loads its own shard: test data only."""
    test = load_dataset(config.test_data, groups=config.groups) if config.test_data else None
    if test is not None and test.n_features != len(groups):
        raise ConfigError(f"--test-data has {test.n_features} columns, the machines' data "
                          f"{len(groups)}")
    return Problem(None, test, None, groups, group_weights(groups, config.group_weights),
                   config.seed)


def shard_from_own_data(own: GroupData, n_total: int, config: RunConfig) -> Shard:
    return Shard(own.X, own.y, n_total, own.groups,
                 group_weights(own.groups, config.group_weights), config.seed)


def machine_rng(seed_entropy: int | None, rank: int, size: int) -> np.random.Generator:
    """Machine ``rank``'s own stream: child ``rank + 1`` of the run seed (child 0 is rank 0's
    data stream), or fresh OS entropy drawn on this machine when no seed is given."""
    if seed_entropy is None:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence(seed_entropy).spawn(size + 1)[rank + 1])


@dataclass
class MachineOutcome:
    result: MachineResult
    n_flipped: int
    rr_event: Any


def machine_main(comm: Any, shard: Shard, config: RunConfig, diameter: int,
                 on_progress: Any = None) -> MachineOutcome:
    """One machine: randomized response on its own labels, then the ADMM rounds."""
    rng = machine_rng(shard.seed_entropy, comm.rank, comm.size)
    p = config.keep_probability
    noisy_y, event = randomized_response(shard.y, keep_prob=p, rng=rng)
    n_flipped = int(np.count_nonzero(noisy_y != shard.y))
    grp_ptr, grp_indices = groups_from_labels(shard.group_labels)
    thresholds = config.lam * shard.group_weights / (2.0 * comm.size)
    groups = GroupStructure(grp_ptr, grp_indices, thresholds)
    X_aug = np.hstack([shard.X, np.ones((shard.X.shape[0], 1))])
    data = LocalData(X_aug, noisy_y, shard.n_total,
                     MarginLoss(config.loss, p if config.loss == "unbiased" else 1.0))
    admm = ADMMConfig(
        lam=config.lam, c=config.c, adapt_c=config.adapt_c, alpha_z=config.alpha_z,
        theta_solver=config.theta_solver, beta_steps=config.beta_steps,
        beta_step_size=config.beta_step_size, max_rounds=config.max_rounds, tol=config.tol,
        max_coef_norm=config.max_coef_norm,
        progress_every=config.progress_every, fail_at=fault_injection(),
    )
    result = run_machine(comm, data, groups, admm, diameter,
                         on_progress if comm.rank == 0 else None)
    return MachineOutcome(result, n_flipped, event)


def fault_injection() -> tuple[int, int] | None:
    """DPNET_FAIL_AT="rank:round" makes that machine raise in that round (abort tests)."""
    spec = os.environ.get("DPNET_FAIL_AT")
    if not spec:
        return None
    rank, rnd = spec.split(":")
    return int(rank), int(rnd)


def print_progress(record: ProgressRecord) -> None:
    print(f"round {record.round:5d}  objective {record.objective:.8f}  "
          f"primal {record.primal_residual:.2e}  dual {record.dual_residual:.2e}", flush=True)


def _objective(data: GroupData, coef: np.ndarray, intercept: float, lam: float,
               weights: np.ndarray) -> float:
    grp_ptr, grp_indices = groups_from_labels(data.groups)
    margin = data.y * (data.X @ coef + intercept)
    return float(np.logaddexp(0.0, -margin).mean()
                 + 0.5 * lam * group_penalty(coef, grp_ptr, grp_indices, weights))


def build_report(config: RunConfig, graph: nx.Graph, topo: dict[str, Any], problem: Problem,
                 outcomes: list[MachineOutcome], wall_seconds: float, backend: str,
                 baselines: dict[str, Any] | None = None) -> dict[str, Any]:
    """Rank 0: the results file's content (see README, "Results file")."""
    results = [o.result for o in outcomes]
    J = len(results)
    z_all = np.stack([r.z for r in results])
    theta_all = np.stack([r.theta for r in results])
    consensus = z_all.mean(axis=0)
    coef, intercept = consensus[:-1], float(consensus[-1])
    grp_ptr, grp_indices = groups_from_labels(problem.group_labels)
    # a group counts as selected above a relative 1e-6: ADMM zeros are exact only in the limit
    norms = group_norms(coef, grp_ptr, grp_indices)
    selected = np.flatnonzero(norms > SELECT_RTOL * max(1.0, float(np.linalg.norm(coef))))
    noisy_objective = float(sum(r.local_objective for r in results)
                            + 0.5 * config.lam * group_penalty(coef, grp_ptr, grp_indices,
                                                               problem.group_weights))
    ledger = PrivacyLedger()
    for j, o in enumerate(outcomes):
        ledger.record(o.rr_event, label=f"randomized response on machine {j}'s labels",
                      relation=RR_RELATION, protects=RR_PROTECTS, machine=j,
                      guarantee="epsilon-label-DP")
    test_acc = None
    if problem.test is not None and problem.test.n_samples:
        test_acc = float(np.mean(np.where(problem.test.X @ coef + intercept >= 0, 1.0, -1.0)
                                 == problem.test.y))
    per_round = [r.total_seconds / max(r.rounds, 1) for r in results]
    comm_round = [r.traffic["comm_seconds"] / max(r.rounds, 1) for r in results]
    rounds = results[0].rounds
    return {
        "dpnet_version": __import__("dpnet").__version__,
        "backend": backend,
        "config": config.as_dict(),
        "seed": config.seed,
        "topology": {**topo, "spec": config.topology},
        "privacy": {
            "mechanism": "randomized response on labels, applied by each machine locally",
            "keep_prob": config.keep_probability,
            "epsilon_per_machine": None if math.isinf(config.label_epsilon)
            else config.label_epsilon,
            "neighbouring_relation": "replace one label (replace-one), within one machine's shard",
            "guarantee": "epsilon-label-DP per machine; parallel composition over disjoint shards",
            "protected": "labels",
            "not_protected": FEATURES_NOTE,
            "loss": config.loss,
            "ledger": ledger.to_dict(),
        },
        "machines": [
            {"rank": r.rank, "rows": r.n_rows, "labels_flipped": o.n_flipped,
             "rounds": r.rounds, "total_seconds": r.total_seconds,
             "compute_seconds": r.compute_seconds, **r.traffic}
            for r, o in zip(results, outcomes, strict=True)
        ],
        "rounds": rounds,
        "stop_reason": results[0].stop_reason,
        "objective": {
            "on_randomized_labels": noisy_objective,
            # only where rank 0 holds the training data (simulation): otherwise it would be
            # a release of the machines' raw labels
            "on_true_labels": None if problem.train is None else _objective(
                problem.train, coef, intercept, config.lam, problem.group_weights),
        },
        "data_layout": "split by rank 0" if problem.train is not None
        else "each machine loaded its own file",
        "max_consensus_gap": float(np.abs(z_all - consensus).max()),
        "max_theta_z_gap": float(np.abs(theta_all - z_all).max()),
        "test_accuracy": test_acc,
        "n_train": sum(r.n_rows for r in results),
        "n_test": None if problem.test is None else problem.test.n_samples,
        "selected_groups": selected.tolist(),
        "coef": coef.tolist(),
        "intercept": intercept,
        "timing": {
            "wall_seconds": wall_seconds,
            "seconds_per_round": float(np.mean(per_round)),
            "comm_seconds_per_round": float(np.mean(comm_round)),
            "compute_seconds_per_round": float(np.mean(per_round) - np.mean(comm_round)),
        },
        "history": [vars(h) for h in results[0].history],
        "baselines": baselines or {},
        "n_machines": J,
    }


def write_json_atomic(path: str | Path, payload: dict[str, Any]) -> None:
    """Write to a temporary file in the same folder, then rename: never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=2, default=_json_default)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def summary_lines(report: dict[str, Any]) -> list[str]:
    priv = report["privacy"]
    eps = priv["epsilon_per_machine"]
    return [
        f"dpnet: {report['n_machines']} machines on '{report['topology']['name']}' "
        f"({report['backend']}), {report['rounds']} rounds, stop: {report['stop_reason']}",
        f"  objective {_objective_text(report['objective'])}, "
        f"test accuracy {report['test_accuracy']}, selected groups {report['selected_groups']}",
        f"  max consensus gap {report['max_consensus_gap']:.2e}, "
        f"{report['timing']['seconds_per_round'] * 1e3:.2f} ms/round "
        f"({report['timing']['comm_seconds_per_round'] * 1e3:.2f} ms communication)",
        f"  privacy: randomized response, epsilon = {'inf' if eps is None else f'{eps:.6g}'} "
        f"label-DP per machine; {FEATURES_NOTE}",
        *([f"  WARNING: {STOP_WARNINGS[report['stop_reason']]}"]
          if report["stop_reason"] in STOP_WARNINGS else []),
        *(f"  baseline {name}: own synthetic data, own ledger, total "
          f"{_ledger_total(b.get('ledger', {}))}" for name, b in report["baselines"].items()),
    ]


def _objective_text(objective: dict[str, Any]) -> str:
    if objective["on_true_labels"] is not None:
        return f"(true labels) {objective['on_true_labels']:.6f}"
    return f"(randomized labels) {objective['on_randomized_labels']:.6f}"


def _ledger_total(ledger: dict[str, Any]) -> str:
    total = ledger.get("total", {})
    if "epsilon" in total:
        return f"epsilon {total['epsilon']} at delta {total.get('delta')}"
    return f"pure epsilon {total.get('pure_epsilon')}"
