"""The command-line accountant bounds its own time and memory and never shows a traceback.

RDP first (flushed), the PLD within a grid budget fixed before it is built (coarser grid or
"skipped: <why>"), every bad number one "error:" line with exit 2, strict JSON. The bounds are
checked on the work done (tests/privacy_work.py: RDP evaluations and series terms, PLD grid
points and compositions), not on a clock; the subprocesses carry a timeout against hangs.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import resource
import subprocess
import sys
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from dpnet.privacy import pld, rdp
from dpnet.privacy.__main__ import main
from tests.privacy_work import FRACTIONAL_ORDERS, SERIES_CAP, PrivacyWork

RDP_GRIDS = 4
"""Full-grid RDP evaluations of one command: the calibration's first pass over every order,
its check on the accountant (fixed-size batches), a second search if that check disagrees,
and the reported epsilon."""
SERIES_TERMS = 10 * FRACTIONAL_ORDERS * SERIES_CAP
"""Series terms of one command: ten full grids at the series' cap (a bisection on the full
grid, the calibration before the per-order roots, took some 20-40)."""


def _assert_bounded(work: PrivacyWork) -> None:
    """The work of one command within the budgets decided in advance."""
    assert work.full_grids <= RDP_GRIDS, work.rdp_orders
    assert work.series_terms <= SERIES_TERMS, work.series_terms
    assert work.largest_pld <= pld.PLD_MAX_POINTS  # any PLD, built or composed
    assert len(work.self_composed) <= 1 and work.composed == 0  # one leaf, composed once


def _run(argv: list[str]) -> tuple[int, str, str, list[warnings.WarningMessage]]:
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        code = main(argv)
    return code, out.getvalue(), err.getvalue(), list(caught)


def _strict_json(text: str) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"bare {name} in JSON")

    return json.loads(text, parse_constant=refuse)


def _limit_memory() -> None:  # 1.5 GB address space: a runaway PLD fails instead of swapping
    resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))


@pytest.mark.parametrize(
    "args",
    [
        ["--q", "0.01", "--sigma", "1e-3", "--steps", "10"],  # was: MemoryError (38 GiB)
        ["--q", "0.01", "--sigma", "1", "--steps", "1e12"],  # was: MemoryError (2.2 TiB)
        ["--q", "1", "--sigma", "0.01", "--steps", "1"],  # was: silent for > 60 s
    ],
)
def test_huge_pld_is_skipped_after_the_rdp_answer(
    args: list[str], privacy_work: PrivacyWork
) -> None:
    """The command itself, in 1.5 GB of address space; in-process the same arguments build
    no more than the budget's probe (the PLD is skipped before it is built)."""
    proc = subprocess.run(
        [sys.executable, "-m", "dpnet.privacy", "--sampling", "poisson", *args, "--delta", "1e-5"],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_memory,
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    assert lines[0].startswith("epsilon = ") and math.isfinite(float(lines[0].split()[2]))
    assert lines[-1].startswith("PLD epsilon = skipped: ") and len(lines) == 4
    argv = ["--sampling", "poisson", *args, "--delta", "1e-5"]
    code, out, err, _ = _run(argv)
    assert (code, err, out.splitlines()) == (0, "", lines)
    assert privacy_work.only_probed() and privacy_work.full_grids == 1, privacy_work


def test_json_is_strict_with_infinite_values() -> None:
    # delta below the PLD's truncated tail mass (1e-15): PLD epsilon = inf
    argv = ["--sampling", "poisson", "--q", "0.01", "--sigma", "1", "--steps", "10"]
    code, out, err, _ = _run([*argv, "--delta", "1e-300", "--json"])
    res = _strict_json(out)
    assert code == 0 and err == "" and res["pld_epsilon"] == "inf"
    assert math.isfinite(res["epsilon"]) and res["pld_note"] == ""


def test_steps_in_exponent_notation() -> None:
    base = ["--sampling", "poisson", "--q", "0.01", "--sigma", "1.2", "--delta", "1e-5", "--json"]
    a = _strict_json(_run([*base, "--steps", "1e3"])[1])
    b = _strict_json(_run([*base, "--steps", "1000"])[1])
    assert a == b and a["steps"] == 1000


def _exact_gaussian_epsilon(sigma: float, delta: float) -> float:
    """Gaussian mechanism, sensitivity 1 (Balle & Wang 2018): the exact epsilon at delta."""

    def excess(eps: float) -> float:
        a, b = 1 / (2 * sigma), eps * sigma
        return stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b) - delta

    return optimize.brentq(excess, 0.0, 100.0, xtol=1e-12)


@pytest.mark.parametrize("sigma,steps", [(2.0, 10), (0.7, 3), (5.0, 100)])
def test_coarser_pld_grid_is_still_an_upper_bound(sigma: float, steps: int) -> None:
    """Full-batch Gaussian steps compose to one Gaussian: the exact epsilon is known."""
    exact = _exact_gaussian_epsilon(sigma / math.sqrt(steps), 1e-5)
    fine = rdp.poisson_pld_epsilon(1.0, sigma, steps, 1e-5)
    coarse = rdp.poisson_pld_epsilon(1.0, sigma, steps, 1e-5, max_points=30000)
    assert fine["pld_discretization"] < 1.2e-4
    assert coarse["pld_discretization"] > 1e-3 and "still an upper bound" in coarse["pld_note"]
    assert exact <= fine["pld_epsilon"] <= exact + 1e-3
    assert exact <= coarse["pld_epsilon"] <= exact + 1e-2


@pytest.mark.parametrize("q,sigma,steps", [(0.01, 1.2, 500), (0.2, 0.8, 50), (0.004, 1.1, 3000)])
def test_coarser_subsampled_pld_stays_above_a_lower_bound(
    q: float, sigma: float, steps: int
) -> None:
    """dp-accounting's optimistic PLD (privacy buckets, rounding down) bounds epsilon below."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    optimistic = pld_lib.from_gaussian_mechanism(
        sigma,
        sampling_prob=q,
        pessimistic_estimate=False,
        value_discretization_interval=1e-4,
        use_connect_dots=False,
    )
    lower = optimistic.self_compose(steps).get_epsilon_for_delta(1e-5)
    fine = rdp.poisson_pld_epsilon(q, sigma, steps, 1e-5)["pld_epsilon"]
    for max_points in (30000, 10000):
        res = rdp.poisson_pld_epsilon(q, sigma, steps, 1e-5, max_points=max_points)
        dx = res["pld_discretization"]
        assert dx > 4e-4 and lower <= fine <= res["pld_epsilon"] <= fine + 20 * dx


def test_pld_size_is_decided_before_building(privacy_work: PrivacyWork) -> None:
    res = rdp.poisson_pld_epsilon(0.01, 1e-3, 10, 1e-5)
    assert privacy_work.only_probed() and len(privacy_work.built) == 1, privacy_work
    assert res["pld_epsilon"] is None and "MB" in res["pld_note"]
    assert "grid points" in res["pld_note"] and res["pld_note"].startswith("skipped: ")


@pytest.mark.parametrize(
    "q,target,answer",
    [(0.01, "1e-9", True), (0.01, "1e9", True), (0.5, "1e-9", False), (0.5, "1e9", True)],
)
def test_extreme_target_epsilon_answers_within_the_budget(
    q: float, target: str, answer: bool, privacy_work: PrivacyWork
) -> None:
    argv = ["--sampling", "poisson", "--q", str(q), "--steps", "500", "--delta", "1e-5"]
    code, out, err, _ = _run([*argv, "--target-epsilon", target])
    _assert_bounded(privacy_work)
    if answer:
        assert code == 0 and out.startswith("noise multiplier (sigma) = ") and err == ""
    else:
        assert code == 2 and err == "error: no noise multiplier up to 1e+06 reaches epsilon 1e-09\n"


_SPECIAL = [
    "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "-0", "0", "0.0", "-1", "1", "2",
    "1e308", "-1e308", "1e-308", "5e-324", "1e400", "1e12", "1e15", "1e16", "1e-9", "1e9",
    str(10**20), str(2**63), "9" * 60, "0.5", "1.0000000001", "0.999999", "", "x", "1e", "0x10",
    " 7 ", "1_000", "3.5",
]  # fmt: skip
_WILD = st.one_of(
    st.sampled_from(_SPECIAL),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
)


def _log_uniform(lo: float, hi: float) -> st.SearchStrategy[str]:
    return st.floats(min_value=lo, max_value=hi).map(lambda e: repr(10.0**e))


_PLAUSIBLE = {
    "--q": st.one_of(st.floats(min_value=0.0, max_value=1.0).map(repr), _log_uniform(-12, 0)),
    "--sigma": _log_uniform(-11.9, 7.9),
    "--steps": st.one_of(st.integers(1, 10**6).map(str), st.sampled_from(["1e12", "1e15"])),
    "--delta": _log_uniform(-300, -0.01),
    "--n": st.integers(1, 10**6).map(str),
    "--target-epsilon": _log_uniform(-9, 9),  # with --sigma too: --target-epsilon wins
}


@st.composite
def _argv(draw: st.DrawFn) -> list[str]:
    """Mostly valid inputs (plausible values, some far out) with at most one wild value."""
    argv = ["--sampling", draw(st.sampled_from(["poisson", "poisson", "fixed"]))]
    wild = draw(st.sampled_from([None, None, None, *_PLAUSIBLE]))
    for opt, plausible in _PLAUSIBLE.items():
        if opt == wild or draw(st.integers(0, 19)) < (19 if opt != "--n" else 6):
            argv.append(f"{opt}={draw(_WILD if opt == wild else plausible)}")  # '=': '-inf'
    argv += draw(st.sampled_from([[], ["--json"], ["--conversion", "classic"]]))
    return argv


@pytest.mark.slow  # 60 random commands: 2-25 s CPU with the draw (PLDs near the grid budget)
@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # reset for every example
)
@given(argv=_argv())
def test_fuzz_numbers_give_an_answer_or_one_error_line(
    argv: list[str], privacy_work: PrivacyWork
) -> None:
    privacy_work.reset()  # one fixture for every example: count this command's work alone
    pld._CACHE.clear()
    code, out, err, caught = _run(argv)
    _assert_bounded(privacy_work)
    assert not caught, [str(w.message) for w in caught]
    if code == 0:
        assert err == ""
        if "--json" in argv:
            res = _strict_json(out)
            assert res["epsilon"] == "inf" or res["epsilon"] >= 0
        else:
            line = next(ln for ln in out.splitlines() if ln.startswith("epsilon = "))
            assert float(line.split()[2]) >= 0
            assert out.splitlines()[-1].startswith("PLD epsilon = ")
    else:
        assert code == 2 and out == "", (code, out, err)
        assert err.startswith("error: ") and err.count("\n") == 1 and err.endswith("\n")
