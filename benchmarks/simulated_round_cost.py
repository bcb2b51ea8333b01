"""The simulator's CPU time per round against the flops the round needs (issue 23's goal: a
round of all J machines within 3x of its flop count at the machine's measured GFLOP/s).

    python -m benchmarks.simulated_round_cost                  # J = 1,000 x 100 rows, 40 rounds
    python -m benchmarks.simulated_round_cost --machines 1000 --rounds 40 --repeats 5

The data and graph are those of ``python -m dpnet.run --backend simulated --machines J
--topology random-regular --n-samples 100J --seed 1`` (benchmarks/simulated_scale.py: p = 48
in 16 groups, dim = 49 with the intercept); the rounds are :func:`run_batched`'s, in this
process with one BLAS thread, CPU time (median of --repeats runs of --rounds rounds each).

Flops of the run, counted from the iterations it took (the machines whose gradient
:meth:`StackedShards.loss_gradient` forms; one curvature evaluation of the loss per matrix
formed), n = rows, d = dim:

- gradient X~^T (y l'/n): 2 n d per evaluation; step product X~ s: 2 n d per step. Every
  step leads to a point whose gradient is evaluated once; it is carried to the next round
  (:class:`~dpnet.decentralized.theta.StackedPoints`), so a run evaluates J gradients more
  than it takes steps;
- Newton matrix X~^T D X~ (symmetric: n d (d + 1)) and its Cholesky factor (d^3 / 3) per
  matrix formed; the factor again (d^3 / 3) per kept matrix shifted to a new rho (residual
  balancing changed c: :meth:`~dpnet.decentralized.theta.KeptMatrices.shift`); a solve on
  it (2 d^2: a product with its kept inverse) per step;
- the rest of a round (Z step, centres, duals, residuals: O(E d)) and the loss's elementwise
  exp/log are not counted as flops (listed as ``loss evaluations``, elements).

GFLOP/s: one dgemm of the same size as a round's Hessians, X^T X with X the (J n, d) stack of
all shards, median CPU time, in the same process.

Memory floor (the second yardstick): a product with the whole (J, n, d) stack reads J n d
floats (39 MB at J = 1,000) for 2 J n d flops and is bandwidth-bound, so the flop yardstick
understates what stacked numpy products can reach. Timed in the same process, one pass over
the whole stack each (CPU time), by the simulator's own stacked products
(:func:`stacked.matvecs`, :func:`stacked.vecmats`): the step solve K_j g_j on a (J, d, d)
stack of inverse Newton matrices, X~_j s_j on the (J, n, d) stack and the left product
X~_j^T w_j; each alone, again and again (the fastest pass, as warm as the caches keep the stack: the
floor), and the three in turn as an iteration runs them (interleaved, median). The floor is
the round's counted work at these times, a machine's share of a pass per product:
(steps x (solve + X~ s) + gradients x left) / J. Writes benchmarks/out/simulated_round_cost.csv.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks.common import OUT_DIR, stacked_job, write_csv
from devtools.flop_count import factor_flops, matrix_flops, product_flops, solve_flops
from dpnet.decentralized import NewtonThetaStep, StackedShards, admm, stacked
from dpnet.decentralized.batched import run_batched
from dpnet.decentralized.theta import KeptMatrices
from dpnet.losses import MarginLoss

ROWS_PER_MACHINE = 100
SEED = 1


@dataclass(frozen=True, eq=False)
class CountingLoss(MarginLoss):
    """``loss``, counting the margins (machines x rows) each of its methods is asked for."""

    loss: MarginLoss
    counts: dict[str, int]

    def _count(self, name: str, m: np.ndarray) -> None:
        self.counts[name] = self.counts.get(name, 0) + m.size

    def value(self, m: np.ndarray) -> np.ndarray:
        self._count("value", m)
        return self.loss.value(m)

    def derivative(self, m: np.ndarray) -> np.ndarray:
        self._count("derivative", m)
        return self.loss.derivative(m)

    def curvature(self, m: np.ndarray) -> np.ndarray:
        self._count("curvature", m)
        return self.loss.curvature(m)

    def value_and_derivative(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self._count("value", m)
        self._count("derivative", m)
        return self.loss.value_and_derivative(m)

    @property
    def curvature_bound(self) -> float:
        return self.loss.curvature_bound

    @property
    def lipschitz_bound(self) -> float:
        return self.loss.lipschitz_bound


def problem(n_machines: int) -> tuple[StackedShards, Any, Any, Any]:
    """(stacked shards, groups, ADMM config, graph) of the simulated job with J machines."""
    argv = ["--backend", "simulated", "--machines", str(n_machines), "--epsilon", "inf"]
    argv += ["--topology", "random-regular", "--n-samples", str(ROWS_PER_MACHINE * n_machines)]
    return stacked_job(argv + ["--seed", str(SEED)], n_machines)


def timed(clock: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            clock[name] += time.process_time() - start

    return wrapper


def run_once(data: StackedShards, groups: Any, config: Any, graph: Any) -> dict[str, Any]:
    """One run: CPU seconds (total and in the Z and Newton theta steps, as the round loop
    calls them: ``admm.z_update``, ``NewtonThetaStep.__call__``) and the loss's counts."""
    counts: dict[str, int] = {}
    counting = replace(data, loss=CountingLoss(data.loss, counts))
    clock = {"z_step": 0.0, "theta_step": 0.0}
    saved = admm.z_update, NewtonThetaStep.__call__
    admm.z_update = timed(clock, "z_step", saved[0])
    NewtonThetaStep.__call__ = timed(clock, "theta_step", saved[1])  # type: ignore[method-assign]
    gradient = StackedShards.loss_gradient

    def counted_gradient(
        self: StackedShards, idx: np.ndarray, margins: np.ndarray, first: Any = None
    ) -> np.ndarray:
        counts["gradients"] = counts.get("gradients", 0) + len(idx)
        return gradient(self, idx, margins, first)

    shift = KeptMatrices.shift

    def counted_shift(self: KeptMatrices, idx: np.ndarray, rho: np.ndarray) -> None:
        counts["shifted"] = counts.get("shifted", 0) + len(idx)
        shift(self, idx, rho)

    StackedShards.loss_gradient = counted_gradient  # type: ignore[method-assign]
    KeptMatrices.shift = counted_shift  # type: ignore[method-assign]
    try:
        start = time.process_time()
        result = run_batched(counting, groups, config, graph)
        total = time.process_time() - start
    finally:
        admm.z_update = saved[0]
        NewtonThetaStep.__call__ = saved[1]  # type: ignore[method-assign]
        KeptMatrices.shift = shift  # type: ignore[method-assign]
        StackedShards.loss_gradient = gradient  # type: ignore[method-assign]
    assert result.rounds == config.max_rounds, result.stop_reason
    return {"cpu": total, **clock, "counts": counts, "theta": result.theta}


def gflops(data: StackedShards, repeats: int) -> float:
    """GFLOP/s of one dgemm X^T X over all shards' rows (2 J n d^2 flops)."""
    flat = data.X.reshape(-1, data.X.shape[2])
    flat_t = np.ascontiguousarray(flat.T)
    times = []
    for _ in range(repeats):
        start = time.process_time()
        flat_t @ flat
        times.append(time.process_time() - start)
    return 2.0 * flat.shape[0] * flat.shape[1] ** 2 / float(np.median(times)) / 1e9


def pass_times(data: StackedShards, repeats: int) -> dict[str, float]:
    """CPU seconds of one pass over the whole stack for each product of a Newton iteration
    (module docstring): ``<name>_alone``, the fastest of the same product again and again
    (the stack as warm in the caches as it gets: the floor), and ``<name>_interleaved``, the
    median of the three in turn as an iteration runs them."""
    n_mach, n_rows, dim = data.X.shape
    rng = np.random.default_rng(0)
    inverses = rng.standard_normal((n_mach, dim, dim))
    step, weights = rng.standard_normal((n_mach, dim)), rng.standard_normal((n_mach, n_rows))
    products = {  # the simulator's own stacked products
        "solve": lambda: stacked.matvecs(inverses, step),
        "right": lambda: stacked.matvecs(data.X, step),
        "left": lambda: stacked.vecmats(weights, data.X),
    }

    def seconds(product: Callable[[], Any]) -> float:
        start = time.process_time()
        product()
        return time.process_time() - start

    alone = {name: [seconds(product) for _ in range(repeats)] for name, product in products.items()}
    interleaved: dict[str, list[float]] = {name: [] for name in products}
    for _ in range(repeats):
        for name, product in products.items():
            interleaved[name].append(seconds(product))
    return {f"{name}_alone": min(t) for name, t in alone.items()} | {
        f"{name}_interleaved": float(np.median(t)) for name, t in interleaved.items()
    }


def flop_count(counts: dict[str, int], n_rows: int, n_machines: int, dim: int) -> dict[str, float]:
    """The run's flops by kind (module docstring), from the loss's counts."""
    gradients = counts.get("gradients", 0)  # machine evaluations
    matrices = counts.get("curvature", 0) // n_rows
    shifted = counts.get("shifted", 0)  # kept matrices factorized again for a new rho
    steps = gradients - n_machines  # the start points of round 1
    return {
        "gradients": gradients,
        "steps": steps,
        "matrices": matrices,
        "shifted": shifted,
        "flops_products": product_flops(n_rows, dim) * (gradients + steps),
        "flops_matrices": matrices * (matrix_flops(n_rows, dim) + factor_flops(dim))
        + shifted * factor_flops(dim),
        "flops_solves": steps * solve_flops(dim),
    }


def measure(n_machines: int, rounds: int, repeats: int) -> dict[str, Any]:
    data, groups, config, graph = problem(n_machines)
    config = replace(config, max_rounds=rounds, tol=0.0)
    n_rows, dim = data.X.shape[1], data.X.shape[2]
    run_once(data, groups, config, graph)  # warm caches and imports
    runs, rates, passes = [], [], []
    for _ in range(repeats):
        runs.append(run_once(data, groups, config, graph))
        rates.append(gflops(data, 5))
        passes.append(pass_times(data, 5))
    assert all(np.array_equal(r["theta"], runs[0]["theta"]) for r in runs)  # deterministic
    counts = runs[0]["counts"]
    flops = flop_count(counts, n_rows, n_machines, dim)
    total = flops["flops_products"] + flops["flops_matrices"] + flops["flops_solves"]
    rate = float(np.median(rates))
    row: dict[str, Any] = {
        "machines": n_machines,
        "rows_per_machine": n_rows,
        "dim": dim,
        "rounds": rounds,
        "cpu_ms_per_round": float(np.median([r["cpu"] for r in runs])) / rounds * 1e3,
    }
    for step in ("z_step", "theta_step"):
        row[f"{step}_ms"] = float(np.median([r[step] for r in runs])) / rounds * 1e3
    row["rest_ms"] = row["cpu_ms_per_round"] - row["z_step_ms"] - row["theta_step_ms"]
    row |= {k: v / rounds for k, v in flops.items()}  # per round
    row["loss_evaluations"] = counts.get("value", 0) / rounds
    row["mflop_per_round"] = total / rounds / 1e6
    row["gflops"] = rate
    row["flop_ms_per_round"] = total / rounds / rate / 1e6
    row["ratio"] = row["cpu_ms_per_round"] / row["flop_ms_per_round"]
    row["stack_mb"] = data.X.nbytes / 1e6
    row["inverses_mb"] = n_machines * dim * dim * data.X.itemsize / 1e6
    for key in passes[0]:
        pick = min if key.endswith("_alone") else np.median
        row[f"pass_{key}_ms"] = float(pick([p[key] for p in passes])) * 1e3
    for kind in ("alone", "interleaved"):
        row[f"floor_{kind}_ms_per_round"] = (
            row["steps"] * (row[f"pass_solve_{kind}_ms"] + row[f"pass_right_{kind}_ms"])
            + row["gradients"] * row[f"pass_left_{kind}_ms"]
        ) / n_machines
    row["floor_ratio"] = row["cpu_ms_per_round"] / row["floor_alone_ms_per_round"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, nargs="+", default=[1000])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = []
    with threadpool_limits(limits=1):
        for n_machines in args.machines:
            row = measure(n_machines, args.rounds, args.repeats)
            rows.append(row)
            print(
                f"J = {n_machines} x {row['rows_per_machine']} rows, dim {row['dim']}, "
                f"{args.rounds} rounds: {row['cpu_ms_per_round']:.1f} ms CPU per round "
                f"(Z step {row['z_step_ms']:.1f}, theta step {row['theta_step_ms']:.1f}, rest "
                f"{row['rest_ms']:.1f}); {row['mflop_per_round']:.1f} MFLOP per round "
                f"(per round: {row['gradients']:.0f} gradients, {row['steps']:.0f} steps, "
                f"{row['matrices']:.0f} matrices formed, {row['shifted']:.0f} shifted to a new "
                f"rho; {row['loss_evaluations']:.3g} loss "
                f"elements) at {row['gflops']:.1f} GFLOP/s = {row['flop_ms_per_round']:.2f} ms; "
                f"ratio {row['ratio']:.2f}",
                flush=True,
            )
            print(
                f"  memory floor: one pass over the stack ({row['stack_mb']:.0f} MB X~, "
                f"{row['inverses_mb']:.0f} MB inverses) "
                f"{row['pass_right_alone_ms']:.2f} ms X~ s, {row['pass_left_alone_ms']:.2f} ms "
                f"left, {row['pass_solve_alone_ms']:.2f} ms solve: the round's steps and gradients "
                f"at these = {row['floor_alone_ms_per_round']:.2f} ms; ratio "
                f"{row['floor_ratio']:.2f} (interleaved as an iteration runs them: "
                f"{row['pass_right_interleaved_ms']:.2f}, {row['pass_left_interleaved_ms']:.2f}, "
                f"{row['pass_solve_interleaved_ms']:.2f} ms = "
                f"{row['floor_interleaved_ms_per_round']:.2f} ms)",
                flush=True,
            )
    write_csv(rows, OUT_DIR / "simulated_round_cost.csv")


if __name__ == "__main__":
    main()
