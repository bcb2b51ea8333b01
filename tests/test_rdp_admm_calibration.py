"""Fast calibration for fixed-size batches: the shared-difference RDP bound equals
dp-accounting's Thm 27 code, the calibrated multiplier is the smallest one whose full-grid
epsilon (dpnet's accountant) meets the target, and a wrong fast bound cannot loosen it."""

from __future__ import annotations

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpa

import dpnet.baselines.rdp_admm.calibration as cal
from dpnet.errors import PrivacyError
from dpnet.privacy.rdp import DEFAULT_ORDERS, calibrate_noise_multiplier, epsilon_for

# fractional, exact-difference (<= 256) and Stirling-branch (> 256) orders
ORDERS = np.array([1.05, 1.5, 2.0, 2.75, 7.25, 16.0, 33.0, 64.0, 100.0, 256.0, 300.0, 1024.0])
SMALL_GRID = (1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0)


@pytest.mark.parametrize("q,z", [(180 / 32560, 2.7), (0.05, 0.8), (0.3, 5.0), (0.01, 23.0)])
def test_fast_bound_equals_dp_accounting(q: float, z: float) -> None:
    ref = dpa._compute_rdp_sample_wor_gaussian(q, z, ORDERS)
    np.testing.assert_allclose(cal.fixed_size_rdp(q, z, ORDERS), ref, rtol=1e-9, atol=0)


@pytest.mark.parametrize("eps,n,m,steps", [(0.3, 2000, 45, 400), (1.0, 500, 22, 230)])
def test_calibration_matches_dpnet_bisection(eps: float, n: int, m: int, steps: int) -> None:
    """On a small order grid dpnet's own (slow) bisection is cheap: same multiplier."""
    z = cal.calibrate_fixed_size(eps, 1e-6, batch_size=m, n=n, steps=steps, orders=SMALL_GRID)
    ref = calibrate_noise_multiplier(eps, 1e-6, "fixed", m / n, steps, n=n, orders=SMALL_GRID)
    assert z == pytest.approx(ref, rel=2e-6)
    assert (
        epsilon_for("fixed", m / n, z, steps, 1e-6, n=n, orders=SMALL_GRID, with_pld=False)[
            "epsilon"
        ]
        <= eps
    )


def test_full_grid_epsilon_meets_target_and_is_tight() -> None:
    """Adult-sized setting whose best order (88) needs the exact forward differences."""
    n, m, steps, eps = 32560, 180, 1810, 0.3
    z = cal.calibrate_fixed_size(eps, 1e-8, batch_size=m, n=n, steps=steps)
    final = epsilon_for("fixed", m / n, z, steps, 1e-8, n=n, with_pld=False)
    assert final["epsilon"] <= eps and 32 < final["best_order"] <= 256
    below = epsilon_for("fixed", m / n, z * (1 - 1e-5), steps, 1e-8, n=n, with_pld=False)
    assert below["epsilon"] > eps
    assert len(DEFAULT_ORDERS) > 100  # the full grid, not a coarse one


def test_a_wrong_fast_bound_cannot_loosen_the_guarantee(monkeypatch) -> None:
    """If the fast bound under-estimated the RDP, the exact check hands over to dpnet."""
    true_rdp = cal.fixed_size_rdp
    monkeypatch.setattr(cal, "fixed_size_rdp", lambda q, z, a: 0.5 * true_rdp(q, z, a))
    z = cal.calibrate_fixed_size(0.5, 1e-6, batch_size=40, n=1600, steps=300, orders=SMALL_GRID)
    ref = calibrate_noise_multiplier(0.5, 1e-6, "fixed", 40 / 1600, 300, n=1600, orders=SMALL_GRID)
    assert z == pytest.approx(ref, rel=1e-9)


def test_bad_calibration_input() -> None:
    with pytest.raises(PrivacyError, match="target epsilon"):
        cal.calibrate_fixed_size(0.0, 1e-6, batch_size=4, n=100, steps=10)
    with pytest.raises(PrivacyError, match="batch_size < n"):
        cal.calibrate_fixed_size(1.0, 1e-6, batch_size=100, n=100, steps=10)
    with pytest.raises(PrivacyError, match="steps >= 1"):
        cal.calibrate_fixed_size(1.0, 1e-6, batch_size=4, n=100, steps=2.5)
    with pytest.raises(PrivacyError, match="orders > 1"):
        cal.fixed_size_rdp(0.1, 1.0, [1.0, 2.0])
