"""Row partitions: which rows each machine holds, and train/test index splits."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dpnet.errors import ConfigError


def split_rows(
    n_rows: int,
    n_parts: int,
    *,
    sizes: Sequence[int] | None = None,
    rng: np.random.Generator | None = None,
) -> list[np.ndarray]:
    """Split the row indices 0..n_rows-1 into ``n_parts`` disjoint index arrays (int64).

    Default sizes are as even as possible (``np.array_split``: the first n_rows mod n_parts
    parts get one extra row); ``sizes`` sets them explicitly (each >= 1, summing to n_rows).
    With ``rng`` the indices are shuffled first, otherwise each part is a contiguous block.
    """
    if n_parts < 1:
        raise ConfigError(f"n_parts must be >= 1, got {n_parts}")
    if sizes is None:
        if n_rows < n_parts:
            raise ConfigError(f"cannot split {n_rows} rows into {n_parts} non-empty parts")
        counts = np.array([len(a) for a in np.array_split(np.empty(n_rows), n_parts)])
    else:
        counts = np.asarray(sizes)
        if counts.shape != (n_parts,) or counts.dtype.kind not in "iu":
            raise ConfigError(f"sizes must be {n_parts} integers, got {list(sizes)}")
        if (counts < 1).any():
            raise ConfigError(f"every part needs at least one row, got sizes {counts.tolist()}")
        if int(counts.sum()) != n_rows:
            raise ConfigError(f"sizes sum to {int(counts.sum())}, not to n_rows = {n_rows}")
    order = rng.permutation(n_rows) if rng is not None else np.arange(n_rows)
    return np.split(order.astype(np.int64), np.cumsum(counts)[:-1])


def train_test_split_indices(
    n: int, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random (train, test) index arrays, each sorted; the test part has round(n * fraction) rows.

    Both parts must be non-empty.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(f"test_fraction must be in (0, 1), got {test_fraction}")
    n_test = round(n * test_fraction)
    if n_test < 1 or n_test > n - 1:
        raise ConfigError(f"test_fraction {test_fraction} of {n} rows leaves an empty part")
    perm = rng.permutation(n)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])
