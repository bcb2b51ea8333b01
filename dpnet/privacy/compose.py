"""Per-event privacy costs: pure epsilon and RDP curve of a dp-accounting DpEvent (PLDs:
:mod:`dpnet.privacy.pld`).

Supported events: NoOp, NonPrivate, Gaussian, Laplace (scalar), RandomizedResponse,
dpnet's PureDpEvent, PoissonSampled(Gaussian), SampledWithoutReplacement(Gaussian),
SelfComposed and Composed of these. Anything else raises PrivacyError.
Laplace RDP: Mironov 2017, Prop. 6; LaplaceDpEvent is the continuous Laplace mechanism, and
dpnet's own (discrete) Laplace releases are recorded as PureDpEvent instead. Randomized
response RDP (replace-one, k buckets, noise parameter p): Renyi divergence between
[1-p+p/k, p/k, ...] and [p/k, 1-p+p/k, p/k, ...].
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting import dp_event
from scipy import special

from dpnet.errors import PrivacyError
from dpnet.privacy import rdp as rdp_lib
from dpnet.privacy.events import PureDpEvent

_SAMPLED = (dp_event.PoissonSampledDpEvent, dp_event.SampledWithoutReplacementDpEvent)


def _unsupported(event: dp_event.DpEvent) -> PrivacyError:
    return PrivacyError(f"the privacy accountant does not support {type(event).__name__}")


def _gaussian_multiplier(event: dp_event.DpEvent) -> float:
    if not isinstance(event, dp_event.GaussianDpEvent):
        raise PrivacyError(f"a sampled event must wrap a GaussianDpEvent, got {event!r}")
    if not event.noise_multiplier > 0:
        raise PrivacyError(f"noise_multiplier must be > 0, got {event.noise_multiplier}")
    return float(event.noise_multiplier)


def rr_epsilon(noise_parameter: float, num_buckets: int) -> float:
    """epsilon of k-ary RR with dp-accounting's noise parameter p: ln((1 - p + p/k)/(p/k))."""
    p, k = float(noise_parameter), int(num_buckets)
    if k == 1:
        return 0.0
    if p == 0.0:
        return math.inf
    return math.log1p(k * (1.0 - p) / p)


def pure_epsilon(event: dp_event.DpEvent) -> float:
    """Pure epsilon of an event (inf when it has no pure-DP guarantee)."""
    if isinstance(event, dp_event.NoOpDpEvent):
        return 0.0
    if isinstance(event, PureDpEvent):
        return float(event.epsilon)
    if isinstance(event, dp_event.LaplaceDpEvent):
        return 1.0 / event.noise_multiplier if event.noise_multiplier > 0 else math.inf
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        return rr_epsilon(event.noise_parameter, event.num_buckets)
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return event.count * pure_epsilon(event.event)
    if isinstance(event, dp_event.ComposedDpEvent):
        return float(sum(pure_epsilon(e) for e in event.events))
    check_supported(event)
    return math.inf


def check_supported(event: dp_event.DpEvent) -> None:
    """Raise PrivacyError unless every part of ``event`` is supported."""
    if isinstance(event, dp_event.SelfComposedDpEvent):
        if int(event.count) != event.count or event.count < 0:
            raise PrivacyError(f"SelfComposedDpEvent count must be >= 0, got {event.count}")
        check_supported(event.event)
    elif isinstance(event, dp_event.ComposedDpEvent):
        for e in event.events:
            check_supported(e)
    elif isinstance(event, _SAMPLED):
        _gaussian_multiplier(event.event)
    elif not isinstance(
        event,
        dp_event.NoOpDpEvent
        | dp_event.NonPrivateDpEvent
        | dp_event.GaussianDpEvent
        | dp_event.LaplaceDpEvent
        | dp_event.RandomizedResponseDpEvent
        | PureDpEvent,
    ):
        raise _unsupported(event)


def samplers(event: dp_event.DpEvent) -> set[str]:
    """Sampling schemes used inside an event: subset of {"poisson", "fixed"}."""
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        return {"poisson"}
    if isinstance(event, dp_event.SampledWithoutReplacementDpEvent):
        return {"fixed"}
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return samplers(event.event)
    if isinstance(event, dp_event.ComposedDpEvent):
        return set().union(*(samplers(e) for e in event.events))
    return set()


def laplace_rdp(noise_multiplier: float, orders: np.ndarray) -> np.ndarray:
    """RDP of the Laplace mechanism with scale/sensitivity b (Mironov 2017, Prop. 6):
    (1/(a-1)) ln( a/(2a-1) e^((a-1)/b) + (a-1)/(2a-1) e^(-a/b) )."""
    a, inv_b = orders, 1.0 / noise_multiplier
    log_terms = np.stack(
        [np.log(a / (2 * a - 1)) + (a - 1) * inv_b, np.log((a - 1) / (2 * a - 1)) - a * inv_b]
    )
    return special.logsumexp(log_terms, axis=0) / (a - 1)


def rr_rdp(noise_parameter: float, num_buckets: int, orders: np.ndarray) -> np.ndarray:
    """RDP of k-ary RR under replace-one: D_a([1-p+p/k, p/k, (k-2) x p/k] || swapped)."""
    p, k = float(noise_parameter), int(num_buckets)
    if k == 1 or p == 1.0:
        return np.zeros_like(orders)
    if p == 0.0:
        return np.full_like(orders, np.inf)
    hi, lo = math.log1p(-p + p / k), math.log(p / k)
    a = orders
    log_terms = [a * hi + (1 - a) * lo, a * lo + (1 - a) * hi]
    if k > 2:
        log_terms.append(np.full_like(a, math.log((k - 2) * p / k)))
    return special.logsumexp(np.stack(log_terms), axis=0) / (a - 1)


def event_rdp(event: dp_event.DpEvent, orders: np.ndarray) -> np.ndarray:
    """RDP curve of an event at the given orders (each > 1)."""
    if isinstance(event, dp_event.NoOpDpEvent):
        return np.zeros_like(orders)
    if isinstance(event, dp_event.NonPrivateDpEvent):
        return np.full_like(orders, np.inf)
    if isinstance(event, dp_event.GaussianDpEvent):
        s = _gaussian_multiplier(event)
        return orders / (2.0 * s * s)
    if isinstance(event, dp_event.LaplaceDpEvent):
        if not event.noise_multiplier > 0:
            return np.full_like(orders, np.inf)
        return laplace_rdp(event.noise_multiplier, orders)
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        return rr_rdp(event.noise_parameter, event.num_buckets, orders)
    if isinstance(event, PureDpEvent):
        eps = float(event.epsilon)
        return np.minimum(eps, orders * eps * eps / 2.0)
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        s = _gaussian_multiplier(event.event)
        return rdp_lib.rdp_poisson_gaussian(event.sampling_probability, s, orders)
    if isinstance(event, dp_event.SampledWithoutReplacementDpEvent):
        s = _gaussian_multiplier(event.event)
        return rdp_lib.rdp_fixed_size_gaussian(
            event.sample_size, event.source_dataset_size, s, orders
        )
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return event.count * event_rdp(event.event, orders) if event.count else 0 * orders
    if isinstance(event, dp_event.ComposedDpEvent):
        return sum((event_rdp(e, orders) for e in event.events), np.zeros_like(orders))
    raise _unsupported(event)
