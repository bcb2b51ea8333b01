"""The pairwise record-privacy audit of benchmarks/record_pairwise_audit.py (its docstring
describes the attacks): every machine's view built from the simulator's transcript, the
attackers' statistics and the epsilon lower bounds. Shared by the benchmark and
tests/test_record_pairwise_audit.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
from scipy.optimize import brentq

from devtools.audit import audit_epsilon
from devtools.record_attack import theta_likelihood_ratio
from dpnet.decentralized import (
    ADMMConfig,
    GroupStructure,
    LocalData,
    RecordNoise,
    StackedShards,
    TreeAggregator,
    _edges,
    admm,
    local_objective,
    tree_plan,
)
from dpnet.decentralized.batched import run_batched
from dpnet.decentralized.block import BlockEdges
from dpnet.decentralized.record import RECORD_RELAXATION
from dpnet.decentralized.steps import scaled_residual, z_update
from dpnet.decentralized.termination import MESSAGE_SIZE, N_STATS
from dpnet.losses import Logistic
from dpnet.privacy import composed_gaussian_delta, composed_gaussian_multiplier

R, DIM, ROWS, J, DELTA = 3.0, 3, 8, 4, 1e-5
U = J - 1  # the machine whose record differs
GRAPH = nx.path_graph(J)
EDGES = BlockEdges.of(GRAPH)  # every machine's closed neighbourhood, as the simulator's
GROUPS = GroupStructure(np.arange(DIM + 1), np.arange(DIM), np.full(DIM, 0.01 / (2 * J)))
COLUMN_GROUP = np.empty(DIM, dtype=np.int64)  # the group of every penalised column
COLUMN_GROUP[GROUPS.grp_indices] = np.repeat(np.arange(DIM), np.diff(GROUPS.grp_ptr))


def shard(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.standard_normal((ROWS, DIM))
    X *= R / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), R)
    return X, np.where(rng.random(ROWS) < 0.5, 1.0, -1.0)


def local(X: np.ndarray, y: np.ndarray) -> LocalData:
    return LocalData(np.hstack([X, np.ones((X.shape[0], 1))]), y, J * ROWS, Logistic())


def problem() -> tuple[tuple[LocalData, LocalData], list[LocalData]]:
    """Machine u's two neighbouring shards and the other machines' fixed shards."""
    rng = np.random.default_rng(21)
    X, y = shard(rng)
    X[0], y[0] = R * np.eye(DIM)[0], 1.0
    X1 = X.copy()
    X1[0] = -X[0]
    return (local(X, y), local(X1, y)), [local(*shard(rng)) for _ in range(J - 1)]


def shards_of(truth: int) -> list[LocalData]:
    pair, others = problem()
    return [*others[:U], pair[truth], *others[U:]]


def released_loss(config: ADMMConfig, data: LocalData, theta: np.ndarray) -> float:
    """f_j(theta) in the stop statistics, or 0 under record-level privacy (withheld: the
    round loop's objective is then the group penalty alone)."""
    return local_objective(data, theta) if config.record is None else 0.0


def admm_config(noise: RecordNoise, rounds: int) -> ADMMConfig:
    """The record-private ADMM of the CLI (its relaxation, c fixed), exactly ``rounds``
    rounds (no stop by tolerance)."""
    return ADMMConfig(
        max_rounds=rounds, tol=1e-300, record=noise, adapt_c=False, relaxation=RECORD_RELAXATION
    )


@dataclass
class Transcript:
    """One run's per-round state: released thetas, their centres and rho, the Z's."""

    theta: np.ndarray  # (T, J, dim)
    center: np.ndarray  # (T, J, dim)
    rho: np.ndarray  # (T, J)
    z: np.ndarray  # (T, J, dim)

    @property
    def c(self) -> float:
        return float(self.rho[0, 0] / EDGES.degree[0])


def run_once(shards: list[LocalData], config: ADMMConfig) -> Transcript:
    """The simulator's run, its per-round state kept by wrapping (and calling through) the
    theta release and the Z step."""
    rows: dict[str, list[np.ndarray]] = {"theta": [], "center": [], "rho": [], "z": []}
    real_release, real_z = admm.private_thetas, admm.z_update

    def release(noise, data, center, rho, round_, ranks):
        out = real_release(noise, data, center, rho, round_, ranks)
        rows["theta"].append(out.copy())
        rows["center"].append(np.array(center, copy=True))
        rows["rho"].append(np.array(rho, dtype=float, copy=True))
        return out

    def z_step(*args, **kwargs):
        out = real_z(*args, **kwargs)
        rows["z"].append(out.copy())
        return out

    admm.private_thetas, admm.z_update = release, z_step
    try:
        run_batched(shards, GROUPS, config, GRAPH)
    finally:
        admm.private_thetas, admm.z_update = real_release, real_z
    return Transcript(*(np.stack(rows[k]) for k in ("theta", "center", "rho", "z")))


def stop_messages(tr: Transcript, shards: list[LocalData], config: ADMMConfig) -> np.ndarray:
    """(T, J, MESSAGE_SIZE): the stop-statistics part of the theta message every machine
    sends in every round, as the round loop (:func:`~dpnet.decentralized.admm.run_block`)
    forms it from its state."""
    T, n_mach, _ = tr.theta.shape
    nbrs = [sorted(GRAPH.neighbors(j)) for j in range(n_mach)]
    aggs = [TreeAggregator(tree_plan(GRAPH, j), nbrs[j]) for j in range(n_mach)]
    out = np.empty((T, n_mach, MESSAGE_SIZE))
    c = tr.c
    for t in range(T):
        for j in range(n_mach):
            aggs[j].outgoing(out=out[t, j])
        z_prev = tr.z[t - 1] if t else np.zeros_like(tr.z[t])
        primal, dual = _edges.residuals(tr.z[t], z_prev, tr.theta[t, EDGES.col], EDGES.ptr, c)
        for j in range(n_mach):
            theta = tr.theta[t, j]
            norm = float(np.sqrt(theta @ theta))
            own = np.array(
                [
                    released_loss(config, shards[j], theta) + float(GROUPS.penalty(theta[:-1])),
                    scaled_residual(float(primal[j]), float(dual[j]), c, norm, 0.0),
                    primal[j],
                    dual[j],
                    norm,
                ]
            )
            aggs[j].receive(t + 1, own, out[t, nbrs[j]])
    return out


def views(tr: Transcript, stats: np.ndarray) -> dict[int, dict[str, np.ndarray]]:
    """Every machine's view: ``z`` (T, |N_k|, dim) and ``theta_msg`` (T, |N_k|, dim +
    MESSAGE_SIZE), the buffers of its two exchanges per round (neighbours in increasing
    order); ``own`` (T, 2 dim) its sent theta and Z; rank 0 also ``gather`` (J, 2 dim)."""
    out = {}
    for k in range(J):
        nb = sorted(GRAPH.neighbors(k))
        view = {
            "z": tr.z[:, nb],
            "theta_msg": np.concatenate([tr.theta[:, nb], stats[:, nb]], axis=2),
            "own": np.concatenate([tr.theta[:, k], tr.z[:, k]], axis=1),
        }
        if k == 0:
            view["gather"] = np.concatenate([tr.theta[-1], tr.z[-1]], axis=1)
        out[k] = view
    return out


def flat_view(view: dict[str, np.ndarray]) -> np.ndarray:
    return np.concatenate([np.ravel(v) for v in view.values()])


# -- reconstructions ------------------------------------------------------------------------


def invert_threshold(v: np.ndarray) -> np.ndarray:
    """u with S(u) = v for the group soft-threshold of the Z step (the intercept, last, is
    not thresholded): u_g = v_g (1 + t_g / ||v_g||) where v_g != 0, 0 where v_g = 0 (then
    only ||u_g|| <= t_g is known)."""
    u = v.copy()
    norms = GROUPS.norms(v[:-1])
    scale = np.where(norms > 0, 1.0 + GROUPS.thresholds / np.where(norms > 0, norms, 1.0), 0.0)
    u[:-1] = v[:-1] * scale[COLUMN_GROUP]
    return u


def rebuild_through(w: int, z_w: np.ndarray, known: np.ndarray, c: float) -> np.ndarray:
    """The one unknown theta of w's closed neighbourhood in rounds 1 .. T - 1 (rows), from
    w's Z's (``z_w``, (T, dim)) and the sum of the other thetas of w's closed neighbourhood
    (``known``, (T, dim)).

    Z_w(t) = S(u_w(t)) / (c d_w), u_w(t) = c Sum(t - 1) - S_V(t - 1), Sum = sum of the
    thetas over w's closed neighbourhood, S_V(t) = S_V(t - 1) + c (d_w a Z_w(t)
    + (1 - a) Sum(t - 1) - Sum(t)) the sum of w's dual copies (relaxation a), so
    2 c Sum(t) = u_w(t + 1) + S_V(t - 1) + c d_w a Z_w(t) + c (1 - a) Sum(t - 1)."""
    d_w, a = len(list(GRAPH.neighbors(w))) + 1, RECORD_RELAXATION
    u = np.array([invert_threshold(c * d_w * z) for z in z_w])
    total_prev, s_v_prev = np.zeros(z_w.shape[1]), np.zeros(z_w.shape[1])
    out = []
    for t in range(z_w.shape[0] - 1):  # row t: round t + 1
        total = (u[t + 1] + s_v_prev + c * d_w * a * z_w[t] + c * (1 - a) * total_prev) / (2 * c)
        s_v_prev = s_v_prev + c * (d_w * a * z_w[t] + (1 - a) * total_prev - total)
        total_prev = total
        out.append(total - known[t])
    return np.array(out)


def _row_sums(rows: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """Each CSR row's edges summed left to right, the order of the round's kernel
    (dpnet.decentralized._edges), so a replayed centre is bitwise the run's."""
    first, length = ptr[:-1], np.diff(ptr)
    total = rows[first].copy()
    for k in range(1, int(length.max())):
        longer = length > k
        total[longer] += rows[first[longer] + k]
    return total


def replay_centers(theta_known: np.ndarray, c: float) -> np.ndarray:
    """Every machine's theta-step centre in every round, replayed from thetas (T, J, dim):
    NaN where a machine's theta is not known, so a finite centre used only known thetas."""
    edges = EDGES
    assert edges.rev is not None  # the whole network's edges
    T, n_mach, dim = theta_known.shape
    a = RECORD_RELAXATION
    theta, z, V = np.zeros((n_mach, dim)), np.zeros((n_mach, dim)), np.zeros((len(edges.col), dim))
    centers = np.empty_like(theta_known)
    with np.errstate(invalid="ignore"):
        for t in range(T):
            z = z_update(theta[edges.col], V, z, c, GROUPS, edges)
            z_edge = a * z[edges.row] + (1 - a) * theta[edges.col]
            rows = z_edge[edges.rev] + V[edges.rev] / c
            centers[t] = _row_sums(rows, edges.ptr) / edges.degree[:, None]
            theta = theta_known[t]
            V = V + c * (z_edge - theta[edges.col])
    return centers


@dataclass
class Attacks:
    """One run's statistics: the likelihood ratios and the reconstructed views."""

    llr_d1: float
    llr_d2: float
    recon_d3: np.ndarray
    error_d2: float  # max |rebuilt - released| of theta_u (distance 2)
    error_d3: float  # of theta_2 (distance 3)


def attack(
    tr: Transcript,
    v: dict[int, dict[str, np.ndarray]],
    pair: tuple[StackedShards, ...],
    std_num: float,
) -> Attacks:
    """The explicit attacks of each observer, from its view only (module docstring)."""
    c = tr.c
    T = tr.theta.shape[0]
    std_at = lambda rho: std_num / rho  # noqa: E731
    rho_u = tr.rho[0, U]  # public: c and the graph

    def llr(theta_u: np.ndarray, known: np.ndarray) -> float:
        centers = replay_centers(known, c)[: len(theta_u), U]
        assert np.all(np.isfinite(centers))
        return theta_likelihood_ratio(
            [(ce, rho_u, th) for ce, th in zip(centers, theta_u, strict=True)], pair, std_at
        )

    nan = np.full_like(tr.theta, np.nan)
    # distance 1, machine 2: receives theta_1 and theta_u, holds theta_2
    v2 = v[2]
    known = nan.copy()
    known[:, [1, 3]] = v2["theta_msg"][:, :, : DIM + 1]
    known[:, 2] = v2["own"][:, : DIM + 1]
    llr_d1 = llr(known[:, U], known)
    # distance 2, machine 1: theta_u rebuilt from Z_2, less theta_1 (own) and theta_2
    v1 = v[1]
    theta_2 = v1["theta_msg"][:, 1, : DIM + 1]
    theta_1 = v1["own"][:, : DIM + 1]
    rebuilt_u = rebuild_through(2, v1["z"][:, 1], theta_1 + theta_2, c)
    known = nan.copy()
    known[:, 1], known[:, 2] = theta_1, theta_2
    known[: T - 1, U] = rebuilt_u
    llr_d2 = llr(rebuilt_u, known[: T - 1])
    # distance 3, rank 0: theta_2 rebuilt from Z_1, u's penalty from U_1, the final gather
    v0 = v[0]
    theta_1 = v0["theta_msg"][:, 0, : DIM + 1]
    theta_0 = v0["own"][:, : DIM + 1]
    rebuilt_2 = rebuild_through(1, v0["z"][:, 0], theta_0 + theta_1, c)
    up = v0["theta_msg"][3:, 0, DIM + 1 : DIM + 1 + N_STATS]  # U_1(t): rounds t - 3 of {1,2,3}
    pen_u = (
        up[:, 0] - GROUPS.penalty(theta_1[: T - 3, :-1]) - GROUPS.penalty(rebuilt_2[: T - 3, :-1])
    )
    recon_d3 = np.concatenate(
        [v0["gather"][U], v0["gather"][2], pen_u, np.ravel(up[:, 1:])]
        + [np.ravel(x) for x in (rebuilt_2, theta_1, theta_0)]
    )
    return Attacks(
        llr_d1,
        llr_d2,
        recon_d3,
        float(np.max(np.abs(rebuilt_u - tr.theta[: T - 1, U]))),
        float(np.max(np.abs(rebuilt_2 - tr.theta[: T - 1, 2]))),
    )


def simulate(truth: int, runs: int, epsilon: float, rounds: int, seed0: int) -> dict:
    """Per run: every observer's full view (flattened) and the explicit attacks' statistics."""
    shards = shards_of(truth)
    pair, _ = problem()
    one = tuple(StackedShards.stack([d]) for d in pair)
    s = composed_gaussian_multiplier(epsilon, DELTA, rounds)
    full: dict[int, list[np.ndarray]] = {k: [] for k in range(J - 1)}
    found: list[Attacks] = []
    for r in range(runs):
        noise = RecordNoise(s, R, seed=seed0 + r)
        config = admm_config(noise, rounds)
        tr = run_once(shards, config)
        v = views(tr, stop_messages(tr, shards, config))
        for k in full:
            full[k].append(flat_view(v[k]))
        found.append(attack(tr, v, one, s * noise.numerator(J * ROWS, Logistic().lipschitz_bound)))
    return {
        "full": {k: np.array(x) for k, x in full.items()},
        "llr_d1": np.array([f.llr_d1 for f in found]),
        "llr_d2": np.array([f.llr_d2 for f in found]),
        "recon_d3": np.array([f.recon_d3 for f in found]),
        "error": max(max(f.error_d2, f.error_d3) for f in found),
        "noise_std": s * RecordNoise(s, R).numerator(J * ROWS, 1.0) / tr.rho[0, U],
    }


# -- tests and bounds -----------------------------------------------------------------------


def fisher_statistics(v0: np.ndarray, v1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fit w on the first half of each, return w . x on the second halves. Columns that are
    not finite or constant (the waves' neutral entries, round indices) are dropped."""
    both = np.vstack([v0, v1])
    keep = np.all(np.isfinite(both), axis=0)
    keep &= np.ptp(np.where(np.isfinite(both), both, 0.0), axis=0) > 0
    v0, v1 = v0[:, keep], v1[:, keep]
    h0, h1 = v0.shape[0] // 2, v1.shape[0] // 2
    a, b = v0[:h0], v1[:h1]
    cov = np.cov(np.vstack([a - a.mean(0), b - b.mean(0)]).T)
    cov += 1e-6 * np.trace(cov) / cov.shape[0] * np.eye(cov.shape[0])
    w = np.linalg.solve(cov, b.mean(0) - a.mean(0))
    return v0[h0:] @ w, v1[h1:] @ w


def lower_bound(s0: np.ndarray, s1: np.ndarray) -> float:
    queues = {0: iter(s0), 1: iter(s1)}
    return audit_epsilon(
        lambda d, rng: next(queues[d]),
        0,
        1,
        n_trials=min(s0.size, s1.size),
        rng=np.random.default_rng(0),
        delta=DELTA,
    ).epsilon_lower


def separation(s0: np.ndarray, s1: np.ndarray) -> float:
    """mu: |mean difference| / pooled standard deviation."""
    pooled = np.sqrt((s0.var(ddof=1) + s1.var(ddof=1)) / 2)
    return float(abs(s1.mean() - s0.mean()) / pooled)


def gdp_epsilon(mu: float) -> float:
    """epsilon at DELTA of mu-GDP (0 if its delta at epsilon 0 is already below DELTA)."""
    if mu <= 0 or composed_gaussian_delta(1 / mu, 1, 0.0) <= DELTA:
        return 0.0
    return brentq(lambda e: composed_gaussian_delta(1 / mu, 1, e) - DELTA, 0.0, 100.0)
