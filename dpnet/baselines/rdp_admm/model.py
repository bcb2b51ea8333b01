"""Model perturbation private ADMM (mpADMM; Chen & Lee, Alg. 2), self-consistent reading.

Every epoch takes one unperturbed full-batch linearised ADMM step from the public state
(x~, z~, y~) and then perturbs the result:

    g      = (1/n) sum_i clip_C(g_i(x~))
    x+     = (x~ / eta + rho z~ - y~ - g) / (1/eta + rho)
    z+     = S_{lam/rho}(x+ + y~ / rho),     y+ = y~ + rho (x+ - z+).

Sensitivity (replace-one; the public state is the same on neighbours D, D'): only g changes,
by ||g - g'|| <= 2C/n, hence

    Delta_x = 2 C eta / (n (1 + eta rho)),   Delta_z <= Delta_x,   Delta_y <= rho Delta_x,

the last two because soft-thresholding moves each coordinate difference towards zero without
changing its sign (the paper's argument), so |dz_j| <= |dx_j| and |dy_j| = rho |dx_j - dz_j|
<= rho |dx_j|.

``perturb="xzy"`` (the paper): x+, z+, y+ each get N(0, (z Delta)^2 I) with their own Delta:
three Gaussian releases per epoch. ``perturb="x"`` (default): release only
x~+ = x+ + N(0, (z Delta_x)^2 I) and recompute z~+ = S_{lam/rho}(x~+ + y~/rho),
y~+ = y~ + rho (x~+ - z~+), which are post-processing of x~+ and the public y~: one release per
epoch, a third of the RDP (equivalently, the same epsilon with noise std / sqrt(3)).
coef_ = z~ after the last epoch.
"""

from __future__ import annotations

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
from dpnet.losses.margin import MarginLoss
from dpnet.params import FINITE_POSITIVE, POSITIVE_INT
from dpnet.privacy.budget import BudgetAccountant

PERTURB_MODES = ("x", "xzy")


def mpadmm_sensitivities(n: int, eta: float, rho: float, clip: float) -> tuple[float, float, float]:
    """(Delta_x, Delta_z, Delta_y) of one epoch under replace-one (module docstring)."""
    dx = 2.0 * clip * eta / (n * (1.0 + eta * rho))
    return dx, dx, rho * dx


def mpadmm_epoch(
    loss: MarginLoss,
    X: np.ndarray,
    ypm: np.ndarray,
    x: np.ndarray,
    z: np.ndarray,
    y: np.ndarray,
    *,
    eta: float,
    rho: float,
    lam: float,
    clip: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One unperturbed full-batch epoch (x+, z+, y+) from the public state (x, z, y)."""
    g = clipped_gradient_sum(loss, X, ypm, x, clip) / X.shape[0]
    x_new = linearised_x_update(x, z, y, g, eta, rho)
    z_new, y_new = zy_update(x_new, y, rho, lam)
    return x_new, z_new, y_new


class MPADMMClassifier(DPLinearClassifier):
    """Model perturbation private ADMM for L1-regularised classification.

    Parameters: lam, loss, huber_h, epsilon/delta or noise_multiplier (as SSADMMClassifier),
    n_epochs (full-batch epochs = Gaussian releases), eta (constant; default 1/c with c the
    loss curvature bound times row_bound^2), rho (0.5), clip (C), row_bound, perturb
    ("x" or "xzy", module docstring), random_state.
    After fit: coef_ (= z~), classes_, privacy_, privacy_event_, history_ (training objective
    after each epoch; a diagnostic, not a private release).
    """

    _parameter_constraints: dict = {
        **DPLinearClassifier._parameter_constraints,
        **GAUSSIAN_NOISE_CONSTRAINTS,
        "n_epochs": [POSITIVE_INT],
        "eta": [FINITE_POSITIVE, None],
        "rho": [FINITE_POSITIVE],
        "perturb": [StrOptions(set(PERTURB_MODES))],
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
        n_epochs: int = 20,
        eta: float | None = None,
        rho: float = 0.5,
        clip: float = DEFAULT_CLIP,
        row_bound: float = DEFAULT_ROW_BOUND,
        perturb: str = "x",
        accountant: BudgetAccountant | None = None,
        random_state: int | None = None,
    ):
        self.lam, self.loss, self.huber_h = lam, loss, huber_h
        self.epsilon, self.delta, self.noise_multiplier = epsilon, delta, noise_multiplier
        self.n_epochs, self.eta, self.rho, self.clip = n_epochs, eta, rho, clip
        self.accountant = accountant
        self.row_bound, self.perturb, self.random_state = row_bound, perturb, random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike) -> MPADMMClassifier:
        """Run n_epochs perturbed full-batch epochs; sets coef_, privacy_, history_."""
        lam, rho, clip, bound = self.lam, self.rho, self.clip, self.row_bound
        epochs = self.n_epochs
        loss = get_loss(self.loss, self.huber_h)
        eta = 1.0 / smoothness(loss, bound) if self.eta is None else self.eta
        A, ypm = self._validate_training_data(X, y, bound)
        n, p = A.shape
        dx, dz, dy = mpadmm_sensitivities(n, eta, rho, clip)
        k = 1 if self.perturb == "x" else 3
        self.privacy_, self.privacy_event_ = gaussian_composition_privacy(
            method="mpADMM",
            n=n,
            steps=epochs,
            releases_per_step=k,
            l2_sensitivity=dx,
            epsilon=self.epsilon,
            delta=self.delta,
            noise_multiplier=self.noise_multiplier,
        )
        self.privacy_.update(perturb=self.perturb, sensitivities={"x": dx, "z": dz, "y": dy})
        self._charge()
        mult = self.privacy_["noise_multiplier"]
        rng = streams.estimator_stream(self.random_state)
        x, z, yd = np.zeros(p), np.zeros(p), np.zeros(p)
        history = [objective(loss, A, ypm, z, lam)]
        for _ in range(epochs):
            x, z_exact, y_exact = mpadmm_epoch(
                loss, A, ypm, x, z, yd, eta=eta, rho=rho, lam=lam, clip=clip
            )
            x = release(x, dx, mult, rng)
            if self.perturb == "x":
                z, yd = zy_update(x, yd, rho, lam)
            else:
                z = release(z_exact, dz, mult, rng)
                yd = release(y_exact, dy, mult, rng)
            history.append(objective(loss, A, ypm, z, lam))
        self.coef_ = z
        self.history_ = np.asarray(history)
        return self
