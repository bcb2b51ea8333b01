"""scikit-learn estimator of the decentralized, label-private group-lasso logistic ADMM.

Built on the library layer (topology, in-process communicator, :mod:`dpnet.decentralized`),
not on the command line's config or report. Checked by scikit-learn's
``parametrize_with_checks`` in ``tests/test_estimator_checks.py``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from functools import partial
from numbers import Real
from typing import Any

import numpy as np
from scipy.special import expit, log_expit
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from dpnet import streams
from dpnet.data.dataset import check_magnitude
from dpnet.data.labels import LabelDomain, equal_labels
from dpnet.data.partition import split_rows
from dpnet.decentralized.admm import MAX_PENALTY, THETA_SOLVERS, ADMMConfig, fit_settings
from dpnet.decentralized.block import ArrayBlock, Block, CommBlock
from dpnet.decentralized.boundary import RawShard
from dpnet.decentralized.columns import (
    BadlyScaledWarning,
    public_columns,
    scaling_warning,
)
from dpnet.decentralized.machine import (
    LOSSES,
    MachineOutcome,
    consensus_model,
    fit_private_block,
    privacy_ledger,
    randomize_all,
)
from dpnet.errors import ConfigError
from dpnet.network.inprocess import run_in_process
from dpnet.network.topology import (
    DEFAULT_MACHINES,
    DEFAULT_TOPOLOGY,
    build_topology,
    validate_topology,
)
from dpnet.params import (
    FINITE_POSITIVE,
    OPEN_UNIT_INTERVAL,
    POSITIVE_INT,
    ConstrainedEstimator,
)
from dpnet.penalties.group import (
    GROUP_WEIGHTS,
    group_weights,
    groups_from_labels,
    objective_penalty,
    selected_groups,
)
from dpnet.privacy.budget import BudgetAccountant, charge
from dpnet.privacy.leaks import PrivacyLeakWarning, WarnsOnRawScore
from dpnet.privacy.modes import (
    DEFAULT_DELTA,
    DEFAULT_EPSILON,
    ESTIMATOR,
    PRIVACY_MODES,
    RECORD_DISTANCE,
    RECORD_WORK,
    PrivacyMode,
    mode_class,
    privacy_mode,
)

_ADMM = ADMMConfig()  # the solver defaults live in ADMMConfig


ESTIMATOR_BACKENDS = ("auto", "simulated", "threads")


def _accountant_entry(
    charged: BudgetAccountant | None, given: BudgetAccountant | None
) -> dict[str, Any] | None:
    """``privacy_["accountant"]``: which accountant the fit charged ("given": the
    ``accountant`` parameter, "default": :func:`default_accountant`) and its total (epsilon,
    delta) after the fit; None if nothing was charged (epsilon = inf, no accountant)."""
    if charged is None:
        return None
    spent_epsilon, spent_delta = charged.spent
    return {
        "charged": "given" if charged is given else "default",
        "spent_epsilon": spent_epsilon,
        "spent_delta": spent_delta,
        "charges": charged.n_charges,
    }


class DecentralizedGroupLassoLogistic(WarnsOnRawScore, ClassifierMixin, ConstrainedEstimator):
    """Group-lasso logistic regression fitted by J simulated machines on a graph.

    Minimises F(beta, b) = (1/n) sum_i log(1 + exp(-y_i (x_i^T beta + b)))
    + (lam/2) sum_g w_g ||beta_g||_2 with the decentralized ADMM of paper 3 (rows split evenly
    over the machines; ``backend="simulated"``: all machines as arrays in this process,
    ``"threads"``: one thread each with real messages, the same round loop and fit to ~1e-12,
    many times slower; ``"auto"``: simulated; ``backend_`` says which ran).

    ``privacy="label"`` (default): every machine first applies randomized response with budget
    ``epsilon`` (default 1, :data:`~dpnet.privacy.modes.DEFAULT_EPSILON`) to its own labels:
    epsilon-label-DP under replacing one label (features are not protected), by parallel
    composition over the disjoint shards. ``epsilon=math.inf`` asks for a fit that is not
    private (labels used as given; ``privacy_["guarantee"]`` says "not private").
    ``privacy="record"``: every theta a machine sends is a Gaussian release, rows scaled to
    norm <= ``row_bound`` (a public bound, required), the noise calibrated so that the
    ``max_rounds`` rounds (default 100) compose to exactly (``epsilon``, ``delta``, default
    1 and 1e-5): record-level DP (features and label) against every other machine
    (:mod:`dpnet.decentralized.record`, docs/privacy.md).

    Under label privacy the machines fit the columns centred at their mean over all rows (the
    features are not protected, so the mean is as public as they are): the intercept is not
    penalized, so this moves only its parametrization (b = b_c - mean^T beta) and leaves the
    optimum the same, while the ADMM no longer crawls along the direction an uncentred
    column shares with the intercept (columns of mean 100: 3,000 rounds unconverged, centred:
    37). ``coef_``, ``intercept_`` and ``machine_coefs_`` are those of the columns as given.
    The starting penalty (``c=None``) is scaled by the centred design's curvature
    lambda_max(X~^T X~)/n, as public as the mean (docs/algorithms.md, "The start under label
    privacy"). ``standardize=True`` (default False) divides the centred
    columns by their standard deviation over all rows (1 for a constant column), pooled from
    the machines' moments as the mean is: the penalty then weighs the coefficients of the
    standardized columns (glmnet's ``standardize``), while ``coef_`` and ``intercept_`` stay on
    the columns as given (coef_ = beta_std / scale, the intercept moved by the mean), so the
    predictions are those of the standardized model. Without it, a column whose standard
    deviation exceeds :data:`~dpnet.decentralized.columns.BADLY_SCALED` (100) makes ``fit``
    warn :class:`~dpnet.decentralized.columns.BadlyScaledWarning` in one line naming the column
    and the remedy (the ADMM crawls on such columns). Record privacy protects the features:
    there the columns are used as given and the start is the graph's alone; with
    ``standardize=True`` every machine first releases the sums of its rows' columns and
    squared columns (rows scaled to ``row_bound``) with Gaussian noise, and the machines fit
    the columns centred and scaled by what those released sums give, each standardized row
    clipped to a public norm (at most 2 sqrt(P), from the released values) for the theta
    step; the release takes a tenth of the budget's Gaussian-DP mu^2
    (:data:`~dpnet.privacy.modes.STANDARDIZE_SHARE`) and the fit stays exactly (``epsilon``,
    ``delta``)-DP (:mod:`dpnet.decentralized.columns`). ``adapt_c`` (label privacy only) lets
    the machines change c together from their shared statistics: residual balancing, then its
    descent in the tail (docs/algorithms.md, "The descent of c in the tail").

    ``groups``: one group id per column (the columns of a group enter and leave the model
    together; default None: one group per column), ids of any sortable kind (integers or
    names), or, when X is a pandas DataFrame, a dict {column name: group} listing every
    column (a column not listed is refused by name). A constructor parameter, so that
    ``GridSearchCV(...).fit(X, y, groups=g)`` can give *row* groups to its splitter.

    ``accountant``: a :class:`~dpnet.privacy.budget.BudgetAccountant` shared across fits: the
    fit charges its (epsilon, delta) first and is refused (``BudgetExceeded``, nothing fitted)
    if that would pass the cap; epsilon = inf (no privacy) is refused by every cap. Pickled
    for a search's worker processes, it keeps one budget for all of them (a spool file). A
    :class:`~dpnet.privacy.budget_file.BudgetFileAccountant` keeps the charges in a budget
    file of your own, shared with later sessions and command-line jobs. With None
    (the default) a fit under a finite ``epsilon`` charges the process-wide, uncapped
    :func:`~dpnet.privacy.budget.default_accountant` instead (silently; epsilon = inf charges
    nothing): its ``spent`` is what every such fit spent, a search's workers' included, added
    up by basic composition, per machine. ``privacy_["accountant"]`` says which accountant
    the fit charged and its total after the fit.

    ``classes``: the two label values, (negative, positive): the public label set both
    guarantees assume. Given, nothing about the class set is read from ``y``: ``classes_`` is
    the pair, y == classes[1] maps to +1 and y == classes[0] to -1, a training set holding
    one class only is fitted like any other, and a label outside the pair is outside the data
    domain: refused (ValueError, one line naming no value) before anything is charged. With
    ``classes=None`` they are read from ``y`` (which must hold two classes); under a privacy
    mode (finite ``epsilon``) that warns :class:`~dpnet.privacy.PrivacyLeakWarning` and
    ``privacy_`` says the guarantee does not cover which values occur.

    ``score`` is scikit-learn's accuracy on the labels as given; after a private fit it warns
    :class:`~dpnet.privacy.PrivacyLeakWarning` (held-out private labels are read without
    noise): :class:`dpnet.metrics.PrivateAccuracyScorer` scores privately, and
    :mod:`dpnet.pipeline` checks the transformers of a Pipeline in front (docs/privacy.md,
    "Scoring and tuning the estimator privately").

    The data domain is the loaders': finite features of magnitude < ``MAX_ABS_FEATURE``
    (1e100, :func:`dpnet.data.dataset.check_magnitude`); ``fit`` refuses others (ValueError,
    one line, nothing charged), and so do ``decision_function`` and the predictions (there X
    is public test data: a refusal rather than overflowing decisions). Both guarantees are
    stated over data sets inside the domain (docs/privacy.md, "The estimator's public schema").

    ``random_state``: int (reproducible; whoever knows it can undo the randomized response)
    or None (OS entropy); machine j's flips come from :func:`dpnet.streams.machine_flip_stream`,
    as in the main job.

    Learned: ``classes_``, ``backend_``, ``n_features_in_``, ``coef_``, ``intercept_``,
    ``machine_coefs_`` ((J, p+1): each machine's Z), ``n_iter_`` (rounds), ``stop_reason_``,
    ``penalty_`` (the ADMM penalty c: ``start``, ``final``, ``changes`` as [round, factor]),
    ``selected_groups_``, ``objective_`` (on the randomized labels; NaN under record privacy:
    not released), ``privacy_`` (the budget, the ledger), ``traffic_`` (bytes per message, per
    machine and round).

    Parameters outside ``_parameter_constraints`` raise :class:`~dpnet.params.ParameterError`
    at fit; inconsistent ones (e.g. ``privacy="record"`` without ``row_bound``) ConfigError.
    """

    _parameter_constraints: dict = {
        "lam": [FINITE_POSITIVE],
        "groups": ["array-like", None],
        "epsilon": [Interval(Real, 0, math.inf, closed="right")],  # inf: no privacy
        "privacy": [StrOptions(set(PRIVACY_MODES))],
        "delta": [OPEN_UNIT_INTERVAL],
        "row_bound": [FINITE_POSITIVE, None],
        "classes": ["array-like", None],
        "topology": [str],
        "n_machines": [POSITIVE_INT],
        "group_weights": [StrOptions(set(GROUP_WEIGHTS))],
        "standardize": ["boolean"],
        "loss": [StrOptions(set(LOSSES))],
        "c": [Interval(Real, 0, MAX_PENALTY, closed="right"), None],
        "adapt_c": ["boolean"],
        "tol": [FINITE_POSITIVE],
        "max_rounds": [POSITIVE_INT, None],
        "theta_solver": [StrOptions(set(THETA_SOLVERS))],
        "backend": [StrOptions(set(ESTIMATOR_BACKENDS))],
        # checked where they are used: privacy.budget.charge, streams.check_seed
        "accountant": "no_validation",
        "random_state": "no_validation",
    }

    def __init__(
        self,
        lam: float = _ADMM.lam,
        *,
        groups: Any = None,
        epsilon: float = DEFAULT_EPSILON,
        privacy: str = "label",
        delta: float = DEFAULT_DELTA,
        row_bound: float | None = None,
        classes: tuple[Any, Any] | None = None,
        topology: str = DEFAULT_TOPOLOGY,
        n_machines: int = DEFAULT_MACHINES,
        group_weights: str = "ones",
        standardize: bool = False,
        loss: str = "logistic",
        c: float | None = _ADMM.c,
        adapt_c: bool = _ADMM.adapt_c,
        tol: float = _ADMM.tol,
        max_rounds: int | None = None,
        theta_solver: str = _ADMM.theta_solver,
        backend: str = "auto",
        accountant: BudgetAccountant | None = None,
        random_state: int | None = None,
    ) -> None:
        self.lam = lam
        self.groups = groups
        self.epsilon = epsilon
        self.privacy = privacy
        self.delta = delta
        self.row_bound = row_bound
        self.classes = classes
        self.topology = topology
        self.n_machines = n_machines
        self.group_weights = group_weights
        self.standardize = standardize
        self.loss = loss
        self.c = c
        self.adapt_c = adapt_c
        self.tol = tol
        self.max_rounds = max_rounds
        self.theta_solver = theta_solver
        self.backend = backend
        self.accountant = accountant
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = False
        return tags

    def _privacy_mode(self) -> PrivacyMode:
        """The privacy mode of the parameters, checked before the data are read (ConfigError
        on what it cannot take): every privacy rule of the fit is read from it
        (:mod:`dpnet.privacy.modes`, shared with the command line)."""
        takes_delta = mode_class(self.privacy).takes_delta  # else delta is ignored
        mode = privacy_mode(
            self.privacy,
            epsilon=self.epsilon,
            delta=self.delta if takes_delta else None,
            row_bound=self.row_bound,
            keep_prob=None,
            spelling=ESTIMATOR,
            standardize=self.standardize,
        )
        return mode

    def _declared_classes(self) -> np.ndarray | None:
        """``classes`` as an array of two distinct labels, or None; ConfigError otherwise.
        Public: checked before the data is read."""
        if self.classes is None:
            return None
        classes = np.asarray(self.classes)
        if (
            classes.shape != (2,)
            or not equal_labels(classes, classes).all()  # NaN is no label
            or equal_labels(classes[0], classes[1])
        ):
            raise ConfigError(
                "classes must be two distinct label values (negative, positive), "
                f"got {self.classes!r}"
            )
        return classes

    def _labels_pm1(self, y: np.ndarray, declared: np.ndarray | None) -> np.ndarray:
        """y as +-1 by the label domain of ``classes_`` (:meth:`LabelDomain.of_classes`:
        classes_[1] -> +1, classes_[0] -> -1, the command line's rule); sets ``classes_``.

        ``declared`` (the ``classes`` given): ``classes_`` is that pair and nothing about the
        class set is read from y (not even scikit-learn's type of target); a label outside
        the pair is outside the data domain: a one-line ValueError naming no value. None:
        the two values of y (and a PrivacyLeakWarning under a privacy mode)."""
        if declared is None:
            if math.isfinite(self.epsilon):  # a privacy mode: its guarantee assumes them public
                warnings.warn(
                    "classes=None: the two labels were read from the private y (which values "
                    "occur is not covered by the guarantee); declare them with "
                    "classes=(negative, positive)",
                    PrivacyLeakWarning,
                    stacklevel=4,  # the caller of fit (wrapped by _fit_context)
                )
            check_classification_targets(y)
            classes = np.unique(y)
            if classes.size != 2:
                raise ValueError(
                    f"Only binary classification is supported: y holds "
                    f"{classes.size} class(es); give classes=(negative, positive) "
                    f"to declare the two labels publicly"
                )
        else:
            classes = declared
        pm1 = LabelDomain.of_classes(classes).to_pm1(y)
        self.classes_ = classes
        return pm1

    def _group_labels(self, groups: Any, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(groups, Mapping):
            groups = self._groups_by_name(groups)
        ids = np.arange(n_features) if groups is None else np.asarray(groups)
        if ids.shape != (n_features,):
            raise ConfigError(
                f"groups needs one id per column ({n_features}), got shape {ids.shape}"
            )
        labels = np.unique(ids, return_inverse=True)[1].reshape(-1).astype(np.int64)
        return labels, group_weights(labels, self.group_weights)

    def _groups_by_name(self, groups: Mapping[Any, Any]) -> list[Any]:
        """A dict {column name: group} as one group per column of X (a DataFrame's names)."""
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            raise ConfigError(
                "groups as a dict {column name: group} needs X as a pandas DataFrame with "
                "string column names"
            )
        unknown = next((key for key in groups if key not in set(names)), None)
        if unknown is not None:
            raise ConfigError(f"groups names {unknown!r}, no column of X")
        missing = next((name for name in names if name not in groups), None)
        if missing is not None:
            raise ConfigError(f"groups gives no group for column {missing!r} of X")
        return [groups[name] for name in names]

    def _column_names(self) -> list[str] | None:
        """The columns' names of a DataFrame ``X`` (public schema), else None."""
        names = getattr(self, "feature_names_in_", None)
        return None if names is None else [str(name) for name in names]

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any) -> DecentralizedGroupLassoLogistic:
        """Fit on rows ``X`` (split evenly over the machines) and two-class labels ``y``."""
        mode = self._privacy_mode()  # the public settings before the data
        declared = self._declared_classes()
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", y_numeric=False)
        check_magnitude(X, f"{type(self).__name__}.fit")  # the loaders' domain rule
        y_pm1 = self._labels_pm1(y, declared)
        keep_prob = mode.keep_probability
        seed = streams.check_seed(self.random_state, "random_state")
        row_bound = mode.row_bound
        # the solver's settings by the rules the command line's share (before the data)
        settings = partial(
            fit_settings,
            mode,
            seed,
            spelling=ESTIMATOR,
            max_rounds=self.max_rounds,
            adapt_c=self.adapt_c,
            lam=self.lam,
            c=self.c,
            tol=self.tol,
            theta_solver=self.theta_solver,
        )
        settings(columns=None)
        self.backend_ = "simulated" if self.backend == "auto" else self.backend
        group_labels, weights = self._group_labels(self.groups, X.shape[1])
        graph = validate_topology(build_topology(self.topology, self.n_machines), self.n_machines)
        # each row is on one machine, each machine's guarantee is the fit's (parallel)
        charged = charge(self.accountant, *mode.spend(), label=f"{type(self).__name__}.fit")
        # the data's work only once the fit is allowed (settings checked, budget charged)
        parts = split_rows(X.shape[0], self.n_machines)
        rows = [X[i] for i in parts]  # each machine's, once
        # label privacy: the machines fit the columns centred, and standardized if asked
        # (PrivateShard.columns); a badly scaled column is named, with the remedy. Record
        # privacy with standardize: from each machine's released column sums
        columns = public_columns(mode, rows, len(X), standardize=self.standardize, seed=seed)
        scaling = scaling_warning(columns, ESTIMATOR, self._column_names())
        if scaling is not None:
            warnings.warn(scaling, BadlyScaledWarning, stacklevel=3)  # the caller of fit
        admm = settings(columns=columns)
        shards = [
            RawShard(x, y_pm1[i], X.shape[0], group_labels, weights, columns)
            for x, i in zip(rows, parts, strict=True)
        ]

        def fit(block: Block) -> list[MachineOutcome]:
            ranks = block.edges.ids.tolist()
            crossings = randomize_all(
                [shards[j] for j in ranks], keep_prob, seed, ranks, row_bound=row_bound
            )
            return fit_private_block(
                block, crossings, keep_prob=keep_prob, loss=self.loss, admm=admm, graph=graph
            )

        if self.backend_ == "simulated":
            outcomes = fit(ArrayBlock(graph))
        else:
            outcomes = [o[0] for o in run_in_process(graph, lambda c: fit(CommBlock(c, graph)))]
        releases = [o.release for o in outcomes]
        self.coef_, self.intercept_ = consensus_model(releases)
        self.machine_coefs_ = np.stack([r.result.z for r in releases])
        self.n_iter_ = int(releases[0].result.rounds)
        self.stop_reason_ = str(releases[0].result.stop_reason)
        penalty = releases[0].result.penalty
        assert penalty is not None  # both backends record the penalty's path
        self.penalty_ = penalty.as_dict()
        if self.stop_reason_ != "converged" and not mode.noisy_thetas:  # the rounds: the budget
            warnings.warn(
                f"stopped on {self.stop_reason_} after {self.n_iter_} rounds, not converged to "
                f"tol={self.tol}: coef_ is not the optimum (check c, or raise max_rounds)",
                ConvergenceWarning,
                stacklevel=3,  # the caller of fit (wrapped by _fit_context)
            )
        grp_ptr, grp_indices = groups_from_labels(group_labels)
        self.objective_ = float(
            sum(r.result.local_objective for r in releases)
            + objective_penalty(
                self.lam,
                self.coef_ if columns is None else columns.fitted_coef(self.coef_),
                grp_ptr,
                grp_indices,
                weights,
            )
        )
        self.selected_groups_ = selected_groups(self.coef_, grp_ptr, grp_indices)
        traffic = [r.result.traffic for r in releases]
        self.traffic_ = {
            "bytes_per_message": sum(t["bytes_sent"] for t in traffic)
            / max(1, sum(t["messages_sent"] for t in traffic)),
            "bytes_per_machine_per_round": float(np.mean([t["bytes_sent"] for t in traffic]))
            / max(1, self.n_iter_),
        }
        ledger = privacy_ledger(releases, delta=mode.guarantee_delta)
        schema = (
            ""
            if self.classes is not None or not mode.private
            else "; assumes a public label set, but classes=None read it from y (not covered)"
        )
        self.privacy_ = {
            "epsilon": None if keep_prob == 1.0 else mode.label_epsilon,
            "keep_prob": keep_prob,
            "guarantee": mode.guarantee + schema,
            "classes_public": self.classes is not None,
            "ledger": ledger.to_dict(),
            "accountant": _accountant_entry(charged, self.accountant),
        }
        if admm.record is not None:
            self.privacy_ |= {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "rounds_budget": admm.max_rounds,
                "noise_multiplier": admm.record.noise_multiplier,
                "column_noise_multiplier": admm.record.column_multiplier,
                "row_bound": self.row_bound,
                "guarantee": f"{mode.guarantee}, per machine (replace one record){schema}",
                "distance": RECORD_DISTANCE,
                "work": RECORD_WORK,
            }
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """x^T coef_ + intercept_: the log-odds of ``classes_[1]``."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        check_magnitude(X, f"{type(self).__name__}.decision_function")  # as in fit
        return X @ self.coef_ + self.intercept_

    def predict_proba(self, X: Any) -> np.ndarray:
        """(n, 2): P(classes_[0] | x), P(classes_[1] | x) = 1 / (1 + exp(-decision)), the
        logistic model's probabilities (of the true labels: both losses fit that model)."""
        positive = expit(self.decision_function(X))
        return np.column_stack([1.0 - positive, positive])

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """log of :meth:`predict_proba`, without its rounding: log_expit(∓decision)."""
        decision = self.decision_function(X)
        return np.column_stack([log_expit(-decision), log_expit(decision)])

    def predict(self, X: Any) -> np.ndarray:
        """The class of ``classes_`` on the side of the decision function (>= 0: positive)."""
        check_is_fitted(self)
        return self.classes_[(self.decision_function(X) >= 0).astype(int)]

    _private_score_remedy = (
        "use dpnet.metrics.PrivateAccuracyScorer(epsilon) to score them privately"
    )

    def _score_reads(self) -> str | None:
        """``score`` (:class:`~dpnet.privacy.leaks.WarnsOnRawScore`) is scikit-learn's accuracy
        on the labels as given; after a private fit (finite ``epsilon``) it warns
        :class:`~dpnet.privacy.PrivacyLeakWarning`: the accuracy is a function of the raw
        labels ``y`` (and under record privacy of the raw rows ``X``). Score private rows with
        :class:`dpnet.metrics.PrivateAccuracyScorer`."""
        check_is_fitted(self)
        if self.privacy_["epsilon"] is None:  # epsilon = inf: not private
            return None
        return "rows X and labels y" if "row_bound" in self.privacy_ else "labels y"

    def _private_inputs(self) -> frozenset[str]:
        """What the guarantee of a fit with these parameters protects, from the parameters
        alone: {"y"} (label privacy), {"X", "y"} (record privacy), or nothing (epsilon =
        inf). Read by :func:`dpnet.pipeline.check_pipeline`."""
        mode = self._privacy_mode()
        if not mode.private:
            return frozenset()
        return frozenset({"y"}) if mode.features_public else frozenset({"X", "y"})
