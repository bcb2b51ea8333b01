"""The compiled Newton theta step (dpnet.decentralized._newton) against independent numbers:
its scalar losses against the numpy losses, its iterations against the vectorized numpy
implementation it replaced (devtools/newton_reference.py), its counts against their own
definitions, and its cache where a user puts it."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from devtools.flop_count import block_flops, machine_flops
from devtools.newton_reference import ReferenceNewtonStep
from dpnet.decentralized import LocalData, NewtonThetaStep, StackedShards
from dpnet.decentralized._newton import (
    COUNTS,
    _curvature,
    _exp_nonpositive,
    _loss_and_derivative,
)
from dpnet.decentralized.theta import NO_ANCHORS, loss_kernel
from dpnet.losses import HuberizedHinge, Logistic, MarginLoss, UnbiasedLogistic

ONE_SOLVE = (
    "import numpy as np\n"
    "from dpnet.decentralized import LocalData, NewtonThetaStep, StackedShards\n"
    "from dpnet.decentralized.theta import NO_ANCHORS\n"
    "rng = np.random.default_rng(0)\n"
    "X = np.hstack([rng.standard_normal((50, 4)), np.ones((50, 1))])\n"
    "data = StackedShards.one(LocalData(X, np.sign(rng.standard_normal(50)), 50))\n"
    "step = NewtonThetaStep(data, np.zeros((1, 5)), NO_ANCHORS, NO_ANCHORS)\n"
    "print(step(np.ones((1, 5)), np.array([0.1]), np.zeros((1, 5))).theta.tobytes().hex())\n"
)
"""A fresh process's Newton solve, its theta printed as hex (the compiled code's output)."""

LOSSES = [Logistic(), UnbiasedLogistic(0.75), UnbiasedLogistic(1.0), HuberizedHinge(0.5)]


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
def test_the_scalar_losses_are_the_numpy_ones(loss: MarginLoss) -> None:
    """Value, derivative and curvature at margins from -1e308 to 1e308, the hinge's knots and
    0, infinities and NaN: the numpy loss's to 2 ulp (of the corrected loss's terms), NaN where
    it is NaN."""
    code, param = loss_kernel(loss)
    grid = np.concatenate(
        [
            np.linspace(-40.0, 40.0, 2001),
            [0.0, -0.0, 0.5, 1.5, 1.0, 1e-300, -1e-300, 700.0, -700.0, 750.0, -750.0],
            [1e308, -1e308, np.inf, -np.inf, np.nan],
        ]
    )
    with np.errstate(all="ignore"):
        value, first = loss.value_and_derivative(grid)
        curvature = loss.curvature(grid)
    scalar = np.array([_loss_and_derivative(code, param, m) for m in grid])
    scalar_curvature = np.array([_curvature(code, param, m) for m in grid])
    # the corrected loss subtracts k m: its value is within 2 ulp of the terms' magnitudes
    # (near l(m) = k m the difference cancels what the exponential errs by)
    k = (1 - loss.keep_prob) / (2 * loss.keep_prob - 1) if isinstance(loss, UnbiasedLogistic) else 0
    with np.errstate(all="ignore"):
        terms = np.abs(value) + (np.abs(k * grid) if k else 0.0)
    for ours, theirs, magnitude in (
        (scalar[:, 0], value, terms),
        (scalar[:, 1], first, np.abs(first)),
        (scalar_curvature, curvature, np.abs(curvature)),
    ):
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
        finite = np.isfinite(theirs)
        np.testing.assert_array_equal(
            ours[~finite & ~np.isnan(theirs)], theirs[~finite & ~np.isnan(theirs)]
        )
        error = np.abs(ours[finite] - theirs[finite])
        assert (error <= 5e-16 * magnitude[finite] + 1e-300).all(), error.max()


def test_the_exponential_is_the_c_librarys_to_one_ulp() -> None:
    """The kernel's exp(x), x <= 0, against the C library's (math.exp) at random points over
    its whole range, near the reduction's switch points k ln 2 / 2, through the subnormals,
    and at 0, -0, -inf and NaN."""
    rng = np.random.default_rng(11)
    switches = (np.arange(-1076, 1) + 0.5) * math.log(2)
    x = np.concatenate(
        [
            -rng.uniform(0, 746, 40_000),
            -rng.uniform(0, 1, 20_000),
            np.nextafter(switches, 0),
            np.nextafter(switches, -np.inf),
            -rng.uniform(708, 746, 10_000),
            [-0.0, 0.0, -1e-300, -745.13, -745.14, -746.0, -1e300],
        ]
    )
    x = x[x <= 0]
    ours = np.array([_exp_nonpositive(v) for v in x.tolist()])
    theirs = np.array([math.exp(v) for v in x.tolist()])
    ulps = np.abs(ours - theirs) / np.spacing(theirs)
    assert ulps.max() <= 1.0
    assert _exp_nonpositive(0.0) == 1.0 and _exp_nonpositive(-np.inf) == 0.0
    assert math.isnan(_exp_nonpositive(math.nan))


def _mixed_block(loss: MarginLoss, seed: int = 3) -> StackedShards:
    """Tall shards of unequal sizes (padded), a wide one, and one without rows."""
    rng = np.random.default_rng(seed)
    shards = []
    for n in (300, 120, 7, 0):
        X = np.hstack([rng.standard_normal((n, 10)), np.ones((n, 1))])
        y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
        shards.append(LocalData(X, y, 500, loss))
    return StackedShards.stack(shards)


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
def test_the_kernel_takes_the_reference_iterations(loss: MarginLoss) -> None:
    """Twelve drifting rounds of a mixed block, rho changing (kept matrices shifted), the first
    round relative to its start and per-machine tolerances after: every machine's theta and
    f_j agree with the numpy reference to 1e-10, its gradient norm to 1e-8 relative, and it
    forms as many Newton matrices and takes as many Newton steps."""
    data = _mixed_block(loss)
    rng = np.random.default_rng(4)
    k, dim = data.X.shape[0], data.X.shape[2]
    drift = rng.standard_normal((k, dim))
    zeros = np.zeros((k, dim))
    ours = NewtonThetaStep(data, zeros, NO_ANCHORS, NO_ANCHORS)
    ref = ReferenceNewtonStep(data, zeros, NO_ANCHORS, NO_ANCHORS)
    theta = theta_ref = zeros
    for r in range(12):
        center = drift * (1.0 + 0.5**r)
        rho = np.array([0.2, 0.1, 0.3, 0.4]) * (1.0 if r < 6 else 2.0)
        how = {"relative": 0.1} if r == 0 else {"tol": np.array([1e-9, 1e-11, 1e-10, 1e-10])}
        solved, solved_ref = ours(center, rho, theta, **how), ref(center, rho, theta_ref, **how)
        theta, theta_ref = solved.theta, solved_ref.theta
        np.testing.assert_allclose(theta, theta_ref, rtol=0, atol=1e-10)
        np.testing.assert_allclose(solved.loss, solved_ref.loss, rtol=1e-12)
        np.testing.assert_allclose(solved.error, solved_ref.error, rtol=1e-6, atol=1e-13)
    assert ours.counts[:, COUNTS.index("matrices")].tolist() == ref.formed.tolist()
    assert ours.counts[:, COUNTS.index("steps")].tolist() == ref.steps.tolist()
    assert ours.counts[:, COUNTS.index("shifts")][:2].min() >= 1  # the tall ones, at r = 6
    assert ours.counts[:, COUNTS.index("woodbury")].tolist() == [0, 0, *ref.steps[2:].tolist()]


def test_the_counts_add_up() -> None:
    """Each step evaluates the loss once, each rejected trial once more, each point once;
    each Newton matrix and each fresh point computes margins; the flops follow the counts."""
    data = _mixed_block(Logistic())
    k, dim = data.X.shape[0], data.X.shape[2]
    step = NewtonThetaStep(data, np.zeros((k, dim)), NO_ANCHORS, NO_ANCHORS)
    step(np.ones((k, dim)), np.full(k, 0.01), np.zeros((k, dim)), tol=1e-12)
    c = {name: step.counts[:, i] for i, name in enumerate(COUNTS)}
    assert (c["steps"] > 0).all() and c["matrices"].tolist()[2:] == [0, 0]
    np.testing.assert_array_equal(c["evaluations"], 1 + c["steps"] + c["trials"])
    np.testing.assert_array_equal(c["margins"], 1 + c["matrices"])
    flops = block_flops(step)
    n, d = 300, dim
    assert flops[0]["products"] == 2 * n * d * (
        c["steps"][0] + c["evaluations"][0] + c["margins"][0]
    )
    assert flops[0]["matrices"] == c["matrices"][0] * n * d * (d + 1)
    assert flops[3] == machine_flops(step.counts[3], 0, d)


def _can_mount_read_only() -> str | None:
    """Why a read-only bind mount in a private mount namespace cannot be made here, or None."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return "needs root and unshare(1) for a private mount namespace"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "mount", "--bind", "-o", "ro", "/", "/mnt"],
        capture_output=True,
        check=False,
    )
    return None if probe.returncode == 0 else "read-only bind mounts are not allowed here"


@pytest.mark.slow
@pytest.mark.timeout(1900)  # above its three runs' 600 s each: two first compilations of about
# 15 s of CPU each took over 300 s under eight CPU hogs
def test_the_code_is_cached_where_told_or_compiled_in_memory(tmp_path: Path) -> None:
    """NUMBA_CACHE_DIR names the cache folder: a fresh process compiles into it (and
    compile_kernels says so), the next one loads from it (its files untouched; it says it
    compiled nothing) and solves bitwise alike. Where the package and the
    user's home are read-only mounts (numba's two default cache folders; root only), the step
    is compiled in memory, says so in one warning, and solves as the cached one does. Two
    first compilations (about 12 s of CPU each) in one test."""
    package, home, cache = tmp_path / "site", tmp_path / "home", tmp_path / "cache"
    shutil.copytree(
        Path(__file__).resolve().parents[1] / "dpnet",
        package / "dpnet",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    home.mkdir()
    cache.mkdir()
    script = (
        "import warnings; warnings.simplefilter('always')\n"
        "from dpnet.decentralized import compile_kernels\n"
        "print(compile_kernels())\n" + ONE_SOLVE  # True: compiled in this process
    )
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), PYTHONPATH=str(package), PYTHONDONTWRITEBYTECODE="1")
    read_only = _can_mount_read_only() is None
    mounts = f"mount --bind -o ro {package} {package} && mount --bind -o ro {home} {home} && "

    def run(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        command = f'{mounts if read_only else ""}exec "{sys.executable}" -c "$DPNET_SCRIPT"'
        namespace = ["unshare", "-m", "--propagation", "private"] if read_only else []
        return subprocess.run(
            [*namespace, "sh", "-c", command],
            env={**env, **extra, "DPNET_SCRIPT": script},
            cwd=tmp_path,  # not the checkout: its dpnet/ would come first on the path
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    told = run({"NUMBA_CACHE_DIR": str(cache)})
    assert told.returncode == 0 and "RuntimeWarning" not in told.stderr, told.stderr
    cached = sorted(p for p in cache.rglob("*") if p.is_file())
    assert any(p.suffix == ".nbi" for p in cached) and any(p.suffix == ".nbc" for p in cached)
    stamps = {p: p.stat().st_mtime_ns for p in cached}
    again = run({"NUMBA_CACHE_DIR": str(cache)})
    assert again.returncode == 0 and again.stderr == ""
    assert told.stdout.startswith("True\n") and again.stdout == "False" + told.stdout[4:]
    assert {p: p.stat().st_mtime_ns for p in cached} == stamps
    if not read_only:
        pytest.skip(f"cached where told; the read-only case: {_can_mount_read_only()}")
    in_memory = run({})
    assert in_memory.returncode == 0, in_memory.stderr
    warned = [line for line in in_memory.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warned) == 1 and "set NUMBA_CACHE_DIR" in warned[0], in_memory.stderr
    assert in_memory.stdout == told.stdout
    assert not any(package.rglob("*.nbi")) and not any(home.rglob("*"))
