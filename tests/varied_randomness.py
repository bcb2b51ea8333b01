"""Test hook: ``python -m dpnet.run`` with the randomized-response uniforms chosen by the test.

``[mpiexec -n J] python -m tests.varied_randomness ARGS`` runs the main job unchanged (the real
mechanism, the real streams module, the real output code) except that

- every randomized-response stream (:func:`dpnet.streams.machine_flip_stream`,
  :func:`dpnet.streams.holdout_flip_stream`) is :func:`flip_stream` of the key in
  ``DPNET_TEST_FLIP_KEY``: the test knows every uniform the mechanism draws, so it can choose
  raw labels for which the real mechanism yields the randomized labels it wants
  (:func:`raw_labels_for`);
- with ``DPNET_TEST_FIXED_THETAS`` set (``--privacy record``), every released theta is
  :func:`fixed_theta` of its machine and round, and (with ``--standardize``) every released
  vector of column sums :func:`fixed_column_sums` of its machine, whatever the rows and the
  noise streams: the released values held fixed while the raw records change;
- every clock reads 0 (timings are the only part of a release that is not reproducible), and
  what each thread computes on the rows is recorded instead (:func:`_count_operations`):
  the sequence of its loss evaluations with their sizes and its Newton solves and
  factorizations, so the work of every round; at exit each process writes one
  ``process <rank> operations`` line (every thread's count and the digest of its sequence);
- every message a machine sends is hashed, by surface of :data:`devtools.surfaces.SURFACES`
  ("neighbour messages"; "final gather", without the oracle part, which is a surface of its
  own), and at exit each process writes ``machine <rank> <surface>: <digest>`` lines to the
  file ``DPNET_TEST_MESSAGES/<pid>.txt``.

Two runs whose (raw labels, uniforms) pairs give the same randomized labels must then print,
write and send the same bytes. Lives in tests/, never in the package: no backdoor in the product.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import scipy.linalg

from dpnet import run, streams
from dpnet.decentralized import boundary, theta
from dpnet.losses import margin
from dpnet.network import inprocess
from dpnet.privacy import flip_labels
from tests.stopped_clocks import stop_clocks

HOLDOUT = -1  # the part number of the held-out rows; machines are 0..J-1
KEY_VARIABLE = "DPNET_TEST_FLIP_KEY"
MESSAGES_VARIABLE = "DPNET_TEST_MESSAGES"
FIXED_THETAS_VARIABLE = "DPNET_TEST_FIXED_THETAS"


def fixed_theta(
    theta: np.ndarray, l2_sensitivity: float, noise_multiplier: float, rng, rank: int, round_: int
) -> np.ndarray:
    """A released theta that depends on (rank, round) alone: the stand-in of
    :func:`dpnet.decentralized.boundary.release_theta` with the releases held fixed."""
    return np.random.default_rng([rank, round_]).normal(0.0, 0.1, theta.shape)


def fixed_column_sums(
    sums: np.ndarray, l2_sensitivity: float, noise_multiplier: float, rng, rank: int, what: str
) -> np.ndarray:
    """Released column sums that depend on (rank, which vector) alone: the stand-in of
    :func:`dpnet.decentralized.boundary.release_column_sums` with the releases held fixed
    (sums near 0, sums of squares near 100 per column: a positive variance)."""
    noise = np.random.default_rng([rank, what == "squares"]).normal(0.0, 1.0, sums.shape)
    return noise + (100.0 if what == "squares" else 0.0)


def flip_stream(key: int, part: int) -> np.random.Generator:
    """The randomized-response stream of ``part`` (a machine's rank, or HOLDOUT) under ``key``."""
    return np.random.default_rng([key, part + 1])


def raw_labels_for(target: np.ndarray, key: int, part: int, keep_prob: float) -> np.ndarray:
    """Raw labels from which the real mechanism, drawing from ``flip_stream(key, part)``,
    returns ``target``: where it keeps a label the raw one is the target, else its negative.
    Which labels it keeps is read off the mechanism itself, run on all-(+1) labels."""
    kept = flip_labels(np.ones(target.shape[0]), keep_prob=keep_prob, rng=flip_stream(key, part))
    return np.where(kept > 0, target, -target)


_digests: dict[tuple[int, str], hashlib._Hash] = {}
_operations_lock = threading.Lock()
_this_thread = threading.local()


@dataclass
class _Work:
    """One thread's operations, in order: their number and the digest of their sequence."""

    count: int = 0
    sequence: hashlib._Hash = field(default_factory=hashlib.sha256)


_work_of_threads: list[_Work] = []  # kept after each thread ends


def _thread_work() -> _Work:
    work = getattr(_this_thread, "work", None)
    if work is None:
        work = _this_thread.work = _Work()
        with _operations_lock:
            _work_of_threads.append(work)
    return work


LOSS_METHODS = ("value", "derivative", "curvature", "derivatives", "value_and_derivative")
SOLVERS = {  # where they are looked up -> the functions through which the block solves or
    # factorizes (every backend's theta step is dpnet.decentralized.theta's): the majorized
    # step's factor (cho_factor, cho_solve, imported from scipy.linalg when it runs); the
    # Newton step's work is its kernel's counts (_counted_newton)
    scipy.linalg: ("cho_factor", "cho_solve"),
}


def _counted_newton(real):  # noqa: ANN001, ANN202
    """NewtonThetaStep.__call__, its kernel's counts of every machine's work digested after."""

    def call(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        result = real(self, *args, **kwargs)
        work = _thread_work()
        work.count += 1
        work.sequence.update(b"NewtonThetaStep " + self.counts.tobytes())
        return result

    return call


def _counted(name: str, real):  # noqa: ANN001, ANN202
    def call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        sizes = [a.size for a in args if isinstance(a, np.ndarray)]
        work = _thread_work()
        work.count += 1
        work.sequence.update(f"{name} {sizes[-1] if sizes else 0};".encode())
        return real(*args, **kwargs)

    return call


def _count_operations() -> None:
    """Count every loss evaluation (by method and array size) and every solve or
    factorization (by function): the work of a machine, which sets when its messages leave."""
    for cls in (margin.Logistic, margin.UnbiasedLogistic, margin.HuberizedHinge):
        for method in LOSS_METHODS:
            if method in vars(cls):
                setattr(cls, method, _counted(f"{cls.__name__}.{method}", vars(cls)[method]))
    theta.NewtonThetaStep.__call__ = _counted_newton(theta.NewtonThetaStep.__call__)
    for owner, names in SOLVERS.items():
        for name in names:
            label = f"{owner.__name__}.{name}" if isinstance(owner, type) else name
            setattr(owner, name, _counted(label, getattr(owner, name)))


def _rank() -> str:
    announced = [os.environ[v] for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK") if v in os.environ]
    return announced[0] if announced else "all"


def _record(rank: int, surface: str, payload: bytes) -> None:
    _digests.setdefault((rank, surface), hashlib.sha256()).update(payload)


def _record_gathered(rank: int, outcomes: object) -> None:
    """The final gather without its oracle part (a machine sends a list: its block's)."""

    def released(outcome: object) -> object:
        return replace(outcome, oracle=None) if hasattr(outcome, "oracle") else outcome

    if isinstance(outcomes, list):
        outcomes = [released(outcome) for outcome in outcomes]
    _record(rank, "final gather", pickle.dumps(released(outcomes), protocol=5))


def _hash_messages(cls: type) -> None:
    """Record what a communicator class sends: exchanges and the final gather."""
    real_exchange, real_gather = cls.neighbour_exchange, cls.gather_to_root

    def neighbour_exchange(self, send):
        payload = np.ascontiguousarray(send, dtype=np.float64).tobytes()
        _record(self.rank, "neighbour messages", payload)
        return real_exchange(self, send)

    def gather_to_root(self, obj):
        _record_gathered(self.rank, obj)
        return real_gather(self, obj)

    cls.neighbour_exchange, cls.gather_to_root = neighbour_exchange, gather_to_root


def _write_digests() -> None:
    where = os.environ.get(MESSAGES_VARIABLE)
    if where and (_digests or _work_of_threads):
        lines = [f"machine {r} {s}: {d.hexdigest()}" for (r, s), d in sorted(_digests.items())]
        work = sorted((w.count, w.sequence.hexdigest()) for w in _work_of_threads)
        lines.append(f"process {_rank()} operations: {work}")
        (Path(where) / f"{os.getpid()}.txt").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    """The job with the hooks above. Only here, not at import: tests import this module for
    :func:`raw_labels_for`, and their own process keeps its clocks and its streams."""
    # every clock reads 0 (run.main times the start-up from its call)
    stop_clocks()
    key = int(os.environ[KEY_VARIABLE])
    streams.machine_flip_stream = lambda seed, rank: flip_stream(key, rank)
    streams.holdout_flip_stream = lambda seed, n_machines: flip_stream(key, HOLDOUT)
    if os.environ.get(FIXED_THETAS_VARIABLE):
        boundary.release_theta = fixed_theta
        boundary.release_column_sums = fixed_column_sums
    _hash_messages(inprocess.InProcessCommunicator)
    _count_operations()
    if "OMPI_COMM_WORLD_RANK" in os.environ or "PMI_RANK" in os.environ:
        from dpnet.network import MPICommunicator

        _hash_messages(MPICommunicator)
    atexit.register(_write_digests)
    return run.main(argv)


if __name__ == "__main__":
    sys.exit(main())
