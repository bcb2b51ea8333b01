"""Gradient perturbation on sampled mini-batches: ssADMM (Chen & Lee, Alg. 1) and DP-SGD.

At step k a batch B_k of expected size m is drawn by the sampler (default m = round(sqrt(n))),
and the released quantity is the noisy mean clipped gradient at the current x_k,

    g~_k = (1/m) [ sum_{i in B_k} clip_C(g_i(x_k)) + N(0, sigma^2 I) ],   sigma = z Delta,

with Delta = 2C (fixed-size sampling without replacement, replace-one relation) or C (Poisson
sampling, add/remove relation). Everything else is post-processing of the released g~_k:

ssADMM (linearised stochastic ADMM of Ouyang et al. 2013 on x - z = 0, unscaled dual y):
    x_{k+1} = (x_k / eta_k + rho z_k - y_k - g~_k) / (1/eta_k + rho)
    z_{k+1} = S_{lam/rho}(x_{k+1} + y_k / rho)
    y_{k+1} = y_k + rho (x_{k+1} - z_{k+1});                  coef_ = z (sparse).
DP-SGD with a proximal L1 step:
    x_{k+1} = S_{eta_k lam}(x_k - eta_k g~_k);                 coef_ = x.

eta_k = eta0 / h with h the current expected epoch (ceil(n/m) steps make one expected epoch).
The privacy of the whole run is the composition of n_epochs * ceil(n/m) sampled Gaussians.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import _fit_context
from sklearn.utils._param_validation import StrOptions

from dpnet import streams
from dpnet.baselines.rdp_admm.common import (
    DEFAULT_CLIP,
    DEFAULT_DELTA,
    DEFAULT_EPSILON,
    DEFAULT_HUBER_H,
    DEFAULT_LAM,
    DEFAULT_ROW_BOUND,
    GAUSSIAN_NOISE_CONSTRAINTS,
    SAMPLINGS,
    BatchSampler,
    DPLinearClassifier,
    clipped_gradient_sum,
    get_loss,
    linearised_x_update,
    objective,
    zy_update,
)
from dpnet.baselines.rdp_admm.privacy import sampled_gaussian_privacy
from dpnet.params import FINITE_POSITIVE, POSITIVE_INT
from dpnet.penalties.l1 import soft_threshold
from dpnet.privacy.budget import BudgetAccountant
from dpnet.privacy.mechanisms import gaussian_mechanism


class _GradientPerturbationClassifier(DPLinearClassifier):
    """Fit loop shared by ssADMM and DP-SGD; subclasses define the update from g~."""

    _method = ""
    _parameter_constraints: dict = {
        **DPLinearClassifier._parameter_constraints,
        **GAUSSIAN_NOISE_CONSTRAINTS,
        "n_epochs": [POSITIVE_INT],
        "batch_size": [POSITIVE_INT, None],
        "sampling": [StrOptions(set(SAMPLINGS))],
        "eta0": [FINITE_POSITIVE],
    }

    def _start(self, p: int) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _update(self, state: dict[str, np.ndarray], grad: np.ndarray, eta: float) -> None:
        raise NotImplementedError

    def _output(self, state: dict[str, np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike) -> _GradientPerturbationClassifier:
        """Run n_epochs expected epochs; sets coef_, classes_, privacy_, history_."""
        lam, clip, eta0, epochs = self.lam, self.clip, self.eta0, self.n_epochs
        loss = get_loss(self.loss, self.huber_h)
        A, ypm = self._validate_training_data(X, y, self.row_bound)
        n, p = A.shape
        m = max(1, round(math.sqrt(n))) if self.batch_size is None else self.batch_size
        rng = streams.estimator_stream(self.random_state)
        sampler = BatchSampler(self.sampling, n, m, rng)
        per_epoch = math.ceil(n / sampler.batch_size)
        self.privacy_, self.privacy_event_ = sampled_gaussian_privacy(
            method=self._method,
            sampler=sampler,
            steps=epochs * per_epoch,
            clip=clip,
            epsilon=self.epsilon,
            delta=self.delta,
            noise_multiplier=self.noise_multiplier,
        )
        self._charge()
        mult, sens = self.privacy_["noise_multiplier"], self.privacy_["l2_sensitivity"]
        state = self._start(p)
        history = [objective(loss, A, ypm, self._output(state), lam)]
        for epoch in range(1, epochs + 1):
            eta = eta0 / epoch
            for _ in range(per_epoch):
                idx = sampler.draw()
                total = clipped_gradient_sum(loss, A[idx], ypm[idx], state["x"], clip)
                if mult > 0:
                    noisy, _ = gaussian_mechanism(
                        total, l2_sensitivity=sens, noise_multiplier=mult, rng=rng
                    )
                    total = cast(np.ndarray, noisy)  # a vector in, a vector out
                self._update(state, total / sampler.batch_size, eta)
            history.append(objective(loss, A, ypm, self._output(state), lam))
        self.coef_ = self._output(state)
        self.history_ = np.asarray(history)
        self.n_steps_ = epochs * per_epoch
        return self


class SSADMMClassifier(_GradientPerturbationClassifier):
    """Subsampling private stochastic ADMM (ssADMM) for L1-regularised classification.

    Parameters: lam (L1 weight), loss ("logistic" | "huberized_hinge", width huber_h),
    epsilon/delta (target (epsilon, delta); the noise multiplier is calibrated by RDP) or an
    explicit noise_multiplier (0, or epsilon=None with noise_multiplier=None: no noise, not
    private), n_epochs (expected epochs), batch_size (default round(sqrt(n))), sampling
    ("fixed": without replacement + replace-one; "poisson": add/remove), eta0, rho, clip (C),
    row_bound (rows must satisfy ||s_i|| <= row_bound), random_state.

    After fit: coef_ (= z), classes_, privacy_ (epsilon at delta by RDP and PLD, relation,
    accountant, noise), privacy_event_ (dp-accounting event of the run), history_ (objective on
    the training data after each expected epoch: a diagnostic, not a private release).
    """

    _method = "ssADMM"
    _parameter_constraints: dict = {
        **_GradientPerturbationClassifier._parameter_constraints,
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
        n_epochs: int = 10,
        batch_size: int | None = None,
        sampling: str = "fixed",
        eta0: float = 1.0,
        rho: float = 0.25,
        clip: float = DEFAULT_CLIP,
        row_bound: float = DEFAULT_ROW_BOUND,
        accountant: BudgetAccountant | None = None,
        random_state: int | None = None,
    ):
        self.lam, self.loss, self.huber_h = lam, loss, huber_h
        self.epsilon, self.delta, self.noise_multiplier = epsilon, delta, noise_multiplier
        self.n_epochs, self.batch_size, self.sampling = n_epochs, batch_size, sampling
        self.eta0, self.rho, self.clip, self.row_bound = eta0, rho, clip, row_bound
        self.accountant = accountant
        self.random_state = random_state

    def _start(self, p: int) -> dict[str, np.ndarray]:
        return {"x": np.zeros(p), "z": np.zeros(p), "y": np.zeros(p)}

    def _update(self, state: dict[str, np.ndarray], grad: np.ndarray, eta: float) -> None:
        state["x"] = linearised_x_update(state["x"], state["z"], state["y"], grad, eta, self.rho)
        state["z"], state["y"] = zy_update(state["x"], state["y"], self.rho, self.lam)

    def _output(self, state: dict[str, np.ndarray]) -> np.ndarray:
        return state["z"].copy()


class DPSGDClassifier(_GradientPerturbationClassifier):
    """DP-SGD with a proximal L1 step, x <- S_{eta lam}(x - eta g~): same sampler and accountant
    as :class:`SSADMMClassifier` (same parameters without rho; coef_ = x)."""

    _method = "DP-SGD"

    def __init__(
        self,
        lam: float = DEFAULT_LAM,
        *,
        loss: str = "logistic",
        huber_h: float = DEFAULT_HUBER_H,
        epsilon: float | None = DEFAULT_EPSILON,
        delta: float = DEFAULT_DELTA,
        noise_multiplier: float | None = None,
        n_epochs: int = 10,
        batch_size: int | None = None,
        sampling: str = "fixed",
        eta0: float = 1.0,
        clip: float = DEFAULT_CLIP,
        row_bound: float = DEFAULT_ROW_BOUND,
        accountant: BudgetAccountant | None = None,
        random_state: int | None = None,
    ):
        self.lam, self.loss, self.huber_h = lam, loss, huber_h
        self.epsilon, self.delta, self.noise_multiplier = epsilon, delta, noise_multiplier
        self.n_epochs, self.batch_size, self.sampling = n_epochs, batch_size, sampling
        self.eta0, self.clip, self.row_bound = eta0, clip, row_bound
        self.accountant = accountant
        self.random_state = random_state

    def _start(self, p: int) -> dict[str, np.ndarray]:
        return {"x": np.zeros(p)}

    def _update(self, state: dict[str, np.ndarray], grad: np.ndarray, eta: float) -> None:
        state["x"] = soft_threshold(state["x"] - eta * grad, eta * self.lam)

    def _output(self, state: dict[str, np.ndarray]) -> np.ndarray:
        return state["x"].copy()
