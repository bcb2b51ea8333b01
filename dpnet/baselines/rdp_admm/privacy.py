"""Privacy plumbing of the Rényi-DP ADMM baselines: noise calibration and the ``privacy_`` report.

Each fit is described by one dp-accounting event (``privacy_event_``):

- gradient perturbation (ssADMM, DP-SGD): T steps of a sampled Gaussian, either
  SampledWithoutReplacementDpEvent(n, m, Gaussian(z)) (replace-one, Wang, Balle &
  Kasiviswanathan 2019, Thm 27) or PoissonSampledDpEvent(m/n, Gaussian(z)) (add/remove,
  Mironov, Talwar & Zhang 2019);
- full-batch model perturbation (mpADMM, DP-ADMM): T compositions of ``k`` Gaussians(z);
- objective perturbation (ADMM-objP): T compositions of a pure-epsilon release.

Calibration and accounting are dpnet.privacy.rdp's: epsilon at the run's delta is reported
from RDP and from PLD when there is one (dp-accounting's PLD has no sampling-without-replacement
event; dpnet.privacy.pld bounds its time and memory).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from dp_accounting import dp_event

from dpnet.baselines.rdp_admm.common import BatchSampler
from dpnet.errors import ConfigError
from dpnet.privacy.rdp import (
    DEFAULT_ORDERS,
    calibrate_noise_multiplier,
    epsilon_for,
    pld_epsilon,
    sampled_gaussian_event,
)

CALIBRATION_ORDERS = np.concatenate(
    [
        np.arange(1.25, 2.0, 0.25),
        np.arange(2.0, 12.0, 0.5),
        np.arange(12.0, 33.0),
        [36, 40, 44, 48, 56, 64, 80, 96, 128, 160, 192, 256, 384, 512, 1024],
    ]
)
"""A coarse subset of the default orders for calibrating Poisson and full-batch noise: an RDP
bound on fewer orders is still a valid (larger) epsilon, so z calibrated on it meets the
target; the reported epsilon then uses the full default grid. Fixed-size batches are
calibrated on the full default grid (their calibration is fast, dpnet.privacy.fixed_size)."""


@functools.lru_cache(maxsize=512)
def _calibrate(epsilon: float, delta: float, sampling: str, q: float, steps: int, n: int) -> float:
    orders = DEFAULT_ORDERS if sampling == "fixed" and q < 1.0 else CALIBRATION_ORDERS
    return calibrate_noise_multiplier(epsilon, delta, sampling, q, steps, n=n, orders=orders)


@functools.lru_cache(maxsize=512)
def _accounting(
    sampling: str, q: float, z: float, steps: int, delta: float, n: int, with_pld: bool
) -> dict[str, Any]:
    return epsilon_for(sampling, q, z, steps, delta, n=n, with_pld=with_pld)


def _full_batch_event(z: float, steps: int, k: int) -> dp_event.DpEvent:
    step = (
        dp_event.GaussianDpEvent(z)
        if k == 1
        else dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(z)] * k)
    )
    return dp_event.SelfComposedDpEvent(step, steps)


@functools.lru_cache(maxsize=512)
def _full_batch_pld(z: float, steps: int, k: int, delta: float) -> float | None:
    return pld_epsilon(_full_batch_event(z, steps, k), delta)


def resolve_noise_multiplier(
    epsilon: float | None, noise_multiplier: float | None, calibrate: Callable[[float], float]
) -> float:
    """z from exactly one of epsilon (calibrated) or noise_multiplier; both None means z = 0.
    Their values are the estimators' to check (``_parameter_constraints``)."""
    if epsilon is not None and noise_multiplier is not None:
        raise ConfigError("give either epsilon or noise_multiplier, not both")
    if noise_multiplier is not None:
        return float(noise_multiplier)
    if epsilon is None:
        return 0.0
    return float(calibrate(float(epsilon)))


def _report(
    method: str,
    *,
    accountant: str,
    noise_multiplier: float,
    l2_sensitivity: float,
    accounting: dict[str, Any] | None,
    relation: str,
    delta: float,
    **extra: Any,
) -> dict[str, Any]:
    """The ``privacy_`` dict: epsilon (RDP), epsilon_pld, delta, relation, accountant, noise."""
    out: dict[str, Any] = {
        "method": method,
        "delta": delta,
        "relation": relation,
        "accountant": accountant,
        "noise_multiplier": noise_multiplier,
        "l2_sensitivity": l2_sensitivity,
        **extra,
    }
    if accounting is None:
        out.update(epsilon=math.inf, epsilon_pld=math.inf, best_order=None, private=False)
    else:
        out.update(
            epsilon=accounting["epsilon"],
            epsilon_pld=accounting["pld_epsilon"],
            best_order=accounting["best_order"],
            private=True,
        )
    return out


def sampled_gaussian_privacy(
    *,
    method: str,
    sampler: BatchSampler,
    steps: int,
    clip: float,
    epsilon: float | None,
    delta: float,
    noise_multiplier: float | None,
) -> tuple[dict[str, Any], dp_event.DpEvent]:
    """Calibrate z (if epsilon is given) and account T sampled-Gaussian steps of the sampler."""
    kw: dict[str, Any] = {
        "sampling": sampler.sampling,
        "q": sampler.q,
        "steps": steps,
        "n": sampler.n,
    }
    z = resolve_noise_multiplier(
        epsilon, noise_multiplier, lambda eps: _calibrate(eps, delta, **kw)
    )
    if z == 0:
        event, acc = dp_event.NonPrivateDpEvent(), None
    else:
        event = sampled_gaussian_event(noise_multiplier=z, **kw)
        acc = dict(_accounting(sampler.sampling, sampler.q, z, steps, delta, sampler.n, True))
    accountant = (
        "RDP of the Gaussian on batches sampled without replacement (Wang, Balle & "
        "Kasiviswanathan 2019, Thm 27); no PLD for this sampler"
        if sampler.sampling == "fixed"
        else "RDP (Mironov, Talwar & Zhang 2019) and PLD of the Poisson-sampled Gaussian"
    )
    info = _report(
        method,
        accountant=accountant,
        noise_multiplier=z,
        l2_sensitivity=sampler.sensitivity(clip),
        accounting=acc,
        relation=sampler.relation,
        delta=delta,
        sampling=sampler.sampling,
        batch_size=sampler.batch_size,
        steps=steps,
    )
    return info, event


def gaussian_composition_privacy(
    *,
    method: str,
    n: int,
    steps: int,
    releases_per_step: int,
    l2_sensitivity: float,
    epsilon: float | None,
    delta: float,
    noise_multiplier: float | None,
) -> tuple[dict[str, Any], dp_event.DpEvent]:
    """T steps of ``k`` full-batch Gaussian releases, each with noise z times its own
    replace-one sensitivity: RDP T k alpha / (2 z^2); PLD of the same composition."""
    k = releases_per_step
    z = resolve_noise_multiplier(
        epsilon, noise_multiplier, lambda eps: _calibrate(eps, delta, "fixed", 1.0, steps * k, n)
    )
    if z == 0:
        event, acc = dp_event.NonPrivateDpEvent(), None
    else:
        event = _full_batch_event(z, steps, k)
        acc = dict(_accounting("fixed", 1.0, z, steps * k, delta, n, False))
        acc["pld_epsilon"] = _full_batch_pld(z, steps, k, delta)
    info = _report(
        method,
        accountant="RDP and PLD of the composed Gaussian mechanism",
        noise_multiplier=z,
        l2_sensitivity=l2_sensitivity,
        accounting=acc,
        relation="replace_one",
        delta=delta,
        sampling="full batch",
        steps=steps,
        releases_per_step=k,
    )
    return info, event
