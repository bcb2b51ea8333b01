"""PLD accounting within a budget decided in advance (dpnet.privacy.pld): the same numbers as
dp-accounting's PLDAccountant inside the budget; outside it a coarser grid that is still an
upper bound (exact Gaussian epsilon below it, RDP above), or a skip with the reason decided
before the expensive part. The work is counted (tests/privacy_work.py), not timed."""

from __future__ import annotations

import math

import pytest
from dp_accounting import dp_event
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

from dpnet.privacy import PrivacyLedger, PureDpEvent, compose, pld, rdp
from tests.privacy_work import PrivacyWork

G, POISSON = dp_event.GaussianDpEvent, dp_event.PoissonSampledDpEvent
SELF, COMPOSED = dp_event.SelfComposedDpEvent, dp_event.ComposedDpEvent


def rdp_epsilon(event: dp_event.DpEvent, delta: float) -> float:
    curve = compose.event_rdp(event, rdp.DEFAULT_ORDERS)
    return rdp.rdp_to_epsilon(rdp.DEFAULT_ORDERS, curve, delta)[0]


@pytest.mark.parametrize(
    "event",
    [
        SELF(POISSON(0.05, G(1.2)), 200),
        SELF(G(6.0), 20),
        SELF(dp_event.LaplaceDpEvent(2.0), 20),
        COMPOSED([SELF(G(4.0), 10), SELF(POISSON(0.1, G(1.5)), 30)]),
    ],
)
def test_same_numbers_as_the_pld_accountant(event: dp_event.DpEvent) -> None:
    acc = PLDAccountant(value_discretization_interval=pld.PLD_DISCRETIZATION)
    acc.compose(event)
    res = pld.pld_accounting(event, 1e-5)
    assert res["pld_note"] == "" and res["pld_discretization"] == pld.PLD_DISCRETIZATION
    assert res["pld_epsilon"] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    assert rdp.pld_epsilon(event, 1e-5) == res["pld_epsilon"]


@pytest.mark.parametrize("sigma,steps", [(2.0, 2000), (0.5, 100)])
def test_coarser_grid_is_between_the_exact_and_the_rdp_epsilon(
    sigma: float, steps: int, privacy_work: PrivacyWork
) -> None:
    """T Gaussians are one Gaussian of multiplier sigma / sqrt(T) (exact epsilon known): one
    probe and one PLD within the budget, no FFT composition."""
    event = SELF(G(sigma), steps)
    res = pld.pld_accounting(event, 1e-5)
    assert len(privacy_work.built) == 2 and privacy_work.built[0] <= pld._PROBE_POINTS + 2
    assert pld.PLD_MAX_POINTS / 2 < privacy_work.largest_pld <= pld.PLD_MAX_POINTS
    assert not privacy_work.self_composed and not privacy_work.composed
    assert res["pld_discretization"] > 5e-4 and "still an upper bound" in res["pld_note"]
    exact = get_epsilon_gaussian(sigma / math.sqrt(steps), 1e-5)
    assert exact <= res["pld_epsilon"] <= exact + 1e-6 * exact < rdp_epsilon(event, 1e-5)


def test_coarser_subsampled_grid_is_between_the_fine_pld_and_rdp() -> None:
    event = SELF(POISSON(0.05, G(1.2)), 200)
    fine = pld.pld_accounting(event, 1e-5)["pld_epsilon"]
    coarse = pld.pld_accounting(event, 1e-5, max_points=20000)
    assert coarse["pld_discretization"] > 1e-3
    assert fine <= coarse["pld_epsilon"] <= fine + 0.05 < rdp_epsilon(event, 1e-5)


@pytest.mark.parametrize(
    "event,why",
    [
        (SELF(G(1e-3), 10**9), "cannot build"),
        (SELF(G(1.0), 10**6), "grid points"),
        (SELF(POISSON(0.01, G(1e-3)), 10), "grid points"),
        (SELF(POISSON(0.5, G(1.0)), 10**7), "steps"),
        (SELF(POISSON(0.5, G(0.6)), 10**6), "grid points"),
        (SELF(dp_event.LaplaceDpEvent(1e-3), 10**5), "Chernoff"),
        (SELF(dp_event.RandomizedResponseDpEvent(0.5, 2), 10**6), "grid points"),
        (SELF(PureDpEvent(0.1, "x"), 10**6), "grid points"),
        (COMPOSED([G(1.0 + i / 100) for i in range(300)]), "distinct releases"),
    ],
)
def test_worst_inputs_are_skipped_before_building_with_the_reason(
    event: dp_event.DpEvent, why: str, privacy_work: PrivacyWork
) -> None:
    """Skipped on the budget's prediction: at most a coarse probe per leaf is built, nothing
    is composed (each of these was a MemoryError, or minutes of FFTs, before the budget)."""
    res = pld.pld_accounting(event, 1e-5)
    assert res["pld_epsilon"] is None and res["pld_note"].startswith("skipped: ")
    assert why in res["pld_note"]
    assert privacy_work.only_probed() and len(privacy_work.built) <= 1, privacy_work
    if why in ("steps", "distinct releases"):  # decided on the event alone
        assert privacy_work.built == []
    privacy_work.reset()
    pld._CACHE.clear()
    assert rdp.pld_epsilon(event, 1e-5) is None  # the library path takes the same rule
    assert privacy_work.only_probed() and len(privacy_work.built) <= 1, privacy_work


def test_no_pld_for_fixed_size_and_inf_when_not_private() -> None:
    fixed = rdp.sampled_gaussian_event("fixed", q=0.1, noise_multiplier=1.0, steps=5, n=100)
    assert pld.pld_accounting(fixed, 1e-5)["pld_note"] == "no PLD for fixed-size sampling"
    non_private = COMPOSED([G(1.0), dp_event.NonPrivateDpEvent()])
    assert pld.pld_accounting(non_private, 1e-5)["pld_epsilon"] == math.inf
    assert pld.pld_accounting(dp_event.NoOpDpEvent(), 1e-5)["pld_epsilon"] == 0.0


def test_ledger_merges_identical_releases(privacy_work: PrivacyWork) -> None:
    """20000 recorded Gaussian releases: one Gaussian PLD, not 20000 convolutions."""
    led = PrivacyLedger(delta=1e-5)
    for _ in range(20000):
        led.record(G(100.0), label="g", relation="add_remove", protects="rows")
    acc = led.accounting()
    # one probe and one Gaussian PLD of multiplier 100 / sqrt(20000); nothing composed
    assert len(privacy_work.built) == 2 and not privacy_work.self_composed
    assert privacy_work.composed == 0 and privacy_work.largest_pld <= pld.PLD_MAX_POINTS
    exact = get_epsilon_gaussian(100.0 / math.sqrt(20000), 1e-5)
    assert exact <= acc["pld_epsilon"] <= exact + 1e-3 and acc["pld_note"] == ""


def test_ledger_reports_a_skipped_pld() -> None:
    led = PrivacyLedger(delta=1e-5)
    led.record(SELF(G(1.0), 10**6), label="g", relation="add_remove", protects="rows")
    acc = led.accounting()
    assert acc["pld_epsilon"] is None and acc["pld_note"].startswith("skipped: ")
    assert math.isfinite(acc["epsilon"])
