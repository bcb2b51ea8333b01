"""Set-up of the main job (backend independent): data, shards, held-out rows.

Data flow and the release boundary (docs/privacy.md, "The release boundary"):

    rank 0 (single data file or synthetic data): load -> split rows -> one RawShard per
        machine; held-out rows -> randomized response (a stream used for it alone, see
        dpnet.streams) -> EvaluationSet (randomized labels only). A public --test-data file
        is used as is.
    every machine (dpnet.cli.job): RawShard -> cross_boundary (randomized response, a stream
        used for it alone) -> PrivateShard -> ADMM rounds -> MachineRelease
    ---- from here on only public inputs and randomized labels flow ----
    rank 0: MachineReleases + PublicSetUp -> report, summary, plot (dpnet.cli.report)

Raw labels exist only in RawShard, in LabelOracle and in ``SetUp.holdout_raw``; the latter two
are kept only when an oracle file was asked for, and only dpnet.cli.oracle reads them.

Delivering a RawShard from rank 0 (``--data FILE``) stands for each machine reading its own
rows in a simulation; with ``--data 'part-{rank}.npz'`` every machine loads its own file and
rank 0 never sees another machine's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpnet import streams
from dpnet.cli.config import RunConfig
from dpnet.cli.evaluation import AS_GIVEN, NOISY_COUNT, PUBLIC, RANDOMIZED, EvaluationSet
from dpnet.data.dataset import GroupData
from dpnet.data.labels import LabelDomain
from dpnet.data.loaders import format_of, groups_by_name, groups_width, load_dataset
from dpnet.data.partition import split_rows, train_test_split_indices
from dpnet.data.synthetic import make_group_logistic
from dpnet.decentralized import boundary
from dpnet.decentralized.boundary import RawShard
from dpnet.decentralized.columns import PublicColumns, public_columns
from dpnet.decentralized.machine import HOLDOUT_PART
from dpnet.errors import ConfigError
from dpnet.penalties.group import group_weights

if TYPE_CHECKING:
    from dp_accounting import dp_event

RANK_PLACEHOLDER = "{rank}"


@dataclass(frozen=True)
class PublicSetUp:
    """Rank 0's public description of the problem: what the report may use."""

    group_labels: np.ndarray
    group_weights: np.ndarray
    evaluation: EvaluationSet | None
    holdout_event: dp_event.DpEvent | None
    data_layout: str
    feature_names: tuple[str, ...] | None = None  # a CSV header's (public)
    group_names: tuple[int | str, ...] | None = None  # group g's label as --groups gave it
    # label privacy: the columns' pooled facts (public there); record privacy: the centre and
    # scale released for --standardize (None without)
    columns: PublicColumns | None = None


@dataclass(frozen=True)
class SetUp:
    """Rank 0's set-up: raw shards to deliver, the public part, held-out raw labels (oracle)."""

    shards: list[RawShard] | None
    public: PublicSetUp
    holdout_raw: np.ndarray | None


def _labels(config: RunConfig) -> LabelDomain:
    return LabelDomain.parse(config.labels)


def declared_width(config: RunConfig) -> int | None:
    """The public schema's width P, declared before any private row is read: --n-features,
    or the count of ids of a --groups list or file (both given: they must agree). None: each
    CSV or npz file carries its own in its format; a LIBSVM --data or --test-data, which
    carries none, is refused here, before any file is opened (ConfigError), and so is a
    --groups file mapping columns by name for a file that is no CSV (only a CSV header names
    columns)."""
    implied = groups_width(config.groups)
    if config.n_features is not None and implied not in (None, config.n_features):
        raise ConfigError(
            f"--n-features {config.n_features} but --groups gives {implied} ids (one per column)"
        )
    width = config.n_features if config.n_features is not None else implied
    by_name = groups_by_name(config.groups)
    for path in (config.data, config.test_data):
        if path is not None and format_of(path, width) != "csv" and by_name:
            raise ConfigError(
                f"--groups {config.groups} maps columns by name, but {path} is no CSV file, "
                "whose header would name them: map them by 0-based column index"
            )
    return width


def _load(config: RunConfig, path: str, n_features: int | None) -> GroupData:
    """A file of the job, read with the public schema: width, groups, label domain."""
    return load_dataset(path, groups=config.groups, labels=_labels(config), n_features=n_features)


def load_public_test(
    config: RunConfig, n_features: int, names: tuple[str, ...] | None = None
) -> EvaluationSet | None:
    """``--test-data``: a file the user declares public, read at the schema's width (declared,
    or the one the training files' format carries); its labels are used as they are. If both
    it and the training data have a header (``names``), the two must name the same columns in
    the same order (ConfigError)."""
    if config.test_data is None:
        return None
    test = _load(config, config.test_data, n_features)
    if names is not None and test.feature_names not in (None, names):
        other = _other_columns(test.feature_names, names, "the training data's")
        raise ConfigError(f"{config.test_data}: {other}")
    return EvaluationSet(test.X, test.y, PUBLIC)


def _other_columns(found: tuple[str, ...], expected: tuple[str, ...], whose: str) -> str:
    """How the header ``found`` differs from the header ``expected`` (``whose``), in words."""
    k = next((k for k, (a, b) in enumerate(zip(found, expected, strict=False)) if a != b), None)
    if k is None:
        return f"its header names {len(found)} feature columns, {whose} {len(expected)}"
    return (
        f"its header names feature column {k} {found[k]!r}, {whose} {expected[k]!r} "
        "(the headers must be the same)"
    )


def _randomized_holdout(
    holdout: GroupData, config: RunConfig, n_machines: int
) -> tuple[EvaluationSet, dp_event.DpEvent | None]:
    """Held-out private rows: randomized response on their labels; under --privacy record
    (features private too) scored only through a noisy count (:mod:`dpnet.cli.evaluation`), their
    labels randomized only with --keep-prob."""
    from dpnet.privacy.mechanisms import randomized_response_event  # rank 0 only

    p = config.keep_probability
    noisy = boundary.randomize_labels(
        holdout.y, p, streams.holdout_flip_stream(config.seed, n_machines), HOLDOUT_PART
    )
    if not config.privacy_mode.features_public:
        event = randomized_response_event(p) if p < 1.0 else None
        return EvaluationSet(holdout.X, noisy, NOISY_COUNT, p, config.privacy_mode.epsilon), event
    source = RANDOMIZED if p < 1.0 else AS_GIVEN  # epsilon inf: nothing randomized
    return EvaluationSet(holdout.X, noisy, source, p), randomized_response_event(p)


def prepare_problem(config: RunConfig, n_machines: int) -> SetUp:
    """Rank 0: training rows (synthetic from ``config.seed`` or one file), held-out rows, shards.

    Held-out rows split off the private data (or generated with it) are private rows too:
    their labels go through randomized response before anything is computed from them.
    """
    data_rng = streams.data_stream(config.seed)
    holdout = None
    if config.data is None:
        train = make_group_logistic(
            config.n_samples, n_groups=config.n_groups, label_rule=config.label_rule, rng=data_rng
        )
        if config.n_test > 0:
            holdout = make_group_logistic(
                config.n_test, n_groups=config.n_groups, label_rule=config.label_rule, rng=data_rng
            )
        public_test = None
    else:
        full = _load(config, config.data, declared_width(config))
        public_test = load_public_test(config, full.n_features, full.feature_names)
        train = full
        if public_test is None and config.test_fraction > 0:
            tr, te = train_test_split_indices(full.n_samples, config.test_fraction, data_rng)
            train, holdout = full.subset(tr), full.subset(te)
    held = (
        ""
        if config.data is None or holdout is None
        else f" (after holding out {holdout.n_samples} test rows)"
    )
    if train.n_samples < n_machines:
        raise ConfigError(
            f"{train.n_samples} training rows{held} cannot be split over {n_machines} machines"
        )
    if config.shard_sizes is not None and (
        len(config.shard_sizes) != n_machines or sum(config.shard_sizes) != train.n_samples
    ):
        raise ConfigError(
            f"--shard-sizes gives {len(config.shard_sizes)} sizes summing to "
            f"{sum(config.shard_sizes)}; need {n_machines} sizes summing to the "
            f"{train.n_samples} training rows{held}"
        )
    weights = group_weights(train.groups, config.group_weights)
    parts = split_rows(train.n_samples, n_machines, sizes=config.shard_sizes)
    rows = [np.ascontiguousarray(train.X[idx]) for idx in parts]  # each machine's, once
    columns = public_columns(
        config.privacy_mode,
        rows,
        train.n_samples,
        standardize=config.standardize,
        seed=config.seed,
    )
    shards = [
        RawShard(x, train.y[idx].copy(), train.n_samples, train.groups, weights, columns)
        for x, idx in zip(rows, parts, strict=True)
    ]
    evaluation, event = public_test, None
    if holdout is not None:
        evaluation, event = _randomized_holdout(holdout, config, n_machines)
    public = PublicSetUp(
        train.groups,
        weights,
        evaluation,
        event,
        "split by rank 0",
        train.feature_names if config.data is not None else None,
        train.group_names,
        columns,
    )
    holdout_raw = holdout.y if holdout is not None and config.oracle_output else None
    return SetUp(shards, public, holdout_raw)


def data_per_machine(config: RunConfig) -> bool:
    """``--data 'shard-{rank}.npz'``: every machine loads its own file."""
    return config.data is not None and RANK_PLACEHOLDER in config.data


def load_own_shard(config: RunConfig, rank: int) -> GroupData:
    """Machine ``rank``'s own rows, from ``--data`` with {rank} replaced by its rank, read at
    the declared width."""
    assert config.data is not None  # callers check data_per_machine(config) first
    path = config.data.replace(RANK_PLACEHOLDER, str(rank))
    return _load(config, path, declared_width(config))


def check_shards_agree(
    rows: list[int],
    groups: list[list[int]],
    names: list[tuple[str, ...] | None] | None = None,
) -> None:
    """All machines' files must describe the same columns and groups (ConfigError if not):
    with a declared width and --groups every file was read at them; what is left to check
    are the widths, ``groups`` arrays and CSV headers (``names``) that CSV and npz files
    carry in their format."""
    for j, found in enumerate(names or []):
        expected = names[0] if names else None
        if found == expected:
            continue
        if found is None or expected is None:
            raise ConfigError(
                f"machine {j}'s data {'has no' if found is None else 'has a'} header, machine "
                f"0's {'has' if found is None else 'has none'} (the headers must be the same)"
            )
        other = _other_columns(found, expected, "machine 0's")
        raise ConfigError(f"machine {j}'s data: {other}")
    for j, g in enumerate(groups):
        if len(g) != len(groups[0]):
            raise ConfigError(
                f"machine {j}'s data has {len(g)} columns, machine 0's has {len(groups[0])}"
            )
        if g != groups[0]:
            raise ConfigError(f"machine {j}'s data has other column groups than machine 0's")


def own_data_problem(
    config: RunConfig,
    groups: np.ndarray,
    names: tuple[str, ...] | None = None,
    group_names: tuple[int | str, ...] | None = None,
) -> SetUp:
    """Rank 0's set-up when every machine loads its own shard, from the public schema of
    rank 0's own file (every machine's agree): its column ``groups``, the header's ``names``
    and the labels ``group_names`` --groups gave; a public test file at most."""
    public = PublicSetUp(
        groups,
        group_weights(groups, config.group_weights),
        load_public_test(config, len(groups), names),
        None,
        "each machine loaded its own file",
        names,
        group_names,
    )
    return SetUp(None, public, None)


def shard_from_own_data(
    own: GroupData, n_total: int, config: RunConfig, columns: PublicColumns | None
) -> RawShard:
    """A machine's RawShard of its own file; ``columns``: the network's pooled column facts."""
    return RawShard(
        own.X,
        own.y,
        n_total,
        own.groups,
        group_weights(own.groups, config.group_weights),
        columns,
    )
