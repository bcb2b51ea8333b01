"""Pessimistic PLD accounting (dp-accounting's PLDs) with time and memory bounded in advance.

Every PLD epsilon in dpnet (the CLI, :func:`dpnet.privacy.rdp.pld_epsilon`, the ledger) comes
from :func:`pld_accounting`, by one rule:

1. Canonical form. The event is flattened into leaves with counts (SelfComposed multiplies the
   count, Composed concatenates, identical leaves merge: composition commutes). c Gaussians of
   multiplier z are one Gaussian of multiplier z / sqrt(c) (their privacy losses add to a
   Gaussian loss; dp-accounting's PLDAccountant does the same); any other leaf is built once
   and self-composed c times by dp-accounting's FFT (tails of mass 1e-15 moved to infinity).
2. Budget, decided before the expensive part. The grid points of each composed leaf are
   predicted from its single-step loss range (closed form) and dp-accounting's own Chernoff
   bound on the support of the c-fold composition, read on a coarse probe PLD; the leaves'
   points add up under composition. At discretisation 1e-4 above ``max_points`` the grid is
   coarsened (a pessimistic PLD on any grid is still an upper bound), up to 1e-2; beyond
   that, or with more than 1e6 FFT self-compositions of one leaf (the FFT's rounding grows
   with the count), or more than 256 distinct leaves, the PLD is skipped with the reason. The
   prediction is checked on the real grid before composing (at most three coarsenings).

The PMF internals read for step 2 (``_pmf_remove``, ``_probs``) are dp-accounting 0.6's: it has
no public accessor for a PLD's support; any change there makes the PLD "skipped", never wrong.
"""

from __future__ import annotations

import math
from typing import Any, TypeAlias

import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld import privacy_loss_mechanism as pld_mech
from dp_accounting.privacy_accountant import NeighboringRelation

from dpnet.errors import PrivacyError
from dpnet.privacy.events import PureDpEvent

PLD: TypeAlias = pld_lib.PrivacyLossDistribution
PLD_DISCRETIZATION = 1e-4
PLD_MAX_DISCRETIZATION = 1e-2
"""The grid is coarsened up to this interval to fit the budget."""
PLD_MAX_POINTS = 1 << 20
"""Largest PLD support (grid points per PMF) built: ~64 bytes a point at peak, ~1 s per 1e6."""
PLD_MAX_STEPS = 10**6
"""No FFT self-composition beyond this: x**steps amplifies the FFT's rounding ~steps times."""
PLD_MAX_LEAVES = 256
"""Most distinct leaves composed one after another."""
_TAIL = 1e-15  # dp-accounting's tail_mass_truncation of self_compose
_PROBE_POINTS = 2048.0

Leaves = dict[dp_event.DpEvent, int]


def _non_private(leaf: dp_event.DpEvent) -> bool:
    if isinstance(leaf, dp_event.NonPrivateDpEvent):
        return True
    if isinstance(leaf, dp_event.GaussianDpEvent | dp_event.LaplaceDpEvent):
        return not leaf.noise_multiplier > 0
    if isinstance(leaf, dp_event.PoissonSampledDpEvent):
        return _non_private(leaf.event)
    if isinstance(leaf, dp_event.RandomizedResponseDpEvent):
        return leaf.noise_parameter == 0
    return isinstance(leaf, PureDpEvent) and math.isinf(leaf.epsilon)


def leaves(event: dp_event.DpEvent) -> Leaves | None:
    """Leaf -> total count (step 1 of the module docstring); None if some part has no PLD
    (fixed-size sampling). Leaves that release nothing (NoOp, q = 0, one bucket) are dropped."""
    out: Leaves = {}

    def walk(e: dp_event.DpEvent, count: int) -> bool:
        if isinstance(e, dp_event.SelfComposedDpEvent):
            return walk(e.event, count * int(e.count)) if e.count else True
        if isinstance(e, dp_event.ComposedDpEvent):
            return all(walk(x, count) for x in e.events)
        if isinstance(e, dp_event.SampledWithoutReplacementDpEvent):
            return False
        if isinstance(e, dp_event.NoOpDpEvent):
            return True
        if isinstance(e, dp_event.PoissonSampledDpEvent) and e.sampling_probability == 0:
            return True
        if isinstance(e, dp_event.RandomizedResponseDpEvent) and e.num_buckets == 1:
            return True
        if not isinstance(
            e,
            dp_event.NonPrivateDpEvent
            | dp_event.GaussianDpEvent
            | dp_event.PoissonSampledDpEvent
            | dp_event.LaplaceDpEvent
            | dp_event.RandomizedResponseDpEvent
            | PureDpEvent,
        ) or (
            isinstance(e, dp_event.PoissonSampledDpEvent)
            and not isinstance(e.event, dp_event.GaussianDpEvent)
        ):
            raise PrivacyError(f"no PLD for {type(e).__name__}")
        out[e] = out.get(e, 0) + count
        return True

    return out if walk(event, 1) else None


def _base(leaf: dp_event.DpEvent, count: int, dx: float) -> tuple[PLD, int]:
    """(PLD built once, number of FFT self-compositions still to apply) of a leaf."""
    if isinstance(leaf, dp_event.GaussianDpEvent):
        s = leaf.noise_multiplier / math.sqrt(count)
        return pld_lib.from_gaussian_mechanism(s, value_discretization_interval=dx), 1
    if isinstance(leaf, dp_event.PoissonSampledDpEvent):
        pld = pld_lib.from_gaussian_mechanism(
            leaf.event.noise_multiplier,
            sampling_prob=leaf.sampling_probability,
            value_discretization_interval=dx,
        )
    elif isinstance(leaf, dp_event.LaplaceDpEvent):
        pld = pld_lib.from_laplace_mechanism(
            leaf.noise_multiplier, value_discretization_interval=dx
        )
    elif isinstance(leaf, dp_event.RandomizedResponseDpEvent):
        pld = pld_lib.from_randomized_response(
            leaf.noise_parameter,
            leaf.num_buckets,
            value_discretization_interval=dx,
            neighboring_relation=NeighboringRelation.REPLACE_ONE,
        )
    else:
        pld = pld_lib.from_privacy_parameters(
            pld_common.DifferentialPrivacyParameters(float(leaf.epsilon), 0.0),
            value_discretization_interval=dx,
        )
    return pld, count


def _gaussian_width(s: float, q: float = 1.0) -> float:
    """Width of the single-step privacy-loss range dp-accounting discretises (both PMFs)."""
    adjacency = [pld_mech.AdjacencyType.REMOVE]
    if q < 1.0:
        adjacency.append(pld_mech.AdjacencyType.ADD)
    width = 0.0
    for adj in adjacency:
        b = pld_mech.GaussianPrivacyLoss(s, sampling_prob=q, adjacency_type=adj)
        b = b.connect_dots_bounds()
        width = max(width, float(b.epsilon_upper) - float(b.epsilon_lower))
    return width


def _width(leaf: dp_event.DpEvent, count: int) -> float:
    """Width of the privacy-loss range of the PLD :func:`_base` builds (closed forms)."""
    if isinstance(leaf, dp_event.GaussianDpEvent):
        return _gaussian_width(leaf.noise_multiplier / math.sqrt(count))
    if isinstance(leaf, dp_event.PoissonSampledDpEvent):
        return _gaussian_width(leaf.event.noise_multiplier, leaf.sampling_probability)
    if isinstance(leaf, dp_event.LaplaceDpEvent):
        return 2.0 / leaf.noise_multiplier
    if isinstance(leaf, dp_event.RandomizedResponseDpEvent):
        p, k = leaf.noise_parameter, leaf.num_buckets
        return 2.0 * math.log1p(k * (1.0 - p) / p)
    return 2.0 * float(leaf.epsilon)


def _dense_pmfs(pld: PLD) -> list:
    """The remove PMF (and the add PMF when asymmetric) of a dp-accounting PLD, as dense PMFs."""
    pmfs = [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]
    return [p.to_dense_pmf() for p in pmfs]


def _span(pmf: Any) -> int:
    """Grid points between a PMF's smallest and largest loss, without densifying it."""
    losses = getattr(pmf, "_loss_probs", None)
    if losses is None:  # dense
        return int(pmf.size)
    return max(losses) - min(losses) + 1 if losses else 0


def _composed_points(pld: PLD, times: int) -> float:
    """Grid points dp-accounting's dense self_compose allocates (its own Chernoff bounds);
    inf when those bounds cross (then its FFT would return an empty PMF)."""
    if times == 1:
        pmfs = [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]
        return float(max(_span(p) for p in pmfs))
    pmfs = _dense_pmfs(pld)
    sizes = []
    for p in pmfs:
        lo, hi = pld_common.compute_self_convolve_bounds(p._probs, times, _TAIL)
        sizes.append(max(float(hi) - float(lo) + 1.0, p.size) if lo <= hi else math.inf)
    return max(sizes)


def _skipped(why: str) -> dict:
    return {"pld_epsilon": None, "pld_discretization": None, "pld_note": f"skipped: {why}"}


def _predicted_points(items: Leaves, dx: float) -> float:
    """Step 2's prediction of the composed support at discretisation dx, from probe PLDs."""
    need = 0.0
    for leaf, count in items.items():
        width = _width(leaf, count)
        probe_dx = max(dx, width / _PROBE_POINTS)
        probe, times = _base(leaf, count, probe_dx)
        need += max(_composed_points(probe, times) * probe_dx, width) / dx * 1.25 + 16.0
    return need


def _build(items: Leaves, max_points: int) -> tuple[PLD, float] | dict:
    """The composed PLD of the leaves and its discretisation, or a "skipped" result."""
    dx = PLD_DISCRETIZATION
    need = _predicted_points(items, dx)  # L * dx grows slowly as dx shrinks: margin, then check
    if math.isfinite(need) and need > max_points:
        dx = dx * need / max_points
    for _ in range(3):
        if math.isinf(need):
            return _skipped("dp-accounting's Chernoff bounds on the composed support cross")
        if not (math.isfinite(need) and dx <= PLD_MAX_DISCRETIZATION):
            return _skipped(
                f"would need ~{need:.3g} grid points (~{need * 64 / 2**20:.3g} MB) at "
                f"discretisation {PLD_DISCRETIZATION:g}, more than {max_points} even at "
                f"{PLD_MAX_DISCRETIZATION:g} (too fine a discretisation)"
            )
        bases = [_base(leaf, count, dx) for leaf, count in items.items()]
        points = sum(_composed_points(pld, times) for pld, times in bases)
        if points <= max_points:
            break
        need, dx = points * dx / PLD_DISCRETIZATION, dx * 1.1 * points / max_points
    else:
        return _skipped(f"would need {points:.3g} grid points, more than {max_points}")
    plds = [pld.self_compose(times, _TAIL) if times > 1 else pld for pld, times in bases]
    out = plds[0]
    for pld in plds[1:]:
        out = out.compose(pld)
    return out, dx


def _bounded(event: dp_event.DpEvent, max_points: int) -> tuple[PLD | None, dict]:
    """The PLD (None if there is none, the release is not private, or it was skipped) and the
    result fields of :func:`pld_accounting` other than the epsilon."""
    items = leaves(event)
    if items is None:
        return None, {"pld_discretization": None, "pld_note": "no PLD for fixed-size sampling"}
    if any(_non_private(leaf) for leaf in items):
        return None, {"pld_discretization": None, "pld_note": "not private"}
    if len(items) > PLD_MAX_LEAVES:
        return None, _skipped(f"more than {PLD_MAX_LEAVES} distinct releases to compose")
    ffts = (c for leaf, c in items.items() if not isinstance(leaf, dp_event.GaussianDpEvent))
    if max(ffts, default=0) > PLD_MAX_STEPS:
        return None, _skipped(
            f"more than {PLD_MAX_STEPS:.0e} steps (the FFT composition's rounding error "
            "grows with the number of steps)"
        )
    if not items:
        pld = pld_lib.identity(value_discretization_interval=PLD_DISCRETIZATION)
        return pld, {"pld_discretization": PLD_DISCRETIZATION, "pld_note": ""}
    try:
        with np.errstate(all="ignore"):
            built = _build(items, max_points)
    except (ArithmeticError, ValueError, AttributeError) as exc:  # overflow at extremes;
        # AttributeError: dp-accounting's PMF internals changed (module docstring)
        return None, _skipped(f"dp-accounting cannot build this PLD ({type(exc).__name__}: {exc})")
    if isinstance(built, dict):
        return None, built
    pld, dx = built
    note = (
        ""
        if dx == PLD_DISCRETIZATION
        else f"discretisation {dx:.3g}: coarser, still an upper bound"
    )
    return pld, {"pld_discretization": dx, "pld_note": note}


def event_pld(event: dp_event.DpEvent, max_points: int = PLD_MAX_POINTS) -> PLD | None:
    """Pessimistic PLD of ``event`` within the budget; None if there is no PLD (fixed-size
    sampling), the release is not private, or the budget skipped it."""
    return _bounded(event, max_points)[0]


_CACHE: dict[tuple[str, float, int], dict] = {}
_CACHE_SIZE = 256


def pld_accounting(event: dp_event.DpEvent, delta: float, max_points: int = PLD_MAX_POINTS) -> dict:
    """Pessimistic PLD epsilon of ``event`` at ``delta``, within the budget (module docstring).

    Returns {"pld_epsilon": float | None, "pld_discretization": float | None, "pld_note": str}:
    epsilon inf for a non-private release; None with a note when there is no PLD
    (fixed-size sampling) or it was skipped; the note also says when the grid was coarsened.
    Answers are cached by the event's repr (attrs: every field): a fit repeated with the same
    settings, as audits do thousands of times, is accounted once.
    """
    key = (repr(event), float(delta), int(max_points))
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = _pld_accounting(event, delta, max_points)
    return dict(_CACHE[key])


def _pld_accounting(event: dp_event.DpEvent, delta: float, max_points: int) -> dict:
    if not 0.0 < float(delta) < 1.0:
        raise PrivacyError(f"delta must lie in (0, 1), got {delta}")
    pld, info = _bounded(event, max_points)
    if info["pld_note"] == "not private":
        return {"pld_epsilon": math.inf, **info}
    if pld is None:
        return {"pld_epsilon": None, **info}
    with np.errstate(all="ignore"):
        eps = float(pld.get_epsilon_for_delta(delta))
    if math.isnan(eps):
        return _skipped("dp-accounting returned NaN")
    return {"pld_epsilon": eps, **info}
