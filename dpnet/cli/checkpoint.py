"""Checkpoints of one machine's state, and resuming from them (``--checkpoint``, ``--resume``).

Every ``every`` rounds each machine writes ``DIR/machine-<rank>/round-<t>.npz`` atomically
(a temporary file, then a rename; mode 0600) holding what it needs to continue bitwise: the
round loop's :class:`~dpnet.decentralized.admm.LoopState` (iterates, both dual copies, c and
its changes, the termination waves, the history, and where the theta step last formed its
Newton matrix: an earlier theta iterate and its rho), its randomized labels and its traffic
counters. Each is a function of public inputs and the randomized labels. The file also holds
SHA-256 fingerprints of the machine's graph, settings and data (its features and row layout:
the inputs label-DP treats as public, never the raw labels), to refuse a checkpoint of another
run. A checkpoint is thus inside the release boundary, like the results file; it holds the
machine's features, so it stays with the machine.

What it does not hold: the raw labels, anything computed from them, and anything of the
randomized-response stream (state, seed, uniforms, counters). That stream is created for the
draw and dropped after it (:mod:`dpnet.streams`); a resumed machine needs none of it, because
it reuses the labels it randomized before (resuming is not a second release). Format 2
checkpoints stored that stream's PCG64 state, which rewinds to every flip and so gives every
raw label: they are refused by name, never resumed.

The zip archive is written with fixed timestamps, so two runs with the same release write the
same bytes (the release-boundary tests compare checkpoints byte by byte).

Each machine keeps its latest :func:`keep_count` checkpoints, enough that every machine shares
one whenever a run ends: a resumed run starts from the latest round every machine has.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from dpnet.decentralized.admm import LoopState, ProgressRecord
from dpnet.decentralized.boundary import RawShard
from dpnet.errors import DpnetError

# 4: the theta step's Newton anchor, tolerance and margins; 5: the rule of each change of c;
# 6: the loop state of a block of machines (one row per machine, one per edge)
FORMAT_VERSION = 6
LEAKY_FORMATS = {2: "it holds the randomized-response stream's state, which gives every raw label"}
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
TEMP_PREFIX, TEMP_SUFFIX = ".round-", ".tmp"  # a checkpoint being written
_ARRAYS = (
    "theta",
    "z",
    "theta_nbhd",
    "v_out",
    "v_in",
    "penalty_changes",
    "newton_anchor",
    "theta_margins",
)


class CheckpointError(DpnetError):
    """A checkpoint is missing, corrupt, or from another graph, data set or settings."""


@dataclass(frozen=True)
class Resumed:
    """What a machine continues from: its loop state, randomized labels and counters."""

    state: LoopState
    y_randomized: np.ndarray
    traffic: dict[str, float | int]


def _sha256(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def fingerprints(
    rank: int, graph: nx.Graph, settings: dict[str, Any], raw: RawShard
) -> dict[str, str]:
    """What a checkpoint must match to be resumed: the graph, the settings, the machine's
    features and row layout. Not the raw labels (the release boundary): a resumed machine
    continues with the labels it randomized, whatever its raw labels are now."""
    edges = sorted(tuple(sorted((int(u), int(v)))) for u, v in graph.edges)
    arrays = (raw.X, raw.group_labels, raw.group_weights)
    return {
        "machine": str(rank),
        "graph": _sha256(json.dumps([graph.number_of_nodes(), edges]).encode()),
        "settings": _sha256(json.dumps(settings, sort_keys=True).encode()),
        "data": _sha256(
            str(raw.n_total).encode(),
            *(np.ascontiguousarray(a, dtype=np.float64).tobytes() for a in arrays),
        ),
    }


def keep_count(drift: int, every: int) -> int:
    """Checkpoints each machine keeps so that, whenever the run ends, some round is kept by all.

    A machine finishes round t only after its neighbours sent their round-t messages, so two
    machines' rounds differ by at most their distance: with ``drift`` >= that bound over all
    pairs (:func:`dpnet.decentralized.termination.TreePlan.drift`), every machine is in
    [t_min, t_min + drift]. The slowest keeps an intact checkpoint of the multiple of
    ``every`` below t_min or at it (one killed while writing round t_min still has the one
    before, >= t_min - every); the fastest keeps the multiples of ``every`` in
    (t_max - K every, t_max]. Both hold that round when (K - 1) every >= drift + every, i.e.
    K = ceil(drift / every) + 2, and so does every machine in between. (K = 2 lost 2 of 3
    kill/resume runs on an 8-ring with --checkpoint-every 1.)
    """
    return -(-drift // every) + 2


def machine_dir(directory: str | Path, rank: int) -> Path:
    return Path(directory) / f"machine-{rank}"


def available_rounds(directory: str | Path, rank: int) -> list[int]:
    """Rounds machine ``rank`` has a checkpoint of in ``directory`` (ascending)."""
    found = []
    for path in machine_dir(directory, rank).glob("round-*.npz"):
        try:
            found.append(int(path.stem.removeprefix("round-")))
        except ValueError:
            continue
    return sorted(found)


def common_round(rounds_per_machine: list[list[int]], directory: str | Path) -> int:
    """The latest round every machine has a checkpoint of (CheckpointError if there is none)."""
    for rank, rounds in enumerate(rounds_per_machine):
        if not rounds:
            raise CheckpointError(f"--resume {directory}: machine {rank} has no checkpoint there")
    common = set.intersection(*(set(r) for r in rounds_per_machine))
    if not common:
        raise CheckpointError(
            f"--resume {directory}: no round that every machine has a checkpoint of"
        )
    return max(common)


class Checkpointer:
    """``on_round`` hook of the round loop: writes the state every ``every`` rounds."""

    def __init__(
        self,
        directory: str | Path,
        rank: int,
        every: int,
        keep: int,
        prints: dict[str, str],
        y_randomized: np.ndarray,
        traffic: Callable[[], dict[str, float | int]],
    ) -> None:
        self.dir = machine_dir(directory, rank)
        self.every = every
        self.keep = keep
        self.prints = prints
        self.y_randomized = y_randomized
        self.traffic = traffic
        # a machine killed while writing (kill -9) left its temporary file: swept at the start,
        # also for a resumed run that ends before its first checkpoint
        for stale in self.dir.glob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"):
            stale.unlink(missing_ok=True)

    def __call__(self, state: LoopState) -> None:
        if state.round % self.every == 0:
            self.write(state)

    def write(self, state: LoopState) -> Path:
        meta = {
            "format": FORMAT_VERSION,
            "fingerprints": self.prints,
            "round": state.round,
            "c": state.c,
            # floats (JSON keeps them exactly) or None
            "theta_tol": None if state.theta_tol is None else state.theta_tol.tolist(),
            "traffic": self.traffic(),
        }
        arrays = {name: getattr(state, name) for name in _ARRAYS}
        arrays |= {f"aggregator_{k}": v for k, v in state.aggregator.items()}
        history = np.array([list(asdict(r).values()) for r in state.history], dtype=np.float64)
        arrays["history"] = history.reshape(-1, 4)
        arrays["y_randomized"] = self.y_randomized
        arrays["meta"] = np.array(json.dumps(meta))
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        target = self.dir / f"round-{state.round:010d}.npz"
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as handle:
                _write_npz(handle, arrays)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        for old in available_rounds(self.dir.parent, int(self.prints["machine"]))[: -self.keep]:
            (self.dir / f"round-{old:010d}.npz").unlink(missing_ok=True)
        return target


def _write_npz(handle: Any, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` with fixed member timestamps: the same arrays give the same bytes."""
    with zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=ZIP_DATE)
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def load(directory: str | Path, rank: int, round_: int, prints: dict[str, str]) -> Resumed:
    """Machine ``rank``'s checkpoint of ``round_``, refused unless it matches ``prints``."""
    path = machine_dir(directory, rank) / f"round-{round_:010d}.npz"
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {k: stored[k] for k in stored.files}
        meta = json.loads(str(arrays.pop("meta")))
        if meta.get("round") != round_:
            raise CheckpointError(
                f"{path} holds round {meta.get('round')}, not the {round_} its name says"
            )
        if meta.get("format") in LEAKY_FORMATS:
            raise CheckpointError(
                f"{path}: format {meta['format']} is refused: {LEAKY_FORMATS[meta['format']]} "
                f"(delete it and start the run again; dpnet writes format {FORMAT_VERSION})"
            )
        if meta.get("format") != FORMAT_VERSION:
            raise CheckpointError(f"{path}: format {meta.get('format')}, not {FORMAT_VERSION}")
        for what, value in prints.items():
            if meta["fingerprints"].get(what) != value:
                raise CheckpointError(
                    f"{path} is a checkpoint of another {what} than this run's: "
                    f"resume with the same graph, data and settings"
                )
        aggregator = {
            k.removeprefix("aggregator_"): v
            for k, v in arrays.items()
            if k.startswith("aggregator_")
        }
        history = [
            ProgressRecord(int(r[0]), float(r[1]), float(r[2]), float(r[3]))
            for r in arrays["history"]
        ]
        theta_tol = meta["theta_tol"]
        state = LoopState(
            round=int(meta["round"]),
            **{name: arrays[name] for name in _ARRAYS},
            c=float(meta["c"]),
            aggregator=aggregator,
            history=history,
            theta_tol=None if theta_tol is None else np.array(theta_tol, dtype=float),
        )
        return Resumed(state, arrays["y_randomized"], meta["traffic"])
    except CheckpointError:
        raise
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        raise CheckpointError(
            f"machine {rank}: checkpoint {path} cannot be read ({type(exc).__name__}: {exc})"
        ) from None
