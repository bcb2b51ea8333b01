"""The simulated backend's memory check, before its arrays are allocated.

The simulator runs the main job's pipeline once for every machine
(:class:`~dpnet.network.inprocess.SimulatedWorld`): :func:`dpnet.cli.job.block_main` on an
:class:`~dpnet.decentralized.block.ArrayBlock` (all J machines' iterates as arrays in one
process), the same randomized response, folds, round loop and stop rule as a machine's,
iterates equal to rounding (tests/test_backends_agree.py). Traffic is counted, not measured;
times are the process's divided by J (``timing.per_machine`` says so).
"""

from __future__ import annotations

from collections.abc import Sequence

from dpnet.cli.config import RunConfig
from dpnet.data.memory import check_bytes

ROW_VECTORS = 12
"""Float vectors per stacked row alive at once in the simulator's rounds (margins, weights,
labels, mask, loss values, ...): measured 10 to 10.5 at J = 5 and 20."""


def simulator_bytes(
    rows: Sequence[int], n_features: int, *, record: bool, cv: bool, shards_held: bool
) -> int:
    """Bytes the simulator allocates for machines of ``rows`` rows of ``n_features``: their raw
    shards (unless ``shards_held``: already allocated), their rows with the intercept column X~
    written into one stack (J, n_max, p+1) padded to the largest shard, the Newton step's
    scaled copy of one machine's rows, and :data:`ROW_VECTORS` vectors per stacked row; under
    record privacy the rows clipped to --row-bound beside the raw ones; with --cv every
    machine's X~ for its folds, the folds' stacks and their vectors. Measured peaks of the
    whole synthetic job (p = 48, J = 5, tracemalloc): 2.77, 3.63 (record) and 5.31 (--cv 3)
    times n p 8 bytes, estimated 2.48, 3.48 and 5.02; the first two are the set-up's
    generation of the rows (2.53 alone; :func:`~dpnet.data.synthetic.make_group_logistic`
    checks its own), before these arrays exist."""
    dim = n_features + 1
    n, n_max = sum(rows), max(rows)
    stacked = len(rows) * n_max
    values = stacked * dim + n_max * dim + ROW_VECTORS * stacked
    if not shards_held:
        values += n * n_features
    if record:
        values += n * n_features
    if cv:
        values += n * dim + stacked * dim + 2 * ROW_VECTORS * stacked
    return 8 * values


def check_simulator_fits(
    config: RunConfig, rows: Sequence[int], n_features: int, *, shards_held: bool
) -> None:
    """DataError (exit 2) if the simulator's arrays (:func:`simulator_bytes`) exceed the
    available memory: one line with the size, before they are allocated."""
    size = simulator_bytes(
        rows,
        n_features,
        record=config.privacy_mode.noisy_thetas,
        cv=bool(config.cv),
        shards_held=shards_held,
    )
    what = f"--backend simulated: {len(rows)} machines' {sum(rows):,} rows x {n_features:,} columns"
    check_bytes(size, what + (" (beside the shards already loaded)" if shards_held else ""))
