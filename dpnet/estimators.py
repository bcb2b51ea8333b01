"""scikit-learn style front end of the decentralized group-lasso logistic ADMM (in-process)."""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np

from dpnet.config import RunConfig
from dpnet.data.dataset import GroupData, to_pm1
from dpnet.data.partition import split_rows
from dpnet.decentralized.admm import ADMMConfig
from dpnet.decentralized.boundary import RawShard
from dpnet.job import PublicSetUp, group_weights, machine_main
from dpnet.network.inprocess import run_in_process
from dpnet.network.topology import (
    DEFAULT_MACHINES,
    DEFAULT_TOPOLOGY,
    build_topology,
    describe_topology,
    validate_topology,
)
from dpnet.report import build_report

_ADMM = ADMMConfig()  # the solver defaults live in ADMMConfig


class DecentralizedGroupLassoLogistic:
    """Group-lasso logistic regression fitted by J simulated machines on a graph.

    Minimises F(beta, b) = (1/n) sum_i log(1 + exp(-y_i (x_i^T beta + b)))
    + (lam/2) sum_g w_g ||beta_g||_2 with the decentralized ADMM of paper 3; every machine
    first applies randomized response with budget ``epsilon`` to its own labels
    (epsilon-label-DP per machine; features are not protected).

    Parameters are stored as given; ``fit`` runs all machines as threads of this process.
    Learned: ``coef_``, ``intercept_``, ``machine_coefs_`` ((J, p+1): each machine's Z),
    ``n_rounds_``, ``stop_reason_``, ``report_`` (the results-file dict incl. the ledger).
    """

    def __init__(self, lam: float = _ADMM.lam, *, epsilon: float = math.inf,
                 topology: str = DEFAULT_TOPOLOGY, n_machines: int = DEFAULT_MACHINES,
                 group_weights: str = "ones", loss: str = "logistic", c: float = _ADMM.c,
                 adapt_c: bool = _ADMM.adapt_c, tol: float = _ADMM.tol,
                 max_rounds: int = _ADMM.max_rounds, theta_solver: str = _ADMM.theta_solver,
                 random_state: int | None = None) -> None:
        self.lam = lam
        self.epsilon = epsilon
        self.topology = topology
        self.n_machines = n_machines
        self.group_weights = group_weights
        self.loss = loss
        self.c = c
        self.adapt_c = adapt_c
        self.tol = tol
        self.max_rounds = max_rounds
        self.theta_solver = theta_solver
        self.random_state = random_state

    def _config(self) -> RunConfig:
        return RunConfig(
            topology=self.topology, machines=self.n_machines, backend="inprocess",
            epsilon=self.epsilon, loss=self.loss, lam=self.lam,
            group_weights=self.group_weights, c=self.c, adapt_c=self.adapt_c, tol=self.tol,
            max_rounds=self.max_rounds, theta_solver=self.theta_solver,
            seed=self.random_state, progress_every=0, quiet=True,
        ).validate()

    def fit(self, X: np.ndarray, y: np.ndarray,
            groups: np.ndarray | None = None) -> DecentralizedGroupLassoLogistic:
        """Fit on rows ``X`` (split evenly over the machines) and two-class labels ``y``."""
        config = self._config()
        X = np.ascontiguousarray(np.asarray(X, dtype=np.float64))
        groups = np.arange(X.shape[1]) if groups is None else np.asarray(groups)
        _, groups = np.unique(groups, return_inverse=True)
        train = GroupData(X, to_pm1(y), groups.astype(np.int64)).validate("fit")
        graph = validate_topology(build_topology(self.topology, self.n_machines), self.n_machines)
        weights = group_weights(train.groups, self.group_weights)
        shards = [RawShard(np.ascontiguousarray(train.X[idx]), train.y[idx], train.n_samples,
                           train.groups, weights, self.random_state)
                  for idx in split_rows(train.n_samples, self.n_machines)]
        public = PublicSetUp(train.groups, weights, None, None, "split by the estimator")
        diameter = nx.diameter(graph)
        outcomes = run_in_process(graph, lambda comm: machine_main(
            comm, shards[comm.rank], config, diameter))
        releases = [o.release for o in outcomes]
        self.report_: dict[str, Any] = build_report(config, describe_topology(graph), public,
                                                    releases, 0.0, "inprocess")
        self.machine_coefs_ = np.stack([r.result.z for r in releases])
        self.coef_ = np.asarray(self.report_["coef"])
        self.intercept_ = float(self.report_["intercept"])
        self.n_rounds_ = int(self.report_["rounds"])
        self.stop_reason_ = str(self.report_["stop_reason"])
        self.classes_ = np.array([-1.0, 1.0])
        return self

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=np.float64) @ self.coef_ + self.intercept_

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.where(self.decision_function(X) >= 0, 1.0, -1.0)
