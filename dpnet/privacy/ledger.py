"""One PrivacyLedger per run: every release is recorded and composed here.

Composition (all releases must share one neighbouring relation):
- releases on the same data compose sequentially (epsilons add; RDP curves add; PLDs
  convolve, within :mod:`dpnet.privacy.pld`'s time and memory budget);
- machine j's releases touch only its own disjoint shard, so a person in shard j is exposed
  to the central releases plus machine j's (parallel composition, McSherry 2009): the run's
  guarantee is the worst machine, max_j cost(central + machine j).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from dp_accounting import dp_event

from dpnet.errors import PrivacyError
from dpnet.privacy import compose
from dpnet.privacy.pld import pld_accounting
from dpnet.privacy.rdp import CONVERSIONS, DEFAULT_ORDERS, rdp_to_epsilon
from dpnet.privacy.relations import canonical_relation

_SAMPLER_RELATION = {"poisson": "add_remove", "fixed": "replace_one"}


@dataclass(frozen=True)
class Release:
    """One recorded release."""

    event: dp_event.DpEvent
    label: str
    relation: str
    protects: str
    machine: int | str | None
    guarantee: str | None
    pure_epsilon: float


def _json_float(x: float) -> float | str:
    return float(x) if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def event_to_dict(event: dp_event.DpEvent) -> dict[str, Any]:
    """JSON-ready description of a (possibly nested) DpEvent."""
    out: dict[str, Any] = {"type": type(event).__name__}
    for name in getattr(type(event), "__attrs_attrs__", ()):
        value = getattr(event, name.name)
        if isinstance(value, dp_event.DpEvent):
            value = event_to_dict(value)
        elif isinstance(value, list | tuple):
            value = [event_to_dict(v) if isinstance(v, dp_event.DpEvent) else v for v in value]
        out[name.name] = value
    return out


class PrivacyLedger:
    """Record of a run's releases with pure-epsilon, RDP and PLD composition.

    ``delta`` is the run's target delta (used by ``to_dict``; may be None for pure-DP runs).
    """

    def __init__(self, delta: float | None = None, orders: np.ndarray = DEFAULT_ORDERS) -> None:
        if delta is not None and not 0.0 < float(delta) < 1.0:
            raise PrivacyError(f"delta must lie in (0, 1) or be None, got {delta}")
        self.delta = None if delta is None else float(delta)
        self.orders = np.asarray(orders, dtype=float)
        self._releases: list[Release] = []

    @property
    def releases(self) -> tuple[Release, ...]:
        return tuple(self._releases)

    @property
    def relation(self) -> str | None:
        return self._releases[0].relation if self._releases else None

    def record(
        self,
        event: dp_event.DpEvent,
        *,
        label: str,
        relation: str,
        protects: str,
        machine: int | str | None = None,
        guarantee: str | None = None,
        sampling: str | None = None,
    ) -> Release:
        """Store a release. machine=None: central (rank 0); machine=j: on machine j's shard;
        machine="name": on another named partition of rows disjoint from every other one
        (e.g. "held-out rows").

        ``sampling`` ("poisson" or "fixed") declares the batch sampler actually used; an event
        accounted for another sampler, or a sampler whose relation differs from ``relation``
        (Poisson <-> add/remove, fixed-size <-> replace-one), is refused.
        """
        if not isinstance(event, dp_event.DpEvent):
            raise PrivacyError(f"record needs a DpEvent, got {type(event).__name__}")
        compose.check_supported(event)
        rel = canonical_relation(relation)
        if self._releases and rel != self.relation:
            raise PrivacyError(
                f"cannot compose a {rel} release with the ledger's {self.relation} releases"
            )
        used = compose.samplers(event)
        if sampling is not None:
            if sampling not in _SAMPLER_RELATION:
                raise PrivacyError(f"sampling must be 'poisson' or 'fixed', got {sampling!r}")
            if used - {sampling}:
                raise PrivacyError(
                    f"{'/'.join(sorted(used))} accounting refused for {sampling} batches"
                )
        for scheme in used | ({sampling} if sampling else set()):
            if _SAMPLER_RELATION[scheme] != rel:
                raise PrivacyError(
                    f"{scheme} sampling is accounted under {_SAMPLER_RELATION[scheme]}, not {rel}"
                )
        if rel == "add_remove" and _has_rr(event):
            raise PrivacyError("randomized response is accounted under replace_one only")
        if isinstance(machine, str):
            if not machine.strip():
                raise PrivacyError("a named partition needs a non-empty name")
        elif machine is not None and (int(machine) != machine or machine < 0):
            raise PrivacyError(
                f"machine must be a non-negative integer, a partition name or None, got {machine}"
            )
        release = Release(
            event=event,
            label=str(label),
            relation=rel,
            protects=str(protects),
            machine=machine if machine is None or isinstance(machine, str) else int(machine),
            guarantee=guarantee,
            pure_epsilon=compose.pure_epsilon(event),
        )
        self._releases.append(release)
        return release

    def _groups(self) -> list[list[Release]]:
        """Release lists whose composition bounds one person's loss (central + machine j)."""
        central = [r for r in self._releases if r.machine is None]
        machines = sorted(
            {r.machine for r in self._releases if r.machine is not None}, key=_partition_order
        )
        if not machines:
            return [central]
        own: dict[Any, list[Release]] = {j: [] for j in machines}
        for r in self._releases:  # one pass: J machines' releases, not J^2 comparisons
            if r.machine is not None:
                own[r.machine].append(r)
        return [central + own[j] for j in machines]

    def pure_epsilon(self) -> float:
        """Central epsilons summed plus the worst machine's sum; inf if any release is not pure."""
        return max((sum(r.pure_epsilon for r in g) for g in self._groups()), default=0.0)

    def _rdp_epsilon(self, group: list[Release], delta: float, conversion: str):
        curve = sum(
            (compose.event_rdp(r.event, self.orders) for r in group), np.zeros_like(self.orders)
        )
        return rdp_to_epsilon(self.orders, curve, delta, conversion)

    def epsilon(self, delta: float | None = None, conversion: str = "improved") -> float:
        """(epsilon, delta)-DP epsilon of the run (min of RDP and pure composition)."""
        return self.accounting(delta, conversion, with_pld=False)["epsilon"]

    def pld_epsilon(self, delta: float | None = None) -> float | None:
        """PLD epsilon of the run; None if some release has no PLD (fixed-size sampling)."""
        return self.accounting(delta, with_pld=True)["pld_epsilon"]

    def accounting(
        self, delta: float | None = None, conversion: str = "improved", with_pld: bool = True
    ) -> dict[str, Any]:
        """epsilon, best order, conversion, PLD epsilon and PLD note of the run at ``delta``.

        epsilon is the RDP epsilon or, if smaller, the pure epsilon (best_order None then).
        pld_epsilon is None when some group has no PLD or its PLD was skipped (pld_note says
        why; it also names a coarsened grid).
        """
        d = self.delta if delta is None else float(delta)
        if d is None:
            raise PrivacyError("no delta given and the ledger has none")
        if conversion not in CONVERSIONS:
            raise PrivacyError(f"conversion must be 'improved' or 'classic', got {conversion!r}")
        worst: tuple[float, float | None] = (0.0, None)
        pld_worst: float | None = 0.0
        notes: list[str] = []
        for group in self._groups():
            eps, order = self._rdp_epsilon(group, d, conversion)
            pure = sum(r.pure_epsilon for r in group)
            cand = (pure, None) if pure <= eps else (eps, order)
            if cand[0] >= worst[0]:
                worst = cand
            if with_pld and pld_worst is not None:
                pld = _group_pld(group, d)
                notes += [pld["pld_note"]] if pld["pld_note"] else []
                eps_pld = pld["pld_epsilon"]
                pld_worst = None if eps_pld is None else max(pld_worst, eps_pld)
        return {
            "delta": d,
            "epsilon": worst[0],
            "best_order": worst[1],
            "conversion": conversion,
            "pld_epsilon": pld_worst if with_pld else None,
            "pld_note": "; ".join(dict.fromkeys(notes)) if with_pld else "not computed",
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable record: every release, per-machine totals and the run's totals."""
        releases = [
            {
                "label": r.label,
                "relation": r.relation,
                "protects": r.protects,
                "machine": r.machine,
                "guarantee": r.guarantee,
                "pure_epsilon": _json_float(r.pure_epsilon),
                "event": event_to_dict(r.event),
            }
            for r in self._releases
        ]
        machines = sorted(
            {r.machine for r in self._releases if r.machine is not None}, key=_partition_order
        )
        spent: dict[Any, float] = dict.fromkeys(machines, 0.0)
        for r in self._releases:  # one pass: J machines' releases, not J^2 comparisons
            if r.machine is not None:
                spent[r.machine] += r.pure_epsilon
        per_machine = {str(j): _json_float(spent[j]) for j in machines}
        central = sum(r.pure_epsilon for r in self._releases if r.machine is None)
        total: dict[str, Any] = {"pure_epsilon": _json_float(self.pure_epsilon())}
        if self.delta is not None and self._releases:
            acc = self.accounting()
            total.update({k: _json_float(v) if isinstance(v, float) else v for k, v in acc.items()})
        return {
            "relation": self.relation,
            "protects": sorted({r.protects for r in self._releases}),
            "composition": "sequential within central/machine; parallel over disjoint machines "
            "and named partitions",
            "releases": releases,
            "central_pure_epsilon": _json_float(central),
            "per_machine_pure_epsilon": per_machine,
            "total": total,
        }


def _partition_order(machine: int | str) -> tuple[bool, int, str]:
    """Machines by number, then named partitions by name."""
    return (True, 0, machine) if isinstance(machine, str) else (False, machine, "")


def _has_rr(event: dp_event.DpEvent) -> bool:
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        return True
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return _has_rr(event.event)
    if isinstance(event, dp_event.ComposedDpEvent):
        return any(_has_rr(e) for e in event.events)
    return False


def _group_pld(group: list[Release], delta: float) -> dict[str, Any]:
    """pld_accounting of the group's releases composed (inf if one is not private)."""
    if any(math.isinf(r.pure_epsilon) and _non_private(r.event) for r in group):
        return {"pld_epsilon": math.inf, "pld_note": ""}
    return pld_accounting(dp_event.ComposedDpEvent([r.event for r in group]), delta)


def _non_private(event: dp_event.DpEvent) -> bool:
    return bool(np.all(np.isinf(compose.event_rdp(event, np.array([2.0])))))
