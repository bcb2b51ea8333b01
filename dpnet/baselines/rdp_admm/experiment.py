"""Settings and the rank-0 run of the Rényi-DP ADMM comparison (Chen & Lee, arXiv 1909.08180).

:func:`make_estimators` builds the five methods with the paper's or tuned settings and
independent random streams; :func:`run_rdp_admm_baselines` fits them for rank 0 of the main job
and accounts each release.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpnet import streams
from dpnet.baselines.rdp_admm.common import DPLinearClassifier, get_loss, objective
from dpnet.baselines.rdp_admm.comparators import ADMMObjPClassifier, DPADMMClassifier
from dpnet.baselines.rdp_admm.data import coverage, make_synthetic, true_model
from dpnet.baselines.rdp_admm.gradient import DPSGDClassifier, SSADMMClassifier
from dpnet.baselines.rdp_admm.model import MPADMMClassifier
from dpnet.errors import ConfigError
from dpnet.privacy.clipping import clip_rows_l2
from dpnet.privacy.ledger import PrivacyLedger

__all__ = [
    "COVERAGE_KS",
    "ESTABLISHED_METHODS",
    "TUNED_SETTINGS",
    "fit_rdp_admm_on_rows",
    "make_estimators",
    "method_seeds",
    "run_rdp_admm_baselines",
]

COVERAGE_KS = (20, 25, 30, 40)

TUNED_SETTINGS: dict[str, dict[str, dict[str, float]]] = {
    "logistic": {
        "ssADMM": {"eta0": 4.0, "n_epochs": 5},
        "DP-SGD": {"eta0": 4.0, "n_epochs": 2},
        "mpADMM": {"eta": 64.0, "n_epochs": 300},
        "DP-ADMM": {"eta": 64.0, "n_iter": 300},
        "ADMM-objP": {"rho": 0.1},
    },
    "huberized_hinge": {
        "ssADMM": {"eta0": 4.0, "n_epochs": 2},
        "DP-SGD": {"eta0": 2.0, "n_epochs": 2},
        "mpADMM": {"eta": 64.0, "n_epochs": 300},
        "DP-ADMM": {"eta": 64.0, "n_iter": 300},
        "ADMM-objP": {"rho": 0.03},
    },
}
"""Settings selected by ``benchmarks/rdp_admm_tuning.py`` on the paper's synthetic design only
(n = 36,000, two fresh data sets, epsilon in {0.1, 0.5, 1}, delta = 1e-8, lambda = 1e-4; lowest
geometric-mean held-out objective); no real data set took part (docs/rdp-admm-results.md).
They are constants: nothing in them depends on the data set a method is later run on. For the
full-batch methods eta = 64 and T = 300 are the grid's largest values: their step
1/(1/eta + rho) is capped by 1/rho = 2 anyway, and T is a compute cap."""


def make_estimators(
    *,
    lam: float,
    epsilon: float | None,
    delta: float,
    seed: int | None,
    loss: str = "logistic",
    n_epochs: int | None = None,
    full_batch_epochs: int | None = None,
) -> dict[str, DPLinearClassifier]:
    """The five private methods with the settings used in the experiments.

    Paper defaults where it gives them (m = sqrt(n), eta_k = eta0/epoch, rho = 0.25 for ssADMM
    and 0.5 for mpADMM and DP-ADMM, 2 DP-ADMM parties, objP with 20 gradient epochs per
    iteration), the rest from :data:`TUNED_SETTINGS` (synthetic data only). ``n_epochs`` and
    ``full_batch_epochs`` override the epochs of the sampled and the full-batch methods.

    Random streams: each method gets its own child of ``SeedSequence(seed)`` (children 1-5;
    child 0 is left for the caller's data), so no two fits share noise and no fit's noise
    repeats the data's stream; ``seed=None`` gives every method fresh OS entropy.
    """
    if loss not in TUNED_SETTINGS:
        raise ConfigError(f"loss must be one of {tuple(TUNED_SETTINGS)}, got {loss!r}")
    tuned: dict[str, dict[str, Any]] = {
        name: dict(setting) for name, setting in TUNED_SETTINGS[loss].items()
    }
    for name, key, value in (
        ("ssADMM", "n_epochs", n_epochs),
        ("DP-SGD", "n_epochs", n_epochs),
        ("mpADMM", "n_epochs", full_batch_epochs),
        ("DP-ADMM", "n_iter", full_batch_epochs),
    ):
        if value is not None:
            tuned[name][key] = value
    common: dict[str, Any] = {"lam": lam, "loss": loss, "epsilon": epsilon, "delta": delta}
    states = method_seeds(seed, 5)
    return {
        "ssADMM": SSADMMClassifier(rho=0.25, **tuned["ssADMM"], **common, random_state=states[0]),
        "DP-SGD": DPSGDClassifier(**tuned["DP-SGD"], **common, random_state=states[1]),
        "mpADMM": MPADMMClassifier(rho=0.5, **tuned["mpADMM"], **common, random_state=states[2]),
        "DP-ADMM": DPADMMClassifier(rho=0.5, **tuned["DP-ADMM"], **common, random_state=states[3]),
        "ADMM-objP": ADMMObjPClassifier(
            n_iter=10, inner_epochs=20, **tuned["ADMM-objP"], **common, random_state=states[4]
        ),
    }


ESTABLISHED_METHODS = ("ssADMM", "DP-SGD", "mpADMM", "DP-ADMM")
"""The methods whose release has an established (epsilon, delta) guarantee: ADMM-objP's
inexact minimiser has none (:mod:`.comparators`), so it is never run on private rows."""


def method_seeds(seed: int | None, count: int) -> list[int | None]:
    """Integer seeds of children 1..count of ``SeedSequence(seed)`` (child 0 is the data's;
    None: OS entropy each)."""
    return streams.child_seeds(seed, count + 1)[1:]


def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in info.items():
        if isinstance(value, float) and not np.isfinite(value):
            value = "inf" if value > 0 else "nan"
        elif isinstance(value, np.generic):
            value = value.item()
        out[key] = value
    return out


def _release_record(name: str, est: DPLinearClassifier, machine: int | None) -> dict[str, Any]:
    """The keyword arguments of :meth:`PrivacyLedger.record` for the fit ``est`` of ``name``."""
    info = est.privacy_
    sampling = info.get("sampling") if info.get("sampling") in ("fixed", "poisson") else None
    return {
        "event": est.privacy_event_,
        "label": f"rdp_admm baseline {name}: coef_",
        "relation": info["relation"],
        "protects": "one training row",
        "machine": machine,
        "guarantee": info.get("guarantee", info.get("guarantee_caveat")),
        "sampling": sampling,
    }


def fit_rdp_admm_on_rows(
    X: np.ndarray,
    y: np.ndarray,
    *,
    epsilon: float,
    delta: float,
    row_bound: float,
    seed: int | None,
    ledger: PrivacyLedger,
    machine: int | None = None,
    lam: float = 1e-4,
    full_batch_epochs: int | None = 50,
) -> dict[str, Any]:
    """The methods of :data:`ESTABLISHED_METHODS`, each (``epsilon``, ``delta``)-DP for
    replacing one row of (X, y), fitted on the rows given; every release is recorded in
    ``ledger`` on ``machine`` (sequential composition with whatever else read these rows).

    Rows: s_i = (clip_R(x_i), 1) / sqrt(R^2 + 1) with R = ``row_bound``, so ||s_i|| <= 1 (the
    settings' row bound) and the last weight is the intercept; clipping acts on each row alone
    with R fixed before the rows are read, so the guarantee holds for the rows given. R must
    not depend on the private part of the rows. The model of the columns as given is
    coef = w[:p] / sqrt(R^2 + 1), intercept = w[p] / sqrt(R^2 + 1). ``y`` in {-1, +1}.
    Returns a JSON-serialisable dict: per method coef, intercept and its privacy_."""
    if not 0 < row_bound < math.inf:
        raise ConfigError(f"row_bound must be finite and > 0, got {row_bound}")
    scale = math.sqrt(row_bound**2 + 1.0)
    X = np.asarray(X, dtype=float)
    S = np.column_stack([clip_rows_l2(X, row_bound), np.ones(len(X))]) / scale
    estimators = make_estimators(
        lam=lam, epsilon=epsilon, delta=delta, seed=seed, full_batch_epochs=full_batch_epochs
    )
    methods: dict[str, Any] = {}
    for name in ESTABLISHED_METHODS:
        est = estimators[name]
        est.fit(S, y)
        ledger.record(**_release_record(name, est, machine))
        w = est.coef_ / scale
        methods[name] = {
            "coef": w[:-1].tolist(),
            "intercept": float(w[-1]),
            "privacy": _jsonable(est.privacy_),
        }
    return {
        "rows": int(len(X)),
        "lambda": lam,
        "row_bound": float(row_bound),
        "methods": methods,
        "not_run": {"ADMM-objP": "no established guarantee: never run on private rows"},
    }


def run_rdp_admm_baselines(
    *,
    epsilon: float,
    delta: float,
    seed: int | None,
    quick: bool = True,
    ledger: PrivacyLedger | None = None,
) -> dict:
    """Fit the five private methods on the paper's synthetic design (100 features,
    Sigma_ij = 0.5^|i-j|, 20 relevant, rows in the unit ball by a data-independent radius).

    Each method runs at (epsilon, delta) on the same training rows; every fit is recorded in
    ``ledger`` (machine=None, replace-one), which composes them sequentially. ADMM-objP's fit
    has no established guarantee (inexact minimiser): it enters as NonPrivateDpEvent, so the
    ledger's total is inf. ``accounted_fits`` is the sequential composition of the four fits
    with a guarantee, labelled as such; ``not_established`` names ADMM-objP. Only held-out
    metrics are returned (test accuracy and objective, coverage xi_k), plus the accuracy of the
    true model (known by design, so it costs no privacy). Returns a JSON-serialisable dict.
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise ConfigError(f"seed must be an integer or None (OS entropy), got {seed!r}")
    n_train, n_test = (4_000, 2_000) if quick else (36_000, 4_000)
    lam = 1e-4
    X, y = make_synthetic(n_train + n_test, rng=streams.data_stream(seed))
    Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    loss = get_loss("logistic")
    truth = np.append(true_model(), 0.0)
    results: dict[str, Any] = {
        "data": {
            "design": "Chen & Lee synthetic, p = 100 + intercept",
            "n_train": n_train,
            "n_test": n_test,
            "lambda": lam,
            "protects": "training rows (replace-one)",
        },
        "true_model_test_accuracy": float(np.mean(np.sign(Xte @ truth) == yte)),
        "methods": {},
    }
    estimators = make_estimators(
        lam=lam, epsilon=epsilon, delta=delta, seed=seed, full_batch_epochs=50 if quick else None
    )
    accounted = PrivacyLedger(delta)
    not_established: dict[str, str] = {}
    for name, est in estimators.items():
        est.fit(Xtr, ytr)
        info = est.privacy_
        record = _release_record(name, est, None)
        if ledger is not None:
            ledger.record(**record)
        if info.get("private"):
            accounted.record(**record)
        else:
            not_established[name] = info.get("guarantee", "no privacy guarantee (no noise)")
        results["methods"][name] = {
            "test_accuracy": est.score(Xte, yte),
            "test_objective": objective(loss, Xte, yte, est.coef_, lam),
            "coverage": {str(k): coverage(est.coef_, k) for k in COVERAGE_KS},
            "privacy": _jsonable(info),
        }
    accounted_methods = [name for name in estimators if name not in not_established]
    total = accounted.to_dict()["total"] if accounted.releases else {}
    excluded = f"; excludes {', '.join(not_established)}" if not_established else ""
    results["accounted_fits"] = {
        "label": "composed total of the fits with an established guarantee only "
        f"({', '.join(accounted_methods)}){excluded}",
        "methods": accounted_methods,
        "relation": accounted.relation,
        **total,
    }
    results["not_established"] = not_established
    if ledger is not None:
        results["ledger_note"] = (
            "the five fits use the same rows: the ledger composes them sequentially; "
            + (
                f"{', '.join(not_established)} has no established guarantee (recorded as "
                "NonPrivateDpEvent), so the ledger's total is inf; accounted_fits is the "
                "composed total of the other fits"
                if not_established
                else ""
            )
        )
    return results
