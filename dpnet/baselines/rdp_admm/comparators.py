"""Baselines of Chen & Lee: DP-ADMM (Huang et al. 2018) and ADMM-objP (objective perturbation).

DP-ADMM: the rows are split by index (data-independently) into N parties D_1..D_N with local
losses f_j(x) = (1/n) sum_{i in D_j} l_i(x), so sum_j f_j = the empirical risk; consensus
x_j = z, centre penalty lam ||z||_1. Each iteration every party takes a linearised step from
its public (released) iterate and releases it with Gaussian noise,

    x~_j+ = (x~_j / eta + rho z - y_j - g_j(x~_j)) / (1/eta + rho) + N(0, (z Delta)^2 I),
    g_j = (1/n) sum_{i in D_j} clip_C(g_i),   Delta = 2 C eta / (n (1 + eta rho))  (replace-one),

then z+ = S_{lam/(N rho)}(mean_j (x~_j+ + y_j / rho)), y_j+ = y_j + rho (x~_j+ - z+).
A row lives in one party, and the other parties' releases are post-processing of public values,
so the run's privacy is that of one party's T Gaussian releases (parallel composition).

ADMM-objP: ADMM on x = z where each x-update minimises the perturbed subproblem

    J_k(x) = (1/n) sum_i l(y_i s_i^T x) + b_k^T x / n + (rho/2) ||x - (z - y/rho)||^2,

b_k with density proportional to exp(-eps' ||b|| / (2R)) (Chaudhuri, Monteleoni & Sarwate
2011, Alg. 2, regulariser strength Lambda = rho, rows ||s|| <= R, |l'| <= 1, l'' <= c): the
exact minimiser is eps_k-DP with eps_k = eps' + 2 log(1 + c R^2 / (n rho)) (replace-one), and T
iterations would compose to T eps_k. The proof needs the exact minimiser; like the paper this
code runs ``inner_epochs`` full gradient-descent epochs, so no guarantee is established for the
release: ``privacy_event_`` is ``NonPrivateDpEvent`` (a ledger then reports epsilon = inf),
``privacy_["guarantee"]`` says so, and T eps_k is reported only as
``privacy_["epsilon_if_exact_minimiser"]`` (``nominal_privacy_event_``).
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting import dp_event
from numpy.typing import ArrayLike
from sklearn.base import _fit_context

from dpnet import streams
from dpnet.baselines.rdp_admm.common import (
    DEFAULT_CLIP,
    DEFAULT_DELTA,
    DEFAULT_EPSILON,
    DEFAULT_HUBER_H,
    DEFAULT_LAM,
    DEFAULT_ROW_BOUND,
    GAUSSIAN_NOISE_CONSTRAINTS,
    DPLinearClassifier,
    clipped_gradient_sum,
    get_loss,
    linearised_x_update,
    objective,
    release,
    smoothness,
    zy_update,
)
from dpnet.baselines.rdp_admm.privacy import gaussian_composition_privacy
from dpnet.errors import PrivacyError
from dpnet.params import FINITE_POSITIVE, POSITIVE_INT
from dpnet.penalties.l1 import soft_threshold
from dpnet.privacy.budget import BudgetAccountant, charge
from dpnet.privacy.ledger import PrivacyLedger
from dpnet.privacy.mechanisms import objective_perturbation_noise

OBJP_GUARANTEE = (
    "approximate: guarantee holds only for the exact minimiser; not established for this release"
)
OBJP_CAVEAT = (
    "objective perturbation is epsilon-DP only for the exact minimiser of each "
    "perturbed subproblem (Chaudhuri, Monteleoni & Sarwate 2011, Thm 9); this run "
    "approximates it by a fixed number of gradient-descent epochs, so "
    "epsilon_if_exact_minimiser is not a guarantee of the output, which is recorded "
    "as NonPrivateDpEvent (epsilon = inf)"
)


class DPADMMClassifier(DPLinearClassifier):
    """DP-ADMM of Huang et al. (2018) with ``n_parties`` parties (module docstring).

    Parameters: lam, loss, huber_h, epsilon/delta or noise_multiplier, n_parties (2),
    n_iter (iterations = releases per party), eta (default 1/(c row_bound^2)), rho, clip,
    row_bound, random_state. coef_ = z after the last iteration.
    """

    _parameter_constraints: dict = {
        **DPLinearClassifier._parameter_constraints,
        **GAUSSIAN_NOISE_CONSTRAINTS,
        "n_parties": [POSITIVE_INT],
        "n_iter": [POSITIVE_INT],
        "eta": [FINITE_POSITIVE, None],
        "rho": [FINITE_POSITIVE],
    }

    def __init__(
        self,
        lam: float = DEFAULT_LAM,
        *,
        loss: str = "logistic",
        huber_h: float = DEFAULT_HUBER_H,
        epsilon: float | None = DEFAULT_EPSILON,
        delta: float = DEFAULT_DELTA,
        noise_multiplier: float | None = None,
        n_parties: int = 2,
        n_iter: int = 20,
        eta: float | None = None,
        rho: float = 0.5,
        clip: float = DEFAULT_CLIP,
        row_bound: float = DEFAULT_ROW_BOUND,
        accountant: BudgetAccountant | None = None,
        random_state: int | None = None,
    ):
        self.lam, self.loss, self.huber_h = lam, loss, huber_h
        self.epsilon, self.delta, self.noise_multiplier = epsilon, delta, noise_multiplier
        self.n_parties, self.n_iter, self.eta, self.rho = n_parties, n_iter, eta, rho
        self.accountant = accountant
        self.clip, self.row_bound, self.random_state = clip, row_bound, random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike) -> DPADMMClassifier:
        """Run n_iter noisy consensus iterations; sets coef_, privacy_, history_."""
        lam, rho, clip, bound = self.lam, self.rho, self.clip, self.row_bound
        iters, parties = self.n_iter, self.n_parties
        loss = get_loss(self.loss, self.huber_h)
        eta = 1.0 / smoothness(loss, bound) if self.eta is None else self.eta
        A, ypm = self._validate_training_data(X, y, bound)
        n, p = A.shape
        if parties > n:
            raise PrivacyError(f"n_parties = {parties} exceeds n_samples = {n}")
        sens = 2.0 * clip * eta / (n * (1.0 + eta * rho))
        self.privacy_, self.privacy_event_ = gaussian_composition_privacy(
            method="DP-ADMM",
            n=n,
            steps=iters,
            releases_per_step=1,
            l2_sensitivity=sens,
            epsilon=self.epsilon,
            delta=self.delta,
            noise_multiplier=self.noise_multiplier,
        )
        self.privacy_["composition"] = f"parallel over {parties} disjoint parties (rows by index)"
        self._charge()
        mult = self.privacy_["noise_multiplier"]
        rng = streams.estimator_stream(self.random_state)
        shards = np.array_split(np.arange(n), parties)
        xs, ys, z = np.zeros((parties, p)), np.zeros((parties, p)), np.zeros(p)
        history = [objective(loss, A, ypm, z, lam)]
        for _ in range(iters):
            for j, rows in enumerate(shards):
                g = clipped_gradient_sum(loss, A[rows], ypm[rows], xs[j], clip) / n
                xs[j] = release(linearised_x_update(xs[j], z, ys[j], g, eta, rho), sens, mult, rng)
            z = soft_threshold(np.mean(xs + ys / rho, axis=0), lam / (parties * rho))
            ys += rho * (xs - z)
            history.append(objective(loss, A, ypm, z, lam))
        self.coef_ = z
        self.history_ = np.asarray(history)
        return self


class ADMMObjPClassifier(DPLinearClassifier):
    """ADMM with per-iteration objective perturbation (module docstring).

    Parameters: lam, loss, huber_h, epsilon (nominal total pure epsilon for exact minimisers;
    None = no noise), delta (only reported), n_iter (T), inner_epochs (gradient-descent epochs
    per subproblem, 20), rho, row_bound (R; rows must satisfy ||s_i|| <= R: no clipping can
    replace it here), random_state.

    The subproblems are not minimised exactly, so the fit has no established guarantee:
    ``privacy_event_`` = NonPrivateDpEvent, ``privacy_["epsilon"]`` = inf, ``private`` False,
    ``guarantee`` = :data:`OBJP_GUARANTEE`; the epsilon objective perturbation would give an
    exact minimiser is ``epsilon_if_exact_minimiser`` (event ``nominal_privacy_event_``).
    """

    _parameter_constraints: dict = {
        **DPLinearClassifier._parameter_constraints,
        "n_iter": [POSITIVE_INT],
        "inner_epochs": [POSITIVE_INT],
        "rho": [FINITE_POSITIVE],
    }

    def __init__(
        self,
        lam: float = DEFAULT_LAM,
        *,
        loss: str = "logistic",
        huber_h: float = DEFAULT_HUBER_H,
        epsilon: float | None = DEFAULT_EPSILON,
        delta: float = DEFAULT_DELTA,
        n_iter: int = 10,
        inner_epochs: int = 20,
        rho: float = 0.5,
        row_bound: float = DEFAULT_ROW_BOUND,
        accountant: BudgetAccountant | None = None,
        random_state: int | None = None,
    ):
        self.lam, self.loss, self.huber_h = lam, loss, huber_h
        self.epsilon, self.delta, self.n_iter = epsilon, delta, n_iter
        self.inner_epochs, self.rho, self.row_bound = inner_epochs, rho, row_bound
        self.accountant = accountant
        self.random_state = random_state

    @staticmethod
    def _privacy(
        nominal: dp_event.DpEvent | None, eps_iter: float, iters: int, delta: float
    ) -> dict:
        """No guarantee for the release (epsilon = inf); the nominal T eps_k of exact
        minimisers (pure, with the ledger's RDP/PLD of the pure releases as a cross-check)."""
        out = {
            "method": "ADMM-objP",
            "delta": delta,
            "relation": "replace_one",
            "accountant": "none: objective perturbation's proof needs the exact minimiser "
            "of each perturbed subproblem, which this fit does not compute",
            "guarantee": OBJP_GUARANTEE,
            "guarantee_caveat": OBJP_CAVEAT,
            "noise_added": nominal is not None,
            "private": False,
            "epsilon": math.inf,
            "epsilon_pld": math.inf,
            "pure_epsilon": math.inf,
            "epsilon_per_iteration_if_exact": eps_iter,
            "steps": iters,
            "epsilon_if_exact_minimiser": math.inf,
            "epsilon_pld_if_exact_minimiser": math.inf,
        }
        if nominal is not None:
            ledger = PrivacyLedger(delta)
            ledger.record(
                nominal,
                label="ADMM-objP with exact minimisers (hypothetical)",
                relation="replace_one",
                protects="one training row",
            )
            acc = ledger.accounting()
            out.update(
                epsilon_if_exact_minimiser=min(ledger.pure_epsilon(), acc["epsilon"]),
                epsilon_pld_if_exact_minimiser=acc["pld_epsilon"],
            )
        return out

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike) -> ADMMObjPClassifier:
        """Run n_iter perturbed ADMM iterations; sets coef_, privacy_, history_."""
        lam, rho, bound, delta = self.lam, self.rho, self.row_bound, self.delta
        iters, inner = self.n_iter, self.inner_epochs
        loss = get_loss(self.loss, self.huber_h)
        A, ypm = self._validate_training_data(X, y, bound)
        n, p = A.shape
        curv = smoothness(loss, bound)
        jac = 2.0 * math.log1p(curv / (n * rho))
        private = self.epsilon is not None
        eps_iter = math.inf if self.epsilon is None else self.epsilon / iters
        if private and eps_iter <= jac:
            raise PrivacyError(
                f"epsilon/n_iter = {eps_iter:.3g} does not exceed the Jacobian term {jac:.3g}; "
                "raise epsilon or rho, or lower n_iter"
            )
        # an inexact minimiser has no established guarantee (class docstring): inf
        charge(self.accountant, math.inf, 0.0, label=f"{type(self).__name__}.fit")
        rng = streams.estimator_stream(self.random_state)
        step = 1.0 / (curv + rho)
        x, z, yd = np.zeros(p), np.zeros(p), np.zeros(p)
        history = [objective(loss, A, ypm, z, lam)]
        event: dp_event.DpEvent | None = None
        for _ in range(iters):
            b = np.zeros(p)
            if private:
                b, event = objective_perturbation_noise(
                    p,
                    epsilon=eps_iter - jac,
                    sensitivity=2.0 * bound,
                    rng=rng,
                    jacobian_log_bound=jac,
                )
            centre = z - yd / rho
            for _ in range(inner):
                grad = (clipped_gradient_sum(loss, A, ypm, x, math.inf) + b) / n
                x = x - step * (grad + rho * (x - centre))
            z, yd = zy_update(x, yd, rho, lam)
            history.append(objective(loss, A, ypm, z, lam))
        self.nominal_privacy_event_ = (
            dp_event.SelfComposedDpEvent(event, iters) if event is not None else None
        )
        self.privacy_event_ = dp_event.NonPrivateDpEvent()  # inexact minimiser: no guarantee
        self.privacy_ = self._privacy(self.nominal_privacy_event_, eps_iter, iters, delta)
        self.coef_ = z
        self.history_ = np.asarray(history)
        return self
