"""K-fold cross-validation of lambda by the machines (``--cv``, dpnet.decentralized.cv).

The distributed CV curve is compared with a centralized K-fold CV on the same folds (each
machine's fold assignment reconstructed from its stream): every fold's training problem
solved by skglm (logistic loss) or on one machine (the flip-corrected loss), the validation
loss computed directly.
"""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from devtools.reference import group_logistic_optimum
from dpnet.data import split_rows
from dpnet.decentralized import (
    ADMMConfig,
    ArrayBlock,
    Block,
    CommBlock,
    GroupStructure,
    LocalData,
    boundary,
    run_machine,
)
from dpnet.decentralized import cv as cvm
from dpnet.decentralized.block import network_sum
from dpnet.losses import Logistic, UnbiasedLogistic
from dpnet.network import run_in_process
from dpnet.penalties import groups_from_labels
from dpnet.run import main
from dpnet.streams import machine_flip_stream, machine_fold_stream
from tests.launch import run_job

J, N, P, K = 5, 150, 6, 3
GROUPS = np.repeat(np.arange(3), 2)
WEIGHTS = np.ones(3)
GRID = (0.12, 0.05, 0.02)
GRID_UNBIASED = (0.5, 0.3, 0.2)  # the flip-corrected loss is unbounded below at small lambda
SEED = 4
RTOL = 1e-6


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, P))
    y = np.where(X[:, 0] - X[:, 2] + 0.8 * rng.standard_normal(N) > 0, 1.0, -1.0)
    return X, y


def _aug(X: np.ndarray) -> np.ndarray:
    return np.hstack([X, np.ones((X.shape[0], 1))])


def _central_theta(X: np.ndarray, y: np.ndarray, lam: float, loss, solver: str) -> np.ndarray:
    """The fold's training problem solved centrally: by skglm (logistic loss only), or on one
    machine (the ADMM on a single node, no network, to tolerance 1e-10: at 1e-12 the residuals
    can sit on the Newton step's rounding floor, ~1e-12, and never stop)."""
    if solver == "skglm":
        assert isinstance(loss, Logistic)
        return group_logistic_optimum(X, y, GROUPS, lam)
    grp_ptr, grp_indices = groups_from_labels(GROUPS)
    data = LocalData(_aug(X), y, len(y), loss)
    groups = GroupStructure(grp_ptr, grp_indices, lam * WEIGHTS / 2.0)
    config = ADMMConfig(tol=1e-10, max_rounds=20000)
    node = nx.empty_graph(1)
    (result,) = run_in_process(node, lambda comm: run_machine(comm, data, groups, config, node))
    assert result.stop_reason == "converged"
    return result.z


def _central_cv(
    X_parts, y_parts, fold_parts, grid, loss, solver: str = "node"
) -> tuple[np.ndarray, ...]:
    """(fold losses (K, L), mean, SE) of a centralized K-fold CV on the same folds."""
    losses = np.zeros((K, len(grid)))
    sizes = np.zeros(K)
    for f in range(K):
        train = [fp != f for fp in fold_parts]
        X_tr = np.vstack([x[t] for x, t in zip(X_parts, train, strict=True)])
        y_tr = np.concatenate([y[t] for y, t in zip(y_parts, train, strict=True)])
        X_va = np.vstack([x[~t] for x, t in zip(X_parts, train, strict=True)])
        y_va = np.concatenate([y[~t] for y, t in zip(y_parts, train, strict=True)])
        sizes[f] = len(y_va)
        for i, lam in enumerate(grid):
            theta = _central_theta(X_tr, y_tr, lam, loss, solver)
            losses[f, i] = np.mean(loss.value(y_va * (_aug(X_va) @ theta)))
    mean = np.average(losses, axis=0, weights=sizes)
    se = np.sqrt(np.average((losses - mean) ** 2, axis=0, weights=sizes) / (K - 1))
    return losses, mean, se


def _distributed_cv(X_parts, y_parts, fold_parts, graph, loss, grid=GRID) -> list:
    """Every machine's CV result: threads over their communicators, then the simulator's
    (all machines in one block) appended."""
    grp_ptr, grp_indices = groups_from_labels(GROUPS)
    data = [LocalData(_aug(X), y, N, loss) for X, y in zip(X_parts, y_parts, strict=True)]

    def fit(block: Block) -> list:
        ranks = block.edges.ids.tolist()
        return cvm.cross_validate(
            block, graph, [data[j] for j in ranks], grp_ptr, grp_indices, WEIGHTS,
            [fold_parts[j] for j in ranks], K, ADMMConfig(), path=cvm.CVPath(grid=grid),
        )  # fmt: skip

    threads = run_in_process(graph, lambda comm: fit(CommBlock(comm, graph))[0])
    return threads + fit(ArrayBlock(graph))


def _parts(X, y, seed=SEED):
    idx = split_rows(N, J)
    folds = [cvm.assign_folds(len(i), K, machine_fold_stream(seed, j)) for j, i in enumerate(idx)]
    return [X[i] for i in idx], [y[i] for i in idx], folds


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - b) / np.abs(b)))


@pytest.mark.parametrize(
    "loss, solver",
    [
        (Logistic(), "node"),
        (UnbiasedLogistic(0.8), "node"),
        pytest.param(Logistic(), "skglm", marks=pytest.mark.slow),  # numba compiles ~25 s
    ],
    ids=["logistic", "unbiased", "logistic-skglm"],
)
def test_distributed_cv_equals_centralized_cv(loss, solver):
    X, y = _data()
    grid = GRID
    if isinstance(loss, UnbiasedLogistic):  # labels randomized with the loss's keep probability
        keep = np.random.default_rng(9).random(N) < loss.keep_prob
        y, grid = np.where(keep, y, -y), GRID_UNBIASED
    X_parts, y_parts, folds = _parts(X, y)
    results = _distributed_cv(X_parts, y_parts, folds, nx.cycle_graph(J), loss, grid)
    ref_losses, ref_mean, ref_se = _central_cv(X_parts, y_parts, folds, grid, loss, solver)
    cv = results[0]
    assert _rel(cv.fold_losses, ref_losses) <= RTOL
    assert _rel(cv.mean, ref_mean) <= RTOL and _rel(cv.se, ref_se) <= RTOL
    assert cv.fold_sizes.tolist() == [50, 50, 50] and cv.grid.tolist() == list(grid)
    assert all(r == "converged" for fold in cv.stop_reasons for r in fold)
    i_min, i_1se = cvm.select(ref_mean, ref_se)
    threads, simulated = results[:J], results[J:]
    for other in threads:  # every machine holds the same numbers and takes the same decision
        assert np.array_equal(other.mean, cv.mean) and np.array_equal(other.se, cv.se)
        assert (other.index_min, other.index_1se) == (cv.index_min, cv.index_1se)
    for other in simulated:  # the simulator's: the same to rounding, the same decision
        assert _rel(other.mean, cv.mean) <= 1e-9 and _rel(other.se, cv.se) <= 1e-7
        assert (other.index_min, other.index_1se) == (cv.index_min, cv.index_1se)
    assert (cv.index_min, cv.index_1se) == (i_min, i_1se)


@pytest.mark.parametrize(
    "graph",
    [nx.path_graph(6), nx.star_graph(5), nx.grid_2d_graph(2, 3), nx.empty_graph(1)],
    ids=["path", "star", "grid", "single"],
)
def test_network_sum_is_the_sum_and_bitwise_equal_everywhere(graph):
    graph = nx.convert_node_labels_to_integers(graph, ordering="sorted")
    rng = np.random.default_rng(1)
    values = rng.standard_normal((graph.number_of_nodes(), 2, 3))
    sums = run_in_process(graph, lambda comm: network_sum(comm, graph, values[comm.rank]))
    assert np.allclose(sums[0], values.sum(axis=0), rtol=1e-14, atol=1e-14)
    assert all(np.array_equal(s, sums[0]) for s in sums)


def test_folds_balanced_reproducible_and_own_stream():
    a = cvm.assign_folds(11, 3, machine_fold_stream(SEED, 0))
    b = cvm.assign_folds(11, 3, machine_fold_stream(SEED, 0))
    c = cvm.assign_folds(11, 3, machine_fold_stream(SEED, 1))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.bincount(a).tolist() == [4, 4, 3]
    # the folds' stream is not the randomized response's
    assert machine_fold_stream(SEED, 0).random() != machine_flip_stream(SEED, 0).random()


def test_lambda_max_is_where_every_group_leaves():
    X, y = _data()
    X_parts, y_parts, _ = _parts(X, y)
    graph = nx.cycle_graph(J)
    grp_ptr, grp_indices = groups_from_labels(GROUPS)
    counts = np.array([np.sum(y > 0), np.sum(y < 0)], dtype=float)
    lam_max = run_in_process(
        graph,
        lambda comm: cvm.lambda_max(
            CommBlock(comm, graph),
            [LocalData(_aug(X_parts[comm.rank]), y_parts[comm.rank], N)],
            grp_ptr,
            grp_indices,
            WEIGHTS,
            counts,
        ),
    )
    simulated = cvm.lambda_max(
        ArrayBlock(graph),
        [LocalData(_aug(X), y, N) for X, y in zip(X_parts, y_parts, strict=True)],
        grp_ptr,
        grp_indices,
        WEIGHTS,
        counts,
    )
    assert len(set(lam_max)) == 1 and simulated == lam_max[0]  # the same tree sums
    b_star = cvm.intercept_only(Logistic(), *counts)
    assert b_star == pytest.approx(np.log(counts[0] / counts[1]), abs=1e-12)
    at_max = _central_theta(X, y, lam_max[0] * (1 + 1e-9), Logistic(), "node")
    below = _central_theta(X, y, lam_max[0] * 0.95, Logistic(), "node")
    assert np.abs(at_max[:-1]).max() == 0.0 and np.abs(below[:-1]).max() > 1e-4
    assert at_max[-1] == pytest.approx(b_star, abs=1e-9)


def test_cv_curve_and_selection_rules():
    losses = np.array([[1.0, 0.5, 0.6], [1.2, 0.7, 0.6]])
    mean, se = cvm.cv_curve(losses, np.array([1, 1]))
    assert mean.tolist() == [1.1, 0.6, 0.6] and se == pytest.approx([0.1, 0.1, 0.0])
    assert cvm.select(mean, se) == (1, 1)  # ties: the largest lambda
    assert cvm.select(np.array([0.7, np.nan, 0.5]), np.array([0.1, 0.1, 0.25])) == (2, 0)
    assert cvm.select(np.array([0.7, np.nan, 0.5]), np.array([0.3, 0.1, 0.1])) == (2, 2)


@pytest.mark.parametrize(
    "grid, message",
    [
        ((0.1,), "at least 2"),
        ((0.1, float("nan")), "finite and > 0"),
        ((0.1, -0.1), "finite and > 0"),
        ((0.1, 0.0), "finite and > 0"),
        ((0.1, 0.05, 0.1), "repeated"),
        ((0.1, 0.01, 0.05), "sorted"),
    ],
)
def test_bad_grids_are_refused(grid, message):
    with pytest.raises(cvm.ConfigError, match=message):
        cvm.check_grid(grid)
    assert cvm.check_grid((0.01, 0.1)).tolist() == [0.1, 0.01]


def _npz(tmp_path: Path, X, y) -> str:
    np.savez(tmp_path / "d.npz", X=X, y=y, groups=GROUPS)
    return str(tmp_path / "d.npz")


def _error(capsys, argv) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("dpnet: error: "), err
    return err[0]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--cv", "1"], "--cv must be >= 2"),
        (["--cv", "31"], "machine 0 holds only 30 rows"),
        (["--cv", "3", "--lam-grid", "0.1,nan"], "finite and > 0"),
        (["--cv", "3", "--lam-grid", "0.1,-1"], "finite and > 0"),
        (["--cv", "3", "--lam-grid", "0.1,0.01,0.1"], "repeated"),
        (["--cv", "3", "--lam-grid", "0.1,0.01,0.05"], "sorted"),
        (["--cv", "3", "--lam-grid", "0.1,x"], "comma-separated numbers"),
        (["--cv", "3", "--n-lambdas", "1"], "--n-lambdas"),
        (["--cv", "3", "--lambda-ratio", "1"], "--lambda-ratio"),
        (["--cv", "3", "--checkpoint", "ck", "--seed", "1"], "--checkpoint or --resume"),
        (["--lam-grid", "0.1,0.01"], "--lam-grid needs --cv"),
        (["--cv-plot", "cv.png"], "--cv-plot needs --cv"),
        (["--cv", "3", "--cv-plot", "cv.nope"], "unknown image format"),
    ],
)
def test_bad_cv_options_exit_2_before_round_one(capsys, tmp_path, extra, message):
    X, y = _data()
    argv = ["--data", _npz(tmp_path, X, y), "--test-fraction", "0", "--machines", str(J)]
    assert message in _error(capsys, [*argv, *extra])


def test_k_above_the_smallest_own_file_is_refused(capsys, tmp_path):
    X, y = _data()
    for j, idx in enumerate(split_rows(N, J, sizes=[40, 40, 40, 26, 4])):
        np.savez(tmp_path / f"part-{j}.npz", X=X[idx], y=y[idx], groups=GROUPS)
    line = _error(capsys, ["--data", str(tmp_path / "part-{rank}.npz"), "--cv", "5"])
    assert "machine 4 holds only 4 rows" in line


def _cli_args(data: str, epsilon: str) -> list[str]:
    return [
        "--data",
        data,
        "--test-fraction",
        "0",
        "--seed",
        str(SEED),
        "--epsilon",
        epsilon,
        "--cv",
        str(K),
        "--lam-grid",
        ",".join(map(str, GRID)),
        "--quiet",
    ]


def _check_against_central(report: dict, X, y, keep_prob: float) -> None:
    X_parts, y_parts, folds = _parts(X, y)
    if keep_prob < 1:  # the machines' randomized labels, from their own streams
        y_parts = [
            boundary.randomize_labels(yj, keep_prob, machine_flip_stream(SEED, j), "")
            for j, yj in enumerate(y_parts)
        ]
    _, mean, se = _central_cv(X_parts, y_parts, folds, GRID, Logistic())
    cv = report["cross_validation"]
    assert _rel(cv["mean"], mean) <= RTOL and _rel(cv["standard_error"], se) <= RTOL
    assert cv["K"] == K and cv["fold_sizes"] == [50, 50, 50]
    i_min, i_1se = cvm.select(mean, se)
    assert cv["lambda_min"] == GRID[i_min] and cv["lambda_1se"] == GRID[i_1se]


def test_cli_cv_report_plot_ledger_and_final_fit(tmp_path):
    X, y = _data()
    data = _npz(tmp_path, X, y)
    out, plot = tmp_path / "r.json", tmp_path / "cv.png"
    args = _cli_args(data, "1")
    assert main([*args, "--output", str(out), "--cv-plot", str(plot)]) == 0
    report = json.loads(out.read_text())
    _check_against_central(report, X, y, report["privacy"]["keep_prob"])
    cv = report["cross_validation"]
    assert plot.stat().st_size > 0 and cv["rule"] == "min"
    assert cv["lambda_selected"] == cv["lambda_min"]
    labels = [r["label"] for r in report["privacy"]["ledger"]["releases"]]
    assert "cross-validation: post-processing of the randomized labels, no extra privacy cost" in (
        labels
    )
    assert report["privacy"]["ledger"]["total"]["pure_epsilon"] == pytest.approx(1.0)
    # the final fit is the run with --lam lambda_min: same randomized labels, same rounds
    plain = tmp_path / "plain.json"
    base = [a for a in args if a not in ("--cv", str(K), "--lam-grid", ",".join(map(str, GRID)))]
    assert main([*base, "--lam", repr(cv["lambda_min"]), "--output", str(plain)]) == 0
    other = json.loads(plain.read_text())
    assert report["coef"] == other["coef"] and report["rounds"] == other["rounds"]
    assert report["machines"][0]["bytes_sent"] == other["machines"][0]["bytes_sent"]


@pytest.mark.mpi_launch
def test_mpi_cv_equals_inprocess_and_centralized(tmp_path):
    X, y = _data()
    data = _npz(tmp_path, X, y)
    args = [*_cli_args(data, "inf"), "--cv-rule", "1se"]
    res = run_job([*args, "--output", str(tmp_path / "mpi.json")], n_ranks=J, timeout=60)
    assert res.returncode == 0, res.stderr
    assert main([*args, "--machines", str(J), "--output", str(tmp_path / "local.json")]) == 0
    mpi, local = (json.loads((tmp_path / f).read_text()) for f in ("mpi.json", "local.json"))
    assert mpi["backend"] == "mpi" and local["backend"] == "threads"
    for key in ("mean", "standard_error", "fold_losses", "rounds", "lambda_1se"):
        assert mpi["cross_validation"][key] == local["cross_validation"][key]
    assert mpi["coef"] == local["coef"]
    assert mpi["cross_validation"]["lambda_selected"] == mpi["cross_validation"]["lambda_1se"]
    _check_against_central(mpi, X, y, 1.0)


@pytest.mark.slow  # two subprocess runs: ~20 s on a shared 2-core machine
def test_one_raw_label_changes_nothing_released_with_cv(tmp_path):
    """The release boundary with --cv: randomized labels held fixed (tests.fixed_labels),
    one raw label changed -> stdout, results and CV plot bitwise identical."""
    X, y = _data()
    y_changed = y.copy()
    y_changed[7] = -y_changed[7]
    released = []
    for name, labels in (("a", y), ("b", y_changed)):
        work = tmp_path / name
        work.mkdir()
        np.savez(work / "d.npz", X=X, y=labels, groups=GROUPS)
        args = [*_cli_args("d.npz", "1"), "--machines", str(J), "--n-lambdas", "3"]
        args += ["--lambda-ratio", "0.3", "--max-rounds", "300"]  # labels of pure noise: slow
        args = [a for a in args if a not in ("--quiet",)]
        args[args.index("--lam-grid") : args.index("--lam-grid") + 2] = []  # lambda_max grid
        res = run_job(
            [*args, "--output", "r.json", "--cv-plot", "cv.png", "--oracle-output", "o.json"],
            module="tests.fixed_labels",
            cwd=work,
        )
        assert res.returncode == 0, res.stderr
        released.append(
            [res.stdout, res.stderr, *((work / f).read_bytes() for f in ("r.json", "cv.png"))]
        )
        released[-1].append((work / "o.json").read_bytes())
    a, b = released
    assert a[:4] == b[:4], "the release depends on a raw label"
    assert a[4] != b[4], "the oracle file should see the changed raw label"
    assert "cv fold 3/3" in a[1]
