"""Fixed-size batches without replacement: the RDP is dp-accounting's public RDP accountant,
the fast shared-difference copy equals it, and the one calibration routine returns the
smallest multiplier whose accountant epsilon meets the target (a wrong copy cannot loosen it)."""

from __future__ import annotations

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import RdpAccountant

from dpnet.errors import PrivacyError
from dpnet.privacy import DEFAULT_ORDERS, calibrate_noise_multiplier, epsilon_for, fixed_size, rdp

# fractional, exact-difference (<= 256) and Stirling-branch (> 256) orders
ORDERS = np.array([1.05, 1.5, 2.0, 2.75, 7.25, 16.0, 33.0, 64.0, 100.0, 256.0, 300.0, 1024.0])
SMALL_GRID = (1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0)
# rdp.rdp_fixed_size_gaussian at ORDERS before it moved to the public accountant (it called
# dp-accounting's private _compute_rdp_sample_wor_gaussian): (m, n, z) -> RDP
PINNED = {
    (180, 32560, 2.7): [
        1.7973482233728012e-05,
        1.7973482233728012e-05,
        1.7973482233728012e-05,
        2.571495676578701e-05,
        6.59990500774414e-05,
        0.00014707870242617298,
        0.00031113700256980923,
        0.0006279275864387412,
        1.6155567513400944,
        12.34275044001058,
        15.363182712034368,
        65.03090973360189,
    ],
    (5, 100, 0.8): [
        0.023573612020587727,
        0.023573612020587727,
        0.023573612020587727,
        0.04371056050957346,
        2.324922401990956,
        9.350762054993194,
        22.71356194228994,
        46.96771875671594,
        75.10600929116322,
        196.99523798098326,
        231.3715667729577,
        797.0020169101282,
    ],
}


def accountant_rdp(m: int, n: int, z: float, orders: np.ndarray) -> np.ndarray:
    acc = RdpAccountant(orders, NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_event.SampledWithoutReplacementDpEvent(n, m, dp_event.GaussianDpEvent(z)))
    return acc.rdp


@pytest.mark.parametrize("m,n,z", list(PINNED))
def test_rdp_is_the_public_accountant_and_unchanged(m: int, n: int, z: float) -> None:
    mine = rdp.rdp_fixed_size_gaussian(m, n, z, ORDERS)
    np.testing.assert_array_equal(mine, accountant_rdp(m, n, z, ORDERS))
    np.testing.assert_allclose(mine, PINNED[(m, n, z)], rtol=1e-14, atol=0)


@pytest.mark.parametrize(
    "m,n,z", [(180, 32560, 2.7), (5, 100, 0.8), (30, 100, 5.0), (1, 100, 23.0)]
)
def test_fast_copy_equals_the_accountant(m: int, n: int, z: float) -> None:
    fast = fixed_size.fast_rdp_fixed_size_gaussian(m / n, z, ORDERS)
    np.testing.assert_allclose(fast, accountant_rdp(m, n, z, ORDERS), rtol=1e-9, atol=0)


@pytest.mark.parametrize("eps,n,m,steps", [(0.3, 2000, 45, 400), (1.0, 500, 22, 230)])
def test_fast_calibration_matches_the_accountant_search(
    eps: float, n: int, m: int, steps: int, monkeypatch
) -> None:
    """The search on the fast copy and the search on the accountant give the same sigma."""
    z = calibrate_noise_multiplier(eps, 1e-6, "fixed", m / n, steps, n=n, orders=SMALL_GRID)
    monkeypatch.setattr(
        fixed_size, "fast_rdp_fixed_size_gaussian", lambda q, s, a: accountant_rdp(m, n, s, a)
    )
    ref = calibrate_noise_multiplier(eps, 1e-6, "fixed", m / n, steps, n=n, orders=SMALL_GRID)
    assert z == pytest.approx(ref, rel=2e-6)
    res = epsilon_for("fixed", m / n, z, steps, 1e-6, n=n, orders=SMALL_GRID, with_pld=False)
    assert res["epsilon"] <= eps


def test_full_grid_epsilon_meets_target_and_is_tight() -> None:
    """Adult-sized setting whose best order (88) needs the exact forward differences."""
    n, m, steps, eps = 32560, 180, 1810, 0.3
    z = calibrate_noise_multiplier(eps, 1e-8, "fixed", m / n, steps, n=n)
    final = epsilon_for("fixed", m / n, z, steps, 1e-8, n=n, with_pld=False)
    assert final["epsilon"] <= eps and 32 < final["best_order"] <= 256
    below = epsilon_for("fixed", m / n, z * (1 - 1e-5), steps, 1e-8, n=n, with_pld=False)
    assert below["epsilon"] > eps
    assert len(DEFAULT_ORDERS) > 100  # the full grid, not a coarse one


def test_a_wrong_fast_copy_cannot_loosen_the_guarantee(monkeypatch) -> None:
    """If the fast copy under-estimated the RDP, the accountant's check redoes the search."""
    args = (0.5, 1e-6, "fixed", 40 / 1600, 300)
    ref = calibrate_noise_multiplier(*args, n=1600, orders=SMALL_GRID)
    true_rdp = fixed_size.fast_rdp_fixed_size_gaussian
    monkeypatch.setattr(
        fixed_size, "fast_rdp_fixed_size_gaussian", lambda q, z, a: 0.5 * true_rdp(q, z, a)
    )
    z = calibrate_noise_multiplier(*args, n=1600, orders=SMALL_GRID)
    assert z == pytest.approx(ref, rel=2e-6)
    res = epsilon_for("fixed", 40 / 1600, z, 300, 1e-6, n=1600, orders=SMALL_GRID, with_pld=False)
    assert res["epsilon"] <= 0.5


def test_bad_calibration_input() -> None:
    with pytest.raises(PrivacyError, match="target epsilon"):
        calibrate_noise_multiplier(0.0, 1e-6, "fixed", 0.04, 10, n=100)
    with pytest.raises(PrivacyError, match="integer"):
        calibrate_noise_multiplier(1.0, 1e-6, "fixed", 0.04, 2.5, n=100)
    with pytest.raises(PrivacyError, match="q\\*n"):
        calibrate_noise_multiplier(1.0, 1e-6, "fixed", 0.045, 10, n=100)
    with pytest.raises(PrivacyError, match="orders"):
        rdp.rdp_fixed_size_gaussian(4, 100, 1.0, [1.0, 2.0])
