"""Test hook: ``python -m dpnet.run`` with the randomized labels held fixed.

``[mpiexec -n J] python -m tests.fixed_labels ARGS`` runs the main job unchanged except that
:func:`dpnet.decentralized.boundary.randomize_labels` returns labels drawn from a stream
keyed by the part's name ("machine 3", "held-out rows") instead of the raw labels (the real
mechanism still runs, so the streams advance as in a real run), and every clock reads 0 (timings
are the only part of a release that is not reproducible). Two runs on data sets that differ
in raw labels then see identical randomized labels: if the release boundary holds, they print
and write identical bytes. Lives in tests/, never in the package: no backdoor in the product.
"""

from __future__ import annotations

import hashlib
import sys

from tests.stopped_clocks import stop_clocks

stop_clocks()  # before dpnet is imported (its start-up is timed from its import)

import numpy as np  # noqa: E402

import dpnet.decentralized.boundary as boundary  # noqa: E402
from dpnet import run  # noqa: E402

_real_randomize = boundary.randomize_labels


def fixed_randomized_labels(
    y_raw: np.ndarray, keep_prob: float, rng: np.random.Generator, part: str
):
    _real_randomize(y_raw, keep_prob, rng, part)  # the stream advances as in a real run
    key = int.from_bytes(hashlib.sha256(part.encode()).digest()[:8], "little")
    return np.where(np.random.default_rng(key).random(y_raw.shape[0]) < 0.5, 1.0, -1.0)


def main(argv: list[str] | None = None) -> int:
    boundary.randomize_labels = fixed_randomized_labels
    return run.main(argv)


if __name__ == "__main__":
    sys.exit(main())
