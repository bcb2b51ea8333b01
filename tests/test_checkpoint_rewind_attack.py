"""The rewinding attack of issue 19, end to end on the checkpoint files of unseeded runs.

Each trial draws a secret bit b and runs the job (epsilon = 1, no --seed: every machine draws
OS entropy) on 2 machines holding one row each, where machine 0's raw label is +1 if b else -1.
The attacker reads machine 0's latest checkpoint and the public keep probability p only. If the
file holds a PCG64 state anywhere, the attacker rewinds it over the n uniforms of the flips
(``advance(2**128 - n)``), replays them and undoes the randomized response; otherwise the best
it can do is to guess the randomized label. Against epsilon-label-DP no attacker is right more
than p = e/(1 + e) = 0.731 of the time on average, so 29 or more correct of 30 has probability
< 1e-3. With the flip stream's state put back into the checkpoints (as format 2 stored it) the
same attacker is right 30 times of 30: the attack has the power to see the leak.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpnet import streams
from dpnet.cli import checkpoint
from dpnet.run import main
from tests.launch import run_job

pytestmark = pytest.mark.slow  # statistical: 30 runs of the job per test

TRIALS = 30
EPSILON = 1.0
KEEP = math.exp(EPSILON) / (1 + math.exp(EPSILON))
THRESHOLD = 29  # P(Binomial(30, 0.731) >= 29) < 1e-3
J = 2
ARGS = ["--data", "part-{rank}.npz", "--epsilon", str(EPSILON), "--machines", str(J)]
ARGS += ["--checkpoint", "ck", "--checkpoint-every", "1", "--max-rounds", "2", "--quiet"]


def test_threshold_is_what_the_docstring_says():
    assert stats.binom.sf(THRESHOLD - 1, TRIALS, KEEP) < 1e-3
    assert stats.binom.sf(THRESHOLD - 2, TRIALS, KEEP) >= 1e-3


def _generator_states(value: Any) -> Iterator[dict[str, Any]]:
    """Every numpy bit-generator state stored anywhere in a JSON value."""
    if isinstance(value, dict):
        if value.get("bit_generator") == "PCG64" and "state" in value:
            yield value
        for item in value.values():
            yield from _generator_states(item)
    elif isinstance(value, list):
        for item in value:
            yield from _generator_states(item)


def _read(checkpoint: Path) -> tuple[dict[str, Any], np.ndarray]:
    """A checkpoint file's metadata and its randomized labels: what an attacker holding it reads."""
    with np.load(checkpoint, allow_pickle=False) as stored:
        return json.loads(str(stored["meta"])), stored["y_randomized"].copy()


def attack(machine_dir: Path) -> float:
    """Guess machine 0's raw label from its latest checkpoint and the public p."""
    meta, randomized = _read(sorted(machine_dir.glob("round-*.npz"))[-1])
    for state in _generator_states(meta):
        rewound = np.random.Generator(np.random.PCG64())
        rewound.bit_generator.state = state
        rewound.bit_generator.advance(2**128 - randomized.size)  # back over the n uniforms
        kept = rewound.random(randomized.size) < KEEP
        return float(randomized[0] if kept[0] else -randomized[0])
    return float(randomized[0])  # no stream in the file: the randomized label is the best guess


def _trial_data(workdir: Path, t: int) -> int:
    """Write the trial's shards (one row per machine); return the secret bit."""
    rng = np.random.default_rng([19, t])
    secret = int(rng.integers(2))
    X = rng.standard_normal((J, 2))
    y = np.where(rng.random(J) < 0.5, 1.0, -1.0)
    y[0] = 1.0 if secret else -1.0
    workdir.mkdir()
    for j in range(J):
        np.savez(workdir / f"part-{j}.npz", X=X[j : j + 1], y=y[j : j + 1])
    return secret


def _play(tmp_path: Path, run: Callable[[Path], None]) -> int:
    """Correct guesses over the trials."""
    workdirs = [tmp_path / f"trial-{t}" for t in range(TRIALS)]
    secrets = [_trial_data(workdir, t) for t, workdir in enumerate(workdirs)]
    for workdir in workdirs:
        run(workdir)
    guesses = [attack(workdir / "ck" / "machine-0") > 0 for workdir in workdirs]
    return sum(g == bool(s) for g, s in zip(guesses, secrets, strict=True))


def _in_process(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workdir)
    assert main(ARGS) == 0


def test_checkpoints_resist_the_rewinding_attack_in_process(tmp_path, monkeypatch, capsys):
    correct = _play(tmp_path, lambda workdir: _in_process(workdir, monkeypatch))
    capsys.readouterr()
    assert correct < THRESHOLD, f"{correct}/{TRIALS} raw labels recovered from checkpoints"


@pytest.mark.mpi_launch
def test_checkpoints_written_under_mpiexec_hold_no_stream_state(tmp_path):
    """Under mpiexec every rank writes its own checkpoints by the same code as in process:
    none holds a generator state, the only thing the attack can rewind (the power check below
    shows it finds one where there is one). Without it the attack is the guess from the
    randomized label, whose trials in process stay under the threshold: one job checks every
    rank's every file, where 30 launched trials only showed the same absence."""
    workdir = tmp_path / "trial"
    _trial_data(workdir, 0)
    done = run_job(ARGS, n_ranks=J, cwd=workdir, timeout=120)
    assert done.returncode == 0, done.stderr
    written = sorted((workdir / "ck").glob("machine-*/round-*.npz"))
    assert {path.parent.name for path in written} == {f"machine-{j}" for j in range(J)}
    for path in written:
        meta, _ = _read(path)
        assert list(_generator_states(meta)) == [], f"{path}: a stream state was written"


def test_the_attack_recovers_every_label_when_the_stream_state_is_put_back(
    tmp_path, monkeypatch, capsys
):
    """The power check: checkpoints that store the flip stream's state after the draw (the
    format-2 leak, reinstated here by the test) give the attacker every raw label."""
    after_draw: dict[int, np.random.Generator] = {}
    real_stream, real_write = streams.machine_flip_stream, checkpoint._write_npz

    def recorded_stream(seed: int | None, rank: int) -> np.random.Generator:
        after_draw[rank] = real_stream(seed, rank)  # its state moves on with the draw
        return after_draw[rank]

    def leaky_write(handle: Any, arrays: dict[str, np.ndarray]) -> None:
        meta = json.loads(str(arrays["meta"]))
        meta["rng_state"] = after_draw[int(meta["fingerprints"]["machine"])].bit_generator.state
        real_write(handle, {**arrays, "meta": np.array(json.dumps(meta))})

    monkeypatch.setattr(streams, "machine_flip_stream", recorded_stream)
    monkeypatch.setattr(checkpoint, "_write_npz", leaky_write)
    correct = _play(tmp_path, lambda workdir: _in_process(workdir, monkeypatch))
    capsys.readouterr()
    assert correct >= THRESHOLD, f"only {correct}/{TRIALS}: the attack lacks power"
