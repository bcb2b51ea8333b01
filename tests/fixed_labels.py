"""Test hook: ``python -m dpnet.run`` with the randomized labels held fixed.

``[mpiexec -n J] python -m tests.fixed_labels ARGS`` runs the main job unchanged except that
:func:`dpnet.decentralized.boundary.randomize_labels` returns labels drawn from a stream
keyed by the part's name ("machine 3", "held-out rows") instead of the raw labels (the real
mechanism still runs, so the ledger records the real event), and the clock reads 0 (timings
are the only part of a release that is not reproducible). Two runs on data sets that differ
in raw labels then see identical randomized labels: if the release boundary holds, they print
and write identical bytes. Lives in tests/, never in the package: no backdoor in the product.
"""

from __future__ import annotations

import hashlib
import sys
import time

import numpy as np

import dpnet.decentralized.boundary as boundary
from dpnet import run

_real_randomize = boundary.randomize_labels


def fixed_randomized_labels(
    y_raw: np.ndarray, keep_prob: float, rng: np.random.Generator, part: str
):
    _, event = _real_randomize(y_raw, keep_prob, rng, part)
    key = int.from_bytes(hashlib.sha256(part.encode()).digest()[:8], "little")
    noisy = np.where(np.random.default_rng(key).random(y_raw.shape[0]) < 0.5, 1.0, -1.0)
    return noisy, event


def main(argv: list[str] | None = None) -> int:
    boundary.randomize_labels = fixed_randomized_labels
    time.perf_counter = lambda: 0.0
    return run.main(argv)


if __name__ == "__main__":
    sys.exit(main())
