"""PrivacyLedger: composition against closed forms, parallel composition over machines,
refusals, and JSON output. RR and Laplace RDP formulas against exact mpmath divergences."""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian

from dpnet.errors import PrivacyError
from dpnet.privacy import (
    DEFAULT_ORDERS,
    PrivacyLedger,
    PureDpEvent,
    compose,
    sampled_gaussian_event,
)

RR3 = dp_event.RandomizedResponseDpEvent(noise_parameter=0.5, num_buckets=2)  # eps = ln 3


def test_pure_sequential_and_parallel_composition() -> None:
    led = PrivacyLedger()
    kw = {"relation": "replace_one", "protects": "rows"}
    led.record(dp_event.LaplaceDpEvent(1 / 0.3), label="a", **kw)
    led.record(PureDpEvent(0.5, "laplace_vector", 3), label="b", **kw)
    led.record(RR3, label="rr0", machine=0, **kw)
    led.record(RR3, label="rr1", machine=1, **kw)
    led.record(PureDpEvent(0.2, "objective_perturbation"), label="op1", machine=1, **kw)
    # a person sits in one shard: central 0.8 + worst machine (ln 3 + 0.2)
    assert led.pure_epsilon() == pytest.approx(0.8 + math.log(3) + 0.2)
    d = led.to_dict()
    assert d["per_machine_pure_epsilon"] == {
        "0": pytest.approx(math.log(3)),
        "1": pytest.approx(math.log(3) + 0.2),
    }
    assert d["central_pure_epsilon"] == pytest.approx(0.8)


def test_rr_per_machine_is_parallel_not_summed() -> None:
    led = PrivacyLedger(delta=1e-6)
    for j in range(10):
        led.record(RR3, label="rr", relation="replace_one", protects="labels", machine=j)
    assert led.pure_epsilon() == pytest.approx(math.log(3))
    acc = led.accounting()
    assert acc["epsilon"] == pytest.approx(math.log(3))  # pure beats the RDP conversion
    assert acc["pld_epsilon"] == pytest.approx(math.log(3), abs=1e-3)


def test_gaussian_composition_matches_closed_forms() -> None:
    s, t, delta = 8.0, 16, 1e-5
    led = PrivacyLedger(delta=delta)
    for _ in range(t):
        led.record(dp_event.GaussianDpEvent(s), label="g", relation="add_remove", protects="rows")
    # t Gaussians of multiplier s = one Gaussian of multiplier s/sqrt(t) (RDP t a/(2 s^2))
    exact = get_epsilon_gaussian(s / math.sqrt(t), delta)  # Balle & Wang, exact
    acc = led.accounting()
    assert exact <= acc["pld_epsilon"] <= exact + 2e-3
    # classic conversion: min_a t a/(2s^2) + ln(1/delta)/(a-1) = r + 2 sqrt(r ln(1/delta)),
    # r = t/(2 s^2), attained at a = 1 + sqrt(ln(1/delta)/r); the grid can only be worse
    r = t / (2 * s * s)
    closed = r + 2 * math.sqrt(r * math.log(1 / delta))
    classic = led.epsilon(conversion="classic")
    assert closed <= classic <= closed * 1.01
    assert exact <= led.epsilon() < classic


def test_machines_in_parallel_and_central_in_sequence() -> None:
    one = PrivacyLedger(delta=1e-5)
    one.record(
        dp_event.GaussianDpEvent(2.0), label="g", relation="add_remove", protects="rows", machine=0
    )
    five = PrivacyLedger(delta=1e-5)
    for j in range(5):
        five.record(
            dp_event.GaussianDpEvent(2.0),
            label="g",
            relation="add_remove",
            protects="rows",
            machine=j,
        )
    assert five.epsilon() == pytest.approx(one.epsilon())
    five.record(
        dp_event.GaussianDpEvent(2.0), label="central", relation="add_remove", protects="rows"
    )
    two = PrivacyLedger(delta=1e-5)
    two.record(
        dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(2.0), 2),
        label="g2",
        relation="add_remove",
        protects="rows",
    )
    assert five.epsilon() == pytest.approx(two.epsilon())


def test_refusals() -> None:
    led = PrivacyLedger(delta=1e-5)
    poisson = sampled_gaussian_event("poisson", q=0.01, noise_multiplier=1.0, steps=10)
    fixed = sampled_gaussian_event("fixed", q=0.01, noise_multiplier=1.0, steps=10, n=1000)
    with pytest.raises(PrivacyError, match="poisson accounting refused for fixed batches"):
        led.record(poisson, label="sgd", relation="add_remove", protects="rows", sampling="fixed")
    with pytest.raises(PrivacyError, match="poisson sampling is accounted under add_remove"):
        led.record(poisson, label="sgd", relation="replace_one", protects="rows")
    with pytest.raises(PrivacyError, match="fixed sampling is accounted under replace_one"):
        led.record(fixed, label="sgd", relation="add_remove", protects="rows")
    with pytest.raises(PrivacyError, match="does not support ZCDpEvent"):
        led.record(dp_event.ZCDpEvent(0.1), label="z", relation="add_remove", protects="rows")
    with pytest.raises(PrivacyError, match="randomized response"):
        led.record(RR3, label="rr", relation="add_remove", protects="labels")
    with pytest.raises(PrivacyError, match="unknown neighbouring relation"):
        led.record(RR3, label="rr", relation="swap", protects="labels")
    led.record(fixed, label="sgd", relation="replace-one", protects="rows", sampling="fixed")
    with pytest.raises(PrivacyError, match="cannot compose"):
        led.record(dp_event.GaussianDpEvent(1.0), label="g", relation="add_remove", protects="rows")
    assert len(led.releases) == 1


def test_non_private_release_gives_infinite_epsilon() -> None:
    led = PrivacyLedger(delta=1e-5)
    led.record(
        dp_event.NonPrivateDpEvent(),
        label="raw",
        relation="replace_one",
        protects="labels",
        machine=2,
    )
    assert led.pure_epsilon() == math.inf and led.epsilon() == math.inf
    assert led.to_dict()["total"]["epsilon"] == "inf"


def test_to_dict_is_strict_json_with_every_record() -> None:
    led = PrivacyLedger(delta=1e-5)
    led.record(
        sampled_gaussian_event("poisson", q=0.02, noise_multiplier=1.2, steps=50),
        label="sgd",
        relation="add_remove",
        protects="rows",
        guarantee="RDP",
        sampling="poisson",
    )
    led.record(
        dp_event.LaplaceDpEvent(2.0),
        label="mean",
        relation="add_remove",
        protects="rows",
        machine=3,
    )
    d = json.loads(json.dumps(led.to_dict(), allow_nan=False))
    assert [r["label"] for r in d["releases"]] == ["sgd", "mean"]
    assert d["releases"][0]["event"]["event"]["sampling_probability"] == 0.02
    assert d["total"]["pure_epsilon"] == "inf"
    assert 0 < d["total"]["pld_epsilon"] < d["total"]["epsilon"]


def _renyi(p: list, q: list, a: float) -> float:
    a = mp.mpf(a)
    return float(
        mp.log(
            mp.fsum(mp.mpf(pi) ** a * mp.mpf(qi) ** (1 - a) for pi, qi in zip(p, q, strict=True))
        )
        / (a - 1)
    )


@pytest.mark.parametrize("k,noise", [(2, 0.5), (2, 0.1), (5, 0.3)])
def test_rr_rdp_is_the_exact_renyi_divergence(k: int, noise: float) -> None:
    mp.mp.dps = 30
    p = [1 - noise + noise / k] + [noise / k] * (k - 1)
    q = [noise / k, 1 - noise + noise / k] + [noise / k] * (k - 2)
    orders = np.array([1.5, 2.0, 7.25, 40.0])
    got = compose.rr_rdp(noise, k, orders)
    want = [max(_renyi(p, q, a), _renyi(q, p, a)) for a in orders]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_laplace_rdp_is_the_exact_renyi_divergence() -> None:
    mp.mp.dps = 30
    b = mp.mpf(1.3)

    def dens(x, mu):
        return mp.exp(-abs(x - mu) / b) / (2 * b)

    def exact(a: float) -> float:
        a = mp.mpf(a)

        def f(x):
            return dens(x, 0) ** a * dens(x, 1) ** (1 - a)

        return float(mp.log(mp.quad(f, [-mp.inf, 0, 1, mp.inf])) / (a - 1))

    orders = np.array([1.5, 3.0, 12.5])
    np.testing.assert_allclose(
        compose.laplace_rdp(1.3, orders), [exact(a) for a in orders], rtol=1e-10
    )


def test_pure_event_rdp_bound() -> None:
    got = compose.event_rdp(PureDpEvent(0.4, "objective_perturbation"), DEFAULT_ORDERS)
    assert np.all(got <= 0.4) and np.all(got <= DEFAULT_ORDERS * 0.08 + 1e-15)
