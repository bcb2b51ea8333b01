"""DP median regression (Chen, Miao & Tang 2020, corrected): estimator and rank-0 baselines.

Model: minimise L(mu, beta) = (1/n) sum_i |mu + x_i^T beta - y_i| + (lam/2) ||beta||^2 with
rows clipped to ||x_i||_2 <= x_bound and, if y_bound is given, y clipped to [-y_bound, y_bound]
(both data-independent). The paper writes lam beta^T beta but differentiates it as lam beta; we
use (lam/2)||beta||^2 throughout (paper's lam = our lam / 2 if read literally).
Neighbouring relation: replace one record (bounded DP, n public).
"""

from __future__ import annotations

import math
import time
from numbers import Real
from typing import Any

import numpy as np
from dp_accounting import dp_event
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.exceptions import NotFittedError
from sklearn.utils import Tags
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from dpnet import streams
from dpnet.baselines.median.algorithms import (
    dp_coordinate_descent,
    dp_irls,
    dp_objective_perturbation,
    private_start_share,
)
from dpnet.baselines.median.numerics import clip_rows_safe, exact_lad
from dpnet.baselines.median.privacy import rest_of_budget
from dpnet.checks import positive
from dpnet.errors import ConfigError, DataError
from dpnet.params import (
    FINITE_NON_NEGATIVE,
    FINITE_POSITIVE,
    OPEN_UNIT_INTERVAL,
    POSITIVE_INT,
    ConstrainedEstimator,
)
from dpnet.privacy.budget import BudgetAccountant, charge
from dpnet.privacy.clipping import clip_values
from dpnet.privacy.leaks import WarnsOnRawScore
from dpnet.privacy.ledger import PrivacyLedger

METHODS = ("objective", "irls", "coordinate", "exact")
RELATION = "replace_one"
PROTECTS = "one training row (x_i, y_i)"


MAX_BOUND = 1e100
"""Largest x_bound / y_bound: beyond, n x_bound^2 sums overflow (ValueError deep in a solver)."""
_BOUND = Interval(Real, 0, MAX_BOUND, closed="right")


class NotFittedConfigError(ConfigError, NotFittedError):
    """predict before fit: scikit-learn's NotFittedError that is also dpnet's ConfigError."""


def _validated(est: BaseEstimator, X: Any, y: Any = None, *, reset: bool) -> Any:
    """scikit-learn's validate_data (float64, finite, dense, >= 2 rows when fitting; y of shape
    (n, 1) is ravelled with a DataConversionWarning); its ValueErrors become DataError.
    Sparse X raises scikit-learn's TypeError (the row clipping needs dense rows)."""
    try:
        if reset:
            return validate_data(est, X, y, dtype=np.float64, y_numeric=True, ensure_min_samples=2)
        return validate_data(est, X, dtype=np.float64, reset=False)
    except ValueError as exc:
        raise DataError(str(exc)) from None


class DPMedianRegressor(WarnsOnRawScore, RegressorMixin, ConstrainedEstimator):
    """Differentially private median (LAD) regression, a scikit-learn regressor.

    method: "objective" (Alg. 1, objective perturbation of the Huber-smoothed loss, width
    gamma), "irls" (Alg. 2, reweighted least squares with weights 1/(|r| + e) and Laplace
    output perturbation), "coordinate" (Alg. 3, noisy coordinate descent over n_splits disjoint
    batches, steps step/(t+1), ||beta|| <= beta_bound, needs y_bound), "exact" (non-private).
    intercept_ridge (default 1/sqrt(n), the paper's mu^2/(2 sqrt n)) makes Alg. 1-2 strongly
    convex in mu. Alg. 3 starts from init: "private" (default: Alg. 2 on all rows with
    init_share * epsilon, sequentially composed; its ridge on beta is lam, or intercept_ridge's
    value when lam = 0; init_share None (default): the share that minimises the Laplace
    variance of the released theta, from public quantities only (``private_start_share`` in
    algorithms.py; 0.74 at n <= 2.5e5, 0.82 at n = 1e6 with the paper's parameters and
    y_bound = 10)), "zero" (data-independent; with the paper's step 0.1 the iterates cannot
    travel far from 0) or a public array (mu, beta). Alg. 3 releases as intercept the mean over
    the batches (weighted by size) of its released mu_t (post-processing).

    Guarantee: every DP method is epsilon-DP (pure) for replacing one row (x_i, y_i); n is
    public. Everything that sets a sensitivity (x_bound, y_bound, lam, intercept_ridge, gamma,
    e, step, beta_bound, n_splits, init_share) is a parameter, never read from the data.
    accountant: a :class:`~dpnet.privacy.budget.BudgetAccountant` shared across fits, charged
    epsilon before the fit (``BudgetExceeded`` if past its cap; "exact" is not private: inf).
    random_state: an int (reproducible; whoever knows it can recompute the noise) or None (OS
    entropy); every fit draws from a new stream (:func:`dpnet.streams.estimator_stream`), kept
    by nothing after the fit. Parameters are validated in fit: outside
    ``_parameter_constraints`` a :class:`~dpnet.params.ParameterError`, inconsistent ones a
    ConfigError. After fit: coef_, intercept_, privacy_ (the ledger's dict), n_features_in_
    (and feature_names_in_ for named columns).
    """

    _parameter_constraints: dict = {
        "method": [StrOptions(set(METHODS))],
        "epsilon": [FINITE_POSITIVE],
        "lam": [FINITE_NON_NEGATIVE],
        "x_bound": [_BOUND],
        "y_bound": [_BOUND, None],
        "gamma": [FINITE_POSITIVE],
        "e": [FINITE_POSITIVE],
        "tol": [FINITE_POSITIVE],
        "max_iter": [POSITIVE_INT],
        "n_splits": [POSITIVE_INT],
        "step": [FINITE_POSITIVE],
        "beta_bound": [FINITE_POSITIVE],
        "init": [StrOptions({"zero", "private"}), "array-like"],
        "init_share": [OPEN_UNIT_INTERVAL, None],
        "intercept_ridge": [FINITE_POSITIVE, None],
        # checked where they are used: privacy.budget.charge, streams.check_seed
        "accountant": "no_validation",
        "random_state": "no_validation",
    }

    def __init__(
        self,
        method: str = "objective",
        epsilon: float = 1.0,
        lam: float = 0.002,
        x_bound: float = 1.0,
        y_bound: float | None = None,
        gamma: float = 0.05,
        e: float = 0.05,
        tol: float = 1e-6,
        max_iter: int = 200,
        n_splits: int = 40,
        step: float = 0.1,
        beta_bound: float = 10.0,
        init: str | np.ndarray = "private",
        init_share: float | None = None,
        intercept_ridge: float | None = None,
        accountant: BudgetAccountant | None = None,
        random_state: int | None = None,
    ) -> None:
        self.method = method
        self.epsilon = epsilon
        self.lam = lam
        self.x_bound = x_bound
        self.y_bound = y_bound
        self.gamma = gamma
        self.e = e
        self.tol = tol
        self.max_iter = max_iter
        self.n_splits = n_splits
        self.step = step
        self.beta_bound = beta_bound
        self.init = init
        self.init_share = init_share
        self.intercept_ridge = intercept_ridge
        self.accountant = accountant
        self.random_state = random_state

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        # DP noise of order 1/(n epsilon) and training-time clipping at a data-independent
        # x_bound: no R^2 > 0.5 promise on small or unscaled data (scikit-learn's score check)
        tags.regressor_tags.poor_score = True
        return tags

    def _check_params(self, n: int, d: int) -> None:
        """What the constraints cannot say: combinations, and limits set by the data."""
        if self.lam == 0 and self.method in ("objective", "irls"):
            raise ConfigError(f"method {self.method!r} needs lam > 0 (strong convexity)")
        if self.method != "coordinate":
            return
        if self.y_bound is None:
            raise ConfigError("method 'coordinate' needs y_bound (its mu update sums raw y)")
        if self.n_splits > n:
            raise ConfigError(f"n_splits must be an integer in [1, n={n}], got {self.n_splits!r}")
        init_array = not isinstance(self.init, str)
        if init_array and (np.shape(self.init) != (d + 1,) or not np.all(np.isfinite(self.init))):
            raise ConfigError(f"init array must be finite with shape ({d + 1},) = (mu, beta)")

    _private_score_remedy = "score only rows you know to be public (dpnet has no private R^2)"

    def _score_reads(self) -> str | None:
        """``score`` is scikit-learn's R^2 on the rows as given; after a DP method (all but
        "exact") it warns :class:`~dpnet.privacy.PrivacyLeakWarning` (the guarantee protects
        whole rows: :class:`~dpnet.privacy.leaks.WarnsOnRawScore`)."""
        return None if self.method == "exact" else "rows X and labels y"

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any, ledger: PrivacyLedger | None = None) -> DPMedianRegressor:
        """Fit on (X, y); every release is recorded in ``ledger`` (a new one if None).

        NaN/inf in X or y, fewer than 2 rows or mismatched lengths: DataError (a ValueError).
        Rows are clipped with overflow-safe norms, so any finite magnitude (1e300) gives the fit
        on the correctly clipped rows.
        """
        Xa, ya = _validated(self, X, y, reset=True)
        n, d = Xa.shape
        self._check_params(n, d)
        private = self.method != "exact"
        charge(
            self.accountant,
            float(self.epsilon) if private else math.inf,
            0.0,
            label=f"{type(self).__name__}(method={self.method!r}).fit",
        )
        Xa = clip_rows_safe(Xa, float(self.x_bound))  # overflow-safe row norms
        if self.y_bound is not None:
            ya = clip_values(ya, self.y_bound)
        ledger = PrivacyLedger() if ledger is None else ledger
        rng = streams.estimator_stream(self.random_state)
        a_mu = 1.0 / math.sqrt(n) if self.intercept_ridge is None else float(self.intercept_ridge)
        common = {"lam": float(self.lam), "x_bound": float(self.x_bound)}
        if self.method == "exact":
            theta = exact_lad(Xa, ya, float(self.lam))
            releases = [
                (
                    dp_event.NonPrivateDpEvent(),
                    "median exact LAD fit (non-private)",
                    "none: non-private reference",
                )
            ]
        elif self.method == "objective":
            theta, releases = dp_objective_perturbation(
                Xa,
                ya,
                epsilon=float(self.epsilon),
                gamma=float(self.gamma),
                intercept_ridge=a_mu,
                rng=rng,
                **common,
            )
        elif self.method == "irls":
            theta, releases = dp_irls(
                Xa,
                ya,
                epsilon=float(self.epsilon),
                e=float(self.e),
                intercept_ridge=a_mu,
                rng=rng,
                tol=float(self.tol),
                max_iter=int(self.max_iter),
                **common,
            )
        else:
            theta, releases = self._fit_coordinate(Xa, ya, a_mu, rng, common)
        for event, label, guarantee in releases:
            ledger.record(
                event, label=label, relation=RELATION, protects=PROTECTS, guarantee=guarantee
            )
        self.intercept_ = float(theta[0])
        self.coef_ = np.asarray(theta[1:], dtype=float)
        self.privacy_ = ledger.to_dict()
        return self

    def _fit_coordinate(self, X, y, a_mu, rng, common) -> tuple[np.ndarray, list]:
        eps = float(self.epsilon)
        releases: list = []
        assert self.y_bound is not None  # fit refuses method 'coordinate' without y_bound
        if isinstance(self.init, str) and self.init == "private":
            # Alg. 2 needs a ridge on beta: lam, or a_mu (data-independent) when lam = 0
            lam0 = common["lam"] if common["lam"] > 0 else a_mu
            share = self.init_share
            if share is None:  # public quantities only: fixed before the data are read
                share = private_start_share(
                    *X.shape,
                    lam=lam0,
                    intercept_ridge=a_mu,
                    x_bound=common["x_bound"],
                    y_bound=float(self.y_bound),
                    beta_bound=float(self.beta_bound),
                    n_splits=int(self.n_splits),
                    step=float(self.step),
                )
            eps_init = float(share) * eps
            theta0, releases = dp_irls(
                X,
                y,
                epsilon=eps_init,
                lam=lam0,
                e=float(self.e),
                x_bound=common["x_bound"],
                intercept_ridge=a_mu,
                rng=rng,
            )
            eps = rest_of_budget(eps, eps_init)
        elif isinstance(self.init, str):
            theta0 = np.zeros(X.shape[1] + 1)
        else:
            theta0 = np.asarray(self.init, dtype=float)
        theta, cd = dp_coordinate_descent(
            X,
            y,
            epsilon=eps,
            n_splits=int(self.n_splits),
            step=float(self.step),
            y_bound=float(self.y_bound),
            beta_bound=float(self.beta_bound),
            theta0=theta0,
            rng=rng,
            **common,
        )
        return theta, releases + cd

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "coef_")  # not n_features_in_: a fit with bad parameters sets it

    def predict(self, X: Any) -> np.ndarray:
        """mu + X beta (X is used as given: clipping is a training-time privacy device)."""
        try:
            check_is_fitted(self)
        except NotFittedError as exc:
            raise NotFittedConfigError(str(exc)) from None
        Xa = _validated(self, X, reset=False)
        with np.errstate(over="ignore", invalid="ignore"):
            out = self.intercept_ + Xa @ self.coef_
        if not np.all(np.isfinite(out)):
            raise DataError("predictions overflow: X is too large for the fitted coefficients")
        return out


# --- the paper's simulation (section 4) and the rank-0 baselines ---------------------------

TRUE_THETA = np.array([2.0, 3.0, 0.0, -4.0])  # (mu, beta_1, beta_2, beta_3)
PAPER_PARAMS: dict[str, Any] = {
    "lam": 0.002,
    "gamma": 0.05,
    "e": 0.05,
    "tol": 1e-6,
    "max_iter": 200,
    "n_splits": 40,
    "step": 0.1,
    "x_bound": 1.0,
    "y_bound": 10.0,
}


def simulate_median_data(n: int, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """y = 2 + 3 x_1 - 4 x_3 + Laplace(scale 2), x uniform in the unit ball of R^3.

    The paper does not state the law of x (only ||x|| <= 1); y_bound = 10 exceeds the largest
    |2 + 3 x_1 - 4 x_3| = 7, so clipping y keeps the conditional median line unchanged.
    """
    g = rng.standard_normal((n, 3))
    radius = rng.random(n) ** (1.0 / 3.0)
    X = g * (radius / np.linalg.norm(g, axis=1))[:, None]
    y = TRUE_THETA[0] + X @ TRUE_THETA[1:] + rng.laplace(0.0, 2.0, size=n)
    return X, y


def run_median_baselines(
    *, epsilon: float, seed: int | None, n_samples: int = 5000, ledger: PrivacyLedger | None = None
) -> dict[str, Any]:
    """Fit the exact reference and Alg. 1-3 (paper's parameters, each at ``epsilon``; Alg. 3 from
    its default private start) on the paper's simulation; every release goes to ``ledger``
    (central, sequential composition).

    Returns a JSON-serialisable dict: per method intercept, coef, L2 / max error against the
    exact ridge-LAD fit, time in seconds; the pure epsilon spent by these baselines (the three
    DP fits compose sequentially: 3 epsilon). The data are synthetic (drawn from ``seed``;
    None: OS entropy, so that nobody can recompute the noise).
    """
    eps = positive("epsilon", epsilon)
    if int(n_samples) != n_samples or n_samples < 2 * PAPER_PARAMS["n_splits"]:
        raise ConfigError(f"n_samples must be an integer >= 80, got {n_samples!r}")
    ledger = PrivacyLedger() if ledger is None else ledger
    # the data and each method's mechanism draw from streams of their own (dpnet.streams)
    data_seed, *method_seeds = streams.child_seeds(seed, 4)
    X, y = simulate_median_data(int(n_samples), rng=np.random.default_rng(data_seed))
    out: dict[str, Any] = {
        "epsilon": eps,
        "seed": None if seed is None else int(seed),
        "n_samples": int(n_samples),
        "true_theta": TRUE_THETA.tolist(),
        "methods": {},
    }
    start = time.perf_counter()
    Xc, yc = clip_rows_safe(X, PAPER_PARAMS["x_bound"]), clip_values(y, PAPER_PARAMS["y_bound"])
    reference = exact_lad(Xc, yc, PAPER_PARAMS["lam"])
    out["methods"]["exact"] = {
        "intercept": float(reference[0]),
        "coef": reference[1:].tolist(),
        "time_s": time.perf_counter() - start,
        "note": "non-private reference on the synthetic data (not recorded in the ledger)",
    }
    spent = 0.0
    for method, method_seed in zip(("objective", "irls", "coordinate"), method_seeds, strict=True):
        est = DPMedianRegressor(
            method=method, epsilon=eps, random_state=method_seed, **PAPER_PARAMS
        )
        start = time.perf_counter()
        est.fit(X, y, ledger=ledger)
        elapsed = time.perf_counter() - start
        theta = np.r_[est.intercept_, est.coef_]
        spent += eps
        out["methods"][method] = {
            "intercept": float(theta[0]),
            "coef": theta[1:].tolist(),
            "l2_error_vs_exact": float(np.linalg.norm(theta - reference)),
            "max_abs_error_vs_exact": float(np.abs(theta - reference).max()),
            "time_s": elapsed,
        }
    out["pure_epsilon_spent"] = spent
    return out
