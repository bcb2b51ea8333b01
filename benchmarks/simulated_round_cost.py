"""The simulator's CPU time per round against the flops the round needs (issue 23's goal: a
round of all J machines within 3x of its flop count at the machine's measured GFLOP/s).

    python -m benchmarks.simulated_round_cost                  # J = 1,000 x 100 rows, 40 rounds
    python -m benchmarks.simulated_round_cost --machines 1000 --rounds 40 --repeats 5

The data and graph are those of ``python -m dpnet.run --backend simulated --machines J
--topology random-regular --n-samples 100J --seed 1`` (benchmarks/simulated_scale.py: p = 48
in 16 groups, dim = 49 with the intercept); the rounds are :func:`run_batched`'s, in this
process with one BLAS thread, CPU time (median of --repeats runs of --rounds rounds each).

Flops of the run, from the compiled Newton theta step's own counts (``NewtonThetaStep.counts``,
named by :data:`dpnet.decentralized._newton.COUNTS`; every step the run made is collected by
:func:`devtools.flop_count.newton_steps`), priced per machine of n = rows and d = dim by
:func:`devtools.flop_count.machine_flops` (its docstring has the formulas):

- products with X~ (2 n d each): a Newton step's margins, a loss evaluation's gradient (the
  start points, every Armijo trial and every accepted step), margins computed afresh;
- Newton matrices: X~^T D X~ (2 n d^2) and its Cholesky factor per matrix formed, the factor
  again per kept matrix shifted to a new rho (residual balancing changed c);
- solves: two triangular solves on a kept factor (2 d^2) per step on it (Woodbury solves, on wide
  shards, none here: n = 100 >= d, are priced with the factors);
- the rest of a round (Z step, centres, duals, residuals: O(E d)) and the loss's elementwise
  exp/log are not counted as flops (listed as ``loss_elements``: the evaluations' elements,
  machines x rows).

GFLOP/s: one dgemm of the same size as a round's Hessians, X^T X with X the (J n, d) stack of
all shards, median CPU time, in the same process.

Memory floor (the second yardstick): a product with the whole (J, n, d) stack reads J n d
floats (39 MB at J = 1,000) for 2 J n d flops and is bandwidth-bound, so the flop yardstick
understates what stacked numpy products can reach. Timed in the same process, one pass over the
whole stack each (CPU time), by numpy's stacked products (:func:`stacked.matvecs`,
:func:`stacked.vecmats`, one einsum over the stack; the compiled theta step runs the same
products machine by machine): the step solve K_j g_j priced as a product with a (J, d, d) stack
of d x d matrices (as many flops as the two triangular solves), X~_j s_j on the (J, n, d) stack
and the left product X~_j^T w_j; each alone, again and again (the fastest pass, as warm as the
caches keep the stack: the floor), and the three in turn as an iteration runs them
(interleaved, median). The floor is the round's counted work at these times, a machine's share
of a pass per product: ((steps - woodbury) x solve + (steps + margins + woodbury) x X~ s +
(evaluations + woodbury) x left) / J. Writes benchmarks/out/simulated_round_cost.csv.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks.common import OUT_DIR, dgemm_gflops, stacked_job, write_csv
from devtools.flop_count import block_flops, newton_steps
from dpnet.decentralized import NewtonThetaStep, StackedShards, admm, stacked
from dpnet.decentralized._newton import COUNTS
from dpnet.decentralized.batched import run_batched

ROWS_PER_MACHINE = 100
SEED = 1


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
    calls them: ``admm.z_update``, ``NewtonThetaStep.__call__``), the kernel's counts summed
    over the run's machines (by :data:`COUNTS`) and its flops by kind
    (:func:`devtools.flop_count.block_flops`)."""
    clock = {"z_step": 0.0, "theta_step": 0.0}
    saved = admm.z_update, NewtonThetaStep.__call__
    admm.z_update = timed(clock, "z_step", saved[0])
    NewtonThetaStep.__call__ = timed(clock, "theta_step", saved[1])  # type: ignore[method-assign]
    try:
        with newton_steps() as made:
            start = time.process_time()
            result = run_batched(data, groups, config, graph)
            total = time.process_time() - start
    finally:
        admm.z_update = saved[0]
        NewtonThetaStep.__call__ = saved[1]  # type: ignore[method-assign]
    assert result.rounds == config.max_rounds, result.stop_reason
    assert made, "the run made no Newton theta step"
    summed = np.sum([step.counts.sum(axis=0) for step in made], axis=0)
    counts = dict(zip(COUNTS, summed.tolist(), strict=True))
    flops: dict[str, float] = {}
    for step in made:
        for machine in block_flops(step):
            for kind, value in machine.items():
                flops[kind] = flops.get(kind, 0.0) + value
    elements = sum(
        int((s.counts[:, COUNTS.index("evaluations")] * s.data.rows).sum()) for s in made
    )
    return {
        "cpu": total,
        **clock,
        "counts": counts,
        "flops": flops,
        "loss_elements": elements,
        "theta": result.theta,
    }


def pass_times(data: StackedShards, repeats: int) -> dict[str, float]:
    """CPU seconds of one pass over the whole stack for each product of a Newton iteration
    (module docstring): ``<name>_alone``, the fastest of the same product again and again
    (the stack as warm in the caches as it gets: the floor), and ``<name>_interleaved``, the
    median of the three in turn as an iteration runs them."""
    n_mach, n_rows, dim = data.X.shape
    rng = np.random.default_rng(0)
    factors = rng.standard_normal((n_mach, dim, dim))
    step, weights = rng.standard_normal((n_mach, dim)), rng.standard_normal((n_mach, n_rows))
    products = {  # the simulator's own stacked products
        "solve": lambda: stacked.matvecs(factors, step),
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


def measure(n_machines: int, rounds: int, repeats: int) -> dict[str, Any]:
    data, groups, config, graph = problem(n_machines)
    config = replace(config, max_rounds=rounds, tol=0.0)
    n_rows, dim = data.X.shape[1], data.X.shape[2]
    run_once(data, groups, config, graph)  # warm caches and imports
    runs, rates, passes = [], [], []
    for _ in range(repeats):
        runs.append(run_once(data, groups, config, graph))
        rates.append(dgemm_gflops(data.X.reshape(-1, data.X.shape[2]), 5))
        passes.append(pass_times(data, 5))
    assert all(np.array_equal(r["theta"], runs[0]["theta"]) for r in runs)  # deterministic
    assert all(r["counts"] == runs[0]["counts"] for r in runs)
    counts, flops = runs[0]["counts"], runs[0]["flops"]
    total = sum(flops.values())
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
    row |= {k: v / rounds for k, v in counts.items()}  # per round
    row |= {f"flops_{k}": v / rounds for k, v in flops.items()}
    row["loss_elements"] = runs[0]["loss_elements"] / rounds
    row["mflop_per_round"] = total / rounds / 1e6
    row["gflops"] = rate
    row["flop_ms_per_round"] = total / rounds / rate / 1e6
    row["ratio"] = row["cpu_ms_per_round"] / row["flop_ms_per_round"]
    row["stack_mb"] = data.X.nbytes / 1e6
    row["factors_mb"] = n_machines * dim * dim * data.X.itemsize / 1e6
    for key in passes[0]:
        pick = min if key.endswith("_alone") else np.median
        row[f"pass_{key}_ms"] = float(pick([p[key] for p in passes])) * 1e3
    for kind in ("alone", "interleaved"):
        row[f"floor_{kind}_ms_per_round"] = (
            (row["steps"] - row["woodbury"]) * row[f"pass_solve_{kind}_ms"]
            + (row["steps"] + row["margins"] + row["woodbury"]) * row[f"pass_right_{kind}_ms"]
            + (row["evaluations"] + row["woodbury"]) * row[f"pass_left_{kind}_ms"]
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
                f"(per round: {row['evaluations']:.0f} loss evaluations, {row['steps']:.0f} "
                f"steps, {row['trials']:.0f} Armijo trials, {row['matrices']:.0f} matrices "
                f"formed, {row['shifts']:.0f} shifted to a new rho, {row['margins']:.0f} fresh "
                f"margins; {row['loss_elements']:.3g} loss elements) at "
                f"{row['gflops']:.1f} GFLOP/s = {row['flop_ms_per_round']:.2f} ms; "
                f"ratio {row['ratio']:.2f}",
                flush=True,
            )
            print(
                f"  memory floor: one pass over the stack ({row['stack_mb']:.0f} MB X~, "
                f"{row['factors_mb']:.0f} MB factors) "
                f"{row['pass_right_alone_ms']:.2f} ms X~ s, {row['pass_left_alone_ms']:.2f} ms "
                f"left, {row['pass_solve_alone_ms']:.2f} ms solve: the round's counted products "
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
