"""Privacy plumbing of the Rényi-DP ADMM methods: sensitivities found by an adversarial search
over neighbouring datasets, the sampler/accountant pairing, calibration, and the closed-form
Gaussian (epsilon, delta) curve as an independent check of the reported epsilon."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import RdpAccountant
from scipy import stats
from scipy.optimize import brentq
from scipy.stats import norm

from devtools.audit import add_remove_pairs, extreme_rows, max_sensitivity, replace_one_pairs
from dpnet.baselines.rdp_admm import (
    ADMMObjPClassifier,
    DPADMMClassifier,
    DPSGDClassifier,
    MPADMMClassifier,
    SSADMMClassifier,
)
from dpnet.baselines.rdp_admm.common import BatchSampler, clipped_gradient_sum, get_loss
from dpnet.baselines.rdp_admm.model import mpadmm_epoch, mpadmm_sensitivities
from dpnet.errors import PrivacyError
from dpnet.privacy import PrivacyLedger, epsilon_for, sampled_gaussian_event


def small_problem(n: int = 6, p: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    X /= 1.2 * np.linalg.norm(X, axis=1, keepdims=True)
    return X, np.where(rng.random(n) < 0.5, 1.0, -1.0)


@pytest.mark.parametrize("loss", ["logistic", "huberized_hinge"])
def test_clipped_gradient_sum_sensitivity(loss: str) -> None:
    """2C under replace-one and C under add/remove, attained; rows outside the unit ball too."""
    X, y = small_problem()
    rng = np.random.default_rng(1)
    w = rng.standard_normal(X.shape[1])
    cands = extreme_rows(X.shape[1], 3.0, 1.0, rng, n_random=4)
    c = 0.5
    L = get_loss(loss)

    def stat(d):
        return clipped_gradient_sum(L, d[0], d[1], w, c)

    rep = max_sensitivity(stat, replace_one_pairs(X, y, cands, indices=[0]))
    assert rep == pytest.approx(2 * c, rel=1e-9)
    assert max_sensitivity(stat, add_remove_pairs(X, y, cands)) == pytest.approx(c, rel=1e-9)


def test_mpadmm_sensitivity_recursion() -> None:
    """From a public state, one epoch moves x by <= Delta_x (attained), z by <= Delta_x and
    y by <= rho Delta_x on replace-one neighbours (the paper's soft-thresholding argument).
    Delta_x is attained up to the gradient of the candidates falling just short of C."""
    X, y = small_problem(n=5)
    rng = np.random.default_rng(2)
    eta, rho, lam, clip = 2.0, 0.5, 0.05, 0.5
    state = [0.3 * rng.standard_normal(3) for _ in range(3)]
    cands = extreme_rows(3, 1.0, 1.0, rng, n_random=6)
    L = get_loss("logistic")
    dx, dz, dy = mpadmm_sensitivities(5, eta, rho, clip)
    found = []
    for part in range(3):

        def stat(d, part=part):
            return mpadmm_epoch(L, d[0], d[1], *state, eta=eta, rho=rho, lam=lam, clip=clip)[part]

        found.append(max_sensitivity(stat, replace_one_pairs(X, y, cands, indices=[0])))
    assert 0.99 * dx < found[0] <= dx * (1 + 1e-12)
    assert 0.0 < found[1] <= dz * (1 + 1e-12)
    assert 0.0 < found[2] <= dy * (1 + 1e-12)


def test_samplers_draw_what_the_accountant_assumes() -> None:
    rng = np.random.default_rng(3)
    fixed = BatchSampler("fixed", 1000, 30, rng)
    draws = [fixed.draw() for _ in range(200)]
    assert all(len(b) == 30 and len(np.unique(b)) == 30 for b in draws)
    # each row is in a draw with probability 0.03, independently across draws: its count is
    # Binomial(200, 0.03) (variance 5.82); a sampler that favours rows fails the chi-square
    counts = np.bincount(np.concatenate(draws), minlength=1000)
    assert stats.chisquare(counts).pvalue > 1e-3
    assert counts.var() == pytest.approx(200 * 0.03 * 0.97, rel=0.15)
    poisson = BatchSampler("poisson", 1000, 30, rng)
    sizes = np.array([len(poisson.draw()) for _ in range(2000)])
    assert abs(sizes.mean() - 30) < 4 * math.sqrt(30 * 0.97 / 2000)
    assert sizes.std() == pytest.approx(math.sqrt(30 * 0.97), rel=0.1)
    assert (fixed.relation, fixed.sensitivity(1.0)) == ("replace_one", 2.0)
    assert (poisson.relation, poisson.sensitivity(1.0)) == ("add_remove", 1.0)


@pytest.mark.parametrize("sampling", ["fixed", "poisson"])
def test_privacy_report_matches_the_sampler(sampling: str) -> None:
    X, y = small_problem(n=400, p=4)
    est = SSADMMClassifier(
        1e-3,
        noise_multiplier=1.5,
        epsilon=None,
        n_epochs=2,
        sampling=sampling,
        delta=1e-6,
        random_state=0,
    ).fit(X, y)
    info = est.privacy_
    steps = 2 * math.ceil(400 / 20)
    ref = epsilon_for(sampling, 20 / 400, 1.5, steps, 1e-6, n=400)
    assert info["epsilon"] == pytest.approx(ref["epsilon"], rel=1e-12)
    assert info["relation"] == ref["relation"] and info["steps"] == steps
    assert info["l2_sensitivity"] == (2.0 if sampling == "fixed" else 1.0)
    if sampling == "fixed":
        assert info["epsilon_pld"] is None
        # an add/remove accountant refuses the fixed-size event
        assert not RdpAccountant().supports(est.privacy_event_)
    else:
        assert info["epsilon_pld"] <= info["epsilon"]


def test_ledger_refuses_mismatched_sampler_and_relation() -> None:
    X, y = small_problem(n=400, p=4)
    est = SSADMMClassifier(
        1e-3, noise_multiplier=1.5, epsilon=None, n_epochs=2, delta=1e-6, random_state=0
    ).fit(X, y)
    ledger = PrivacyLedger(1e-6)
    with pytest.raises(PrivacyError):
        ledger.record(est.privacy_event_, label="x", relation="add_remove", protects="row")
    poisson = sampled_gaussian_event("poisson", q=0.05, noise_multiplier=1.0, steps=10)
    with pytest.raises(PrivacyError, match="refused for fixed"):
        ledger.record(poisson, label="x", relation="replace_one", protects="row", sampling="fixed")
    ledger.record(
        est.privacy_event_, label="ok", relation="replace_one", protects="row", sampling="fixed"
    )
    assert ledger.epsilon() == pytest.approx(est.privacy_["epsilon"], rel=1e-9)


@pytest.mark.parametrize(
    "cls,kw",
    [
        (SSADMMClassifier, {"n_epochs": 2}),
        (DPSGDClassifier, {"n_epochs": 2}),
        (MPADMMClassifier, {"n_epochs": 10}),
        (DPADMMClassifier, {"n_iter": 10}),
    ],
)
def test_calibration_meets_target(cls, kw) -> None:
    X, y = small_problem(n=400, p=4)
    info = cls(1e-3, epsilon=0.5, delta=1e-6, random_state=0, **kw).fit(X, y).privacy_
    assert 0.99 * 0.5 <= info["epsilon"] <= 0.5
    assert info["delta"] == 1e-6 and info["relation"] == "replace_one"


def gaussian_delta(eps: float, mu: float) -> float:
    """Exact delta(eps) of the Gaussian mechanism with mu = sensitivity / sigma."""
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_full_batch_pld_matches_closed_form_gaussian() -> None:
    """T Gaussians of multiplier z = one Gaussian with mu = sqrt(T)/z (Dong, Roth & Su 2019)."""
    X, y = small_problem(n=400, p=4)
    info = (
        MPADMMClassifier(1e-3, epsilon=1.0, delta=1e-6, n_epochs=10, random_state=0)
        .fit(X, y)
        .privacy_
    )
    mu = math.sqrt(10) / info["noise_multiplier"]
    exact = brentq(lambda e: gaussian_delta(e, mu) - 1e-6, 1e-6, 20)
    assert info["epsilon_pld"] == pytest.approx(exact, abs=2e-3)
    assert exact <= info["epsilon"] <= 1.0  # RDP is an upper bound


def test_releasing_only_x_costs_a_third_of_the_rdp() -> None:
    """perturb="xzy" (three Gaussians per epoch) needs sqrt(3) times the noise multiplier of
    perturb="x" for the same epsilon: z and y are post-processing of x~ and public y~."""
    X, y = small_problem(n=400, p=4)
    one = MPADMMClassifier(1e-3, epsilon=1.0, n_epochs=10, random_state=0).fit(X, y)
    three = MPADMMClassifier(1e-3, epsilon=1.0, n_epochs=10, perturb="xzy", random_state=0).fit(
        X, y
    )
    ratio = three.privacy_["noise_multiplier"] / one.privacy_["noise_multiplier"]
    assert ratio == pytest.approx(math.sqrt(3), rel=1e-4)
    assert isinstance(three.privacy_event_.event, dp_event.ComposedDpEvent)


def test_objp_release_is_not_accounted_as_private() -> None:
    """Objective perturbation's epsilon needs the exact minimiser (Chaudhuri et al. 2011);
    ADMM-objP runs gradient epochs, so its release enters a ledger as NonPrivateDpEvent and
    the composed total is inf, while the nominal T eps_k is reported separately."""
    X, y = small_problem(n=400, p=4)
    est = ADMMObjPClassifier(1e-3, epsilon=1.0, delta=1e-6, n_iter=5, random_state=0).fit(X, y)
    info = est.privacy_
    assert info["guarantee"] == (
        "approximate: guarantee holds only for the exact minimiser; "
        "not established for this release"
    )
    assert isinstance(est.privacy_event_, dp_event.NonPrivateDpEvent)
    assert info["epsilon"] == info["pure_epsilon"] == math.inf and info["private"] is False
    assert info["noise_added"] and info["epsilon_if_exact_minimiser"] == pytest.approx(1.0)
    assert est.nominal_privacy_event_ == dp_event.SelfComposedDpEvent(
        est.nominal_privacy_event_.event, 5
    )
    ledger = PrivacyLedger(1e-6)
    ledger.record(
        est.privacy_event_,
        label="objP",
        relation="replace_one",
        protects="row",
        guarantee=info["guarantee"],
    )
    assert ledger.epsilon() == ledger.pure_epsilon() == ledger.pld_epsilon() == math.inf
