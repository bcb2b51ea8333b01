"""Command-line configuration of the main job: parsing and validation (no MPI, no data)."""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NoReturn

from dpnet import __version__
from dpnet.data.labels import LabelDomain
from dpnet.data.loaders import WIDTH_LIMIT
from dpnet.decentralized.admm import (
    MAX_PENALTY,
    THETA_SOLVERS,
    ADMMConfig,
    fit_settings,
    mode_defaults,
)
from dpnet.decentralized.cv import CV_RULES, DEFAULT_PATH, check_grid
from dpnet.decentralized.machine import LOSSES
from dpnet.decentralized.record import DEFAULT_ROUNDS as DEFAULT_RECORD_ROUNDS
from dpnet.decentralized.record import RECORD_RELAXATION
from dpnet.errors import ConfigError, PrivacyError
from dpnet.network.comm import DEFAULT_PEER_TIMEOUT
from dpnet.network.topology import DEFAULT_MACHINES, DEFAULT_TOPOLOGY, TOPOLOGY_NAMES
from dpnet.penalties.group import GROUP_WEIGHTS
from dpnet.privacy.budget import check_cap
from dpnet.privacy.discrete import MAX_COUNT_EPSILON
from dpnet.privacy.modes import (
    CLI,
    DEFAULT_DELTA,
    DEFAULT_EPSILON,
    PRIVACY_MODES,
    PrivacyMode,
    RecordPrivacy,
    mode_class,
    privacy_mode,
)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("must be comma-separated integers") from None


def _float_list(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(s) for s in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("must be comma-separated numbers") from None


def _name_list(text: str) -> tuple[str, ...]:
    return tuple(b for b in text.split(",") if b)


_ADMM = ADMMConfig()  # the solver defaults live in ADMMConfig


def _opt(default: Any, help: str, group: str, **argparse_kw: Any) -> Any:
    """A RunConfig field that also describes its command-line option (one source of truth:
    :func:`build_parser` generates the CLI from these fields)."""
    return field(default=default, metadata={"help": help, "group": group, **argparse_kw})


BACKENDS = ("auto", "mpi", "threads", "simulated")

NET, PRIV, MODEL, DATA, RUN = (
    "network",
    "privacy (per machine: randomized response on labels, or Gaussian noise on every message)",
    "model and solver",
    "data",
    "run",
)


@dataclass(frozen=True)
class RunConfig:
    """Everything the main job needs to know; identical on every rank. Each field is one
    command-line option (``--field-name``), with its default, help and group."""

    topology: str = _opt(
        DEFAULT_TOPOLOGY,
        f"graph name ({', '.join(TOPOLOGY_NAMES)}; auto = "
        "paper5 for 5 machines, a ring otherwise) or a graph file",
        NET,
    )
    machines: int | None = _opt(
        None,
        f"J for the in-process backend (default {DEFAULT_MACHINES}, or the graph file's node "
        "count); under MPI the rank count is J, and --machines must equal it if given",
        NET,
        type=int,
    )
    backend: str = _opt(
        "auto",
        "auto: MPI under mpiexec, otherwise all machines as threads of this process; "
        "simulated: all machines in this process as arrays (same results, for large J)",
        NET,
        choices=BACKENDS,
    )
    topology_seed: int = _opt(0, "seed of random graph families", NET, type=int)
    peer_timeout: float = _opt(
        DEFAULT_PEER_TIMEOUT,
        "seconds a machine waits for a neighbour's message; then every machine stops, "
        "naming the silent neighbour (exit code 5)",
        NET,
        type=float,
        metavar="SECONDS",
    )
    privacy: str = _opt(
        "label",
        "label: randomized response on every machine's labels (epsilon-label-DP); record: "
        "Gaussian noise on every theta a machine sends, (epsilon, delta)-DP for a whole "
        "record (features and label) against every other machine (docs/privacy.md)",
        PRIV,
        choices=PRIVACY_MODES,
    )
    epsilon: float | None = _opt(
        None,
        f"per machine: the label-DP budget of randomized response (default {DEFAULT_EPSILON:g}, "
        "or the budget of --keep-prob if given; inf = NOT private: labels used as given); with "
        f"--privacy record the record-level budget of all --max-rounds rounds (default "
        f"{DEFAULT_EPSILON:g})",
        PRIV,
        type=float,
    )
    delta: float | None = _opt(
        None,
        f"--privacy record: the delta of the budget (default {DEFAULT_DELTA:g})",
        PRIV,
        type=float,
    )
    row_bound: float | None = _opt(
        None,
        "--privacy record (required): a public bound R on every row's L2 norm; longer rows are "
        "scaled to norm R",
        PRIV,
        type=float,
        metavar="R",
    )
    keep_prob: float | None = _opt(
        None,
        "RR keep probability p in (0.5, 1), instead of --epsilon: epsilon = ln(p/(1-p)); with "
        "--privacy record the labels get randomized response too (default: not)",
        PRIV,
        type=float,
    )
    budget_file: str | None = _opt(
        None,
        "this machine's privacy budget across jobs: before anything is read the file is "
        "charged what the job spends on the machine's data (never refunded), or the job is "
        "refused (exit 2) if that would pass the file's cap; {rank} in the path: one file per "
        "machine (needed for more than one machine; docs/cli.md)",
        PRIV,
        metavar="FILE",
    )
    budget_cap: tuple[float, ...] | None = _opt(
        None,
        "the cap (replace-one) a new --budget-file is created with: EPSILON[,DELTA], delta "
        "default 0, inf alone = no cap (the file only counts); for an existing file it must "
        "be the file's own",
        PRIV,
        type=_float_list,
        metavar="EPS[,DELTA]",
    )
    loss: str = _opt(
        "logistic",
        "unbiased: Natarajan et al. loss corrected for the known flip rate",
        PRIV,
        choices=LOSSES,
    )
    lam: float = _opt(_ADMM.lam, "lambda in (lambda/2) sum_g w_g ||b_g||", MODEL, type=float)
    cv: int | None = _opt(
        None,
        "choose lambda by K-fold cross-validation carried out by the machines (K >= 2), then "
        "fit all rows with the selected lambda (--lam is then not used)",
        MODEL,
        type=int,
        metavar="K",
    )
    lam_grid: tuple[float, ...] | None = _opt(
        None,
        "the lambdas --cv tries, sorted (default: --n-lambdas values from lambda_max down to "
        "--lambda-ratio * lambda_max, as glmnet)",
        MODEL,
        type=_float_list,
        metavar="L,L,...",
    )
    n_lambdas: int = _opt(
        DEFAULT_PATH.n_lambdas, "--cv grid size when no --lam-grid is given", MODEL, type=int
    )
    lambda_ratio: float = _opt(
        DEFAULT_PATH.ratio,
        "smallest / largest lambda of the --cv grid (no --lam-grid)",
        MODEL,
        type=float,
    )
    cv_rule: str = _opt(
        DEFAULT_PATH.rule,
        "--cv fits with lambda_min (smallest CV loss) or lambda_1se (largest lambda within "
        "one standard error of it)",
        MODEL,
        choices=CV_RULES,
    )
    group_weights: str = _opt("ones", "w_g", MODEL, choices=GROUP_WEIGHTS)
    standardize: bool = _opt(
        False,
        "fit every column centred and divided by its standard deviation over all training "
        "rows, which the machines agree on from their row counts and column moments without "
        "pooling rows (the penalty then weighs the standardized coefficients; coef is "
        "reported on the columns as given); under --privacy record from noisy column sums and "
        "sums of squares of the rows clipped to --row-bound, which take 10%% of the budget's "
        "Gaussian-DP mu^2 (the total stays (epsilon, delta); docs/privacy.md)",
        MODEL,
        action="store_true",
    )
    c: float | None = _opt(
        _ADMM.c,
        "initial ADMM penalty c (default: from the graph's Laplacian spectrum and the "
        "features' curvature s, 0.105 sqrt(s) (mu_2/mu_J)^0.2 / (J sqrt(mu_2 mu_J)); under "
        "--privacy record 0.21 / (J sqrt(mu_2 mu_J)) times clip(s/12, 1, 3), s the noise "
        "multiplier; docs/algorithms.md)",
        MODEL,
        type=float,
    )
    adapt_c: bool = _opt(
        _ADMM.adapt_c,
        "keep c fixed (default: network-wide residual balancing, then its descent in the tail; "
        "always fixed under --privacy record, where the residuals are the noise's)",
        MODEL,
        flag="--no-adapt-c",
        action="store_false",
    )
    alpha_z: float = _opt(_ADMM.alpha_z, "Z step size (1 = exact prox)", MODEL, type=float)
    relaxation: float | None = _opt(
        None,
        "over-relaxation alpha in (0, 2) of the Z's in the theta and dual steps (1 = plain "
        f"ADMM; default {_ADMM.relaxation}, {RECORD_RELAXATION} under --privacy record; "
        "docs/algorithms.md)",
        MODEL,
        type=float,
    )
    theta_solver: str = _opt(
        _ADMM.theta_solver,
        "theta step: exact (newton), or --beta-steps iterations of majorize-minimize "
        "(majorized) or of gradient descent (gradient)",
        MODEL,
        choices=THETA_SOLVERS,
    )
    theta_rtol: float = _opt(
        _ADMM.theta_rtol,
        "newton: each round's theta step is solved to this fraction of the machine's "
        "residuals of the round before (gradient norm; 0 = to 1e-12 every round; "
        "docs/algorithms.md)",
        MODEL,
        type=float,
    )
    beta_steps: int = _opt(
        _ADMM.beta_steps,
        "U: iterations per round of the majorized and gradient theta solvers",
        MODEL,
        type=int,
    )
    beta_step_size: float = _opt(
        _ADMM.beta_step_size, "alpha_beta, gradient only", MODEL, type=float
    )
    max_rounds: int | None = _opt(
        None,
        f"stop after this many rounds (default {_ADMM.max_rounds}; with --privacy record "
        f"{DEFAULT_RECORD_ROUNDS}, the rounds the budget is spread over)",
        MODEL,
        type=int,
    )
    tol: float = _opt(
        _ADMM.tol,
        "stop when every machine's residual / max(1, ||theta||) is below tol",
        MODEL,
        type=float,
    )
    max_coef_norm: float = _opt(
        _ADMM.max_coef_norm,
        "stop with stop_reason 'diverged' once a machine's ||theta|| exceeds it",
        MODEL,
        type=float,
    )
    data: str | None = _opt(
        None,
        "npz / csv / libsvm file (default: synthetic); with {rank} "
        "in the path every machine loads its own file (e.g. "
        "'shards/part-{rank}.npz')",
        DATA,
    )
    groups: str | None = _opt(
        None, "'size:K', comma-separated ids, or a file with one id per column", DATA
    )
    n_features: int | None = _opt(
        None,
        "the public width P of every file, declared before any row is read (default: the "
        "width a --groups list or file implies, else each CSV or npz file's own); a LIBSVM "
        "file needs it: indices are one-based, one outside 1..P is dropped from its row",
        DATA,
        type=int,
        metavar="P",
    )
    labels: str | None = _opt(
        None,
        "the public label domain: the file values meaning -1 and "
        "+1 (default: -1 or 0 -> -1, 1 -> +1; write --labels=-1,1 when "
        "NEG starts with '-'); a machine may hold one class only",
        DATA,
        metavar="NEG,POS",
    )
    test_data: str | None = _opt(
        None,
        "a PUBLIC test file, scored on its labels as given "
        "(default: hold out --test-fraction of --data, whose labels "
        "are randomized like all others)",
        DATA,
    )
    test_fraction: float = _opt(0.25, "fraction of --data held out for testing", DATA, type=float)
    n_samples: int = _opt(2000, "synthetic training rows", DATA, type=int)
    n_test: int = _opt(1000, "synthetic test rows", DATA, type=int)
    n_groups: int = _opt(16, "synthetic groups (>= 6)", DATA, type=int)
    label_rule: str = _opt(
        "bernoulli", "synthetic labels", DATA, choices=("bernoulli", "threshold")
    )
    shard_sizes: tuple[int, ...] | None = _opt(
        None, "comma-separated rows per machine", DATA, type=_int_list, metavar="N,N,..."
    )
    seed: int | None = _opt(
        None,
        "run seed (reproducible; whoever knows it can undo the RR). "
        "Default: every machine draws its own OS entropy",
        RUN,
        type=int,
    )
    output: str | None = _opt(None, "results JSON file (written by rank 0)", RUN)
    oracle_output: str | None = _opt(
        None,
        "simulation oracles (true-label objective, flip "
        "counts, raw-label accuracy) to this separate JSON file: "
        "NOT covered by the privacy guarantee",
        RUN,
        metavar="FILE",
    )
    plot: str | None = _opt(None, "convergence figure (PNG, PDF, SVG, ...) written by rank 0", RUN)
    cv_plot: str | None = _opt(
        None, "cross-validation curve (--cv) with standard errors, written by rank 0", RUN
    )
    progress_every: int = _opt(50, "rounds between progress lines (on stderr)", RUN, type=int)
    baselines: tuple[str, ...] = _opt(
        (),
        "comma-separated rank-0 baselines to run too: median, rdp-admm",
        RUN,
        type=_name_list,
        metavar="NAME,...",
    )
    quiet: bool = _opt(
        False,
        "no progress lines; with --output, one line naming the file instead of the summary",
        RUN,
        action="store_true",
    )
    checkpoint: str | None = _opt(
        None,
        "directory for checkpoints: each machine writes its own state there (its iterates, "
        "its randomized labels, never its raw ones) every --checkpoint-every rounds",
        RUN,
        metavar="DIR",
    )
    checkpoint_every: int = _opt(100, "rounds between checkpoints", RUN, type=int, metavar="K")
    resume: str | None = _opt(
        None,
        "continue from the latest round every machine has a checkpoint of in DIR (same graph, "
        "data and settings; the result equals the uninterrupted run's)",
        RUN,
        metavar="DIR",
    )

    @property
    def rounds(self) -> int:
        """--max-rounds, or its default for the privacy mode."""
        if self.max_rounds is not None:
            return self.max_rounds
        return mode_defaults(mode_class(self.privacy).noisy_thetas)[0]

    @property
    def over_relaxation(self) -> float:
        """--relaxation, or its default for the privacy mode."""
        if self.relaxation is not None:
            return self.relaxation
        return mode_defaults(mode_class(self.privacy).noisy_thetas)[1]

    @property
    def privacy_mode(self) -> PrivacyMode:
        """The privacy mode of these options, checked (ConfigError on what it cannot take):
        every privacy rule of the job is read from it (:mod:`dpnet.privacy.modes`)."""
        return privacy_mode(
            self.privacy,
            epsilon=self.epsilon,
            delta=self.delta,
            row_bound=self.row_bound,
            keep_prob=self.keep_prob,
            spelling=CLI,
            standardize=self.standardize,
        )

    @property
    def theta_noise_multiplier(self) -> float | None:
        """--privacy record: the multiplier s of every round's theta release, calibrated so that
        the --max-rounds releases compose to exactly (epsilon, delta); None otherwise."""
        mode = self.privacy_mode
        return mode.noise_multiplier(self.rounds) if isinstance(mode, RecordPrivacy) else None

    @property
    def budget_cap_pair(self) -> tuple[float, float] | None:
        """--budget-cap as (epsilon, delta): delta 0 when not given, (inf, inf) for inf alone
        (no cap); checked by the budget's rule (ConfigError); None when not given."""
        if self.budget_cap is None:
            return None
        if len(self.budget_cap) not in (1, 2):
            raise ConfigError(
                f"--budget-cap takes EPSILON or EPSILON,DELTA, got {len(self.budget_cap)} numbers"
            )
        epsilon = self.budget_cap[0]
        delta = (
            self.budget_cap[1]
            if len(self.budget_cap) == 2
            else (math.inf if epsilon == math.inf else 0.0)
        )
        try:
            return check_cap(epsilon, delta)
        except PrivacyError as exc:
            raise ConfigError(f"--budget-cap: {exc}") from None

    @property
    def keep_probability(self) -> float:
        """p of randomized response (:attr:`privacy_mode`'s)."""
        return self.privacy_mode.keep_probability

    @property
    def label_epsilon(self) -> float:
        """What randomized response with :attr:`keep_probability` spends (inf at p = 1)."""
        return self.privacy_mode.label_epsilon

    def validate(self) -> RunConfig:
        """Return ``self`` or raise ConfigError naming the first invalid option (one line)."""
        mode = self.privacy_mode  # the privacy options, checked by their mode
        checks = [
            (0 < self.lam < math.inf, f"--lam must be finite and > 0, got {self.lam}"),
            (
                self.c is None or 0 < self.c <= MAX_PENALTY,
                f"--c must lie in (0, {MAX_PENALTY:.0e}] (a larger penalty freezes the "
                f"iterates; leave --c out for the default start), got {self.c}",
            ),
            (0 < self.alpha_z <= 1, f"--alpha-z must lie in (0, 1], got {self.alpha_z}"),
            (
                0 < self.over_relaxation < 2,
                f"--relaxation must lie in (0, 2), got {self.relaxation}",
            ),
            (self.rounds >= 1, f"--max-rounds must be >= 1, got {self.max_rounds}"),
            (0 < self.tol < 1, f"--tol must lie in (0, 1), got {self.tol}"),
            (
                0 < self.max_coef_norm < math.inf,
                f"--max-coef-norm must be finite and > 0, got {self.max_coef_norm}",
            ),
            (
                self.seed is None or 0 <= self.seed < 2**63,
                f"--seed must be an integer in [0, 2^63), got {self.seed}",
            ),
            (
                0 <= self.topology_seed < 2**32,
                f"--topology-seed must be an integer in [0, 2^32), got {self.topology_seed}",
            ),
            (
                self.machines is None or 1 <= self.machines <= MAX_MACHINES,
                f"--machines must lie in [1, {MAX_MACHINES}], got {self.machines}",
            ),
            (
                2 <= self.n_samples <= MAX_ROWS,
                f"--n-samples must lie in [2, {MAX_ROWS:.0e}], got {self.n_samples}",
            ),
            (
                0 <= self.n_test <= MAX_ROWS,
                f"--n-test must lie in [0, {MAX_ROWS:.0e}], got {self.n_test}",
            ),
            (self.n_groups <= 10_000, f"--n-groups must be <= 10000, got {self.n_groups}"),
            (
                self.n_features is None or 1 <= self.n_features < WIDTH_LIMIT,
                f"--n-features must lie in [1, {WIDTH_LIMIT:.0e}), got {self.n_features}",
            ),
            (self.rounds <= 10**9, f"--max-rounds must be <= 1e9, got {self.max_rounds}"),
            (0 <= self.test_fraction < 1, "--test-fraction must lie in [0, 1)"),
            (self.beta_steps >= 1, "--beta-steps must be >= 1"),
            (0 <= self.theta_rtol <= 1, f"--theta-rtol must lie in [0, 1], got {self.theta_rtol}"),
            (0 < self.beta_step_size < math.inf, "--beta-step-size must be finite and > 0"),
            (self.progress_every >= 0, "--progress-every must be >= 0"),
            (
                0 < self.peer_timeout <= MAX_PEER_TIMEOUT,
                f"--peer-timeout must lie in (0, {MAX_PEER_TIMEOUT:g}] seconds, "
                f"got {self.peer_timeout}",
            ),
            (
                1 <= self.checkpoint_every <= 10**9,
                f"--checkpoint-every must lie in [1, 1e9], got {self.checkpoint_every}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        self._validate_backend()
        if mode.noisy_thetas:  # what the noisy thetas' mechanism does not cover
            fit_settings(mode, self.seed, None, CLI, theta_solver=self.theta_solver)
            self._validate_record()
            self._validate_record_limits()
        if self.shard_sizes is not None and self.data is not None and "{rank}" in self.data:
            raise ConfigError(
                "--shard-sizes does not apply when every machine loads its own "
                "file ({rank} in --data)"
            )
        if self.n_features is not None and self.data is None:
            raise ConfigError("--n-features declares the width of --data files (none given)")
        own_files = self.data is not None and "{rank}" in self.data
        if (self.checkpoint or self.resume) and self.seed is None and not own_files:
            raise ConfigError(
                "--checkpoint and --resume need --seed when rank 0 generates or splits the "
                "data: a resumed run must rebuild the same shards (per-machine files, {rank} "
                "in --data, need no seed)"
            )
        self._validate_cv()
        if self.budget_cap is not None and self.budget_file is None:
            raise ConfigError("--budget-cap needs --budget-file (the file it caps)")
        self.budget_cap_pair  # noqa: B018 (checked: ConfigError)
        if self.theta_rtol != _ADMM.theta_rtol and self.theta_solver != "newton":
            raise ConfigError(
                f"--theta-rtol applies to --theta-solver newton only (--theta-solver "
                f"{self.theta_solver} takes --beta-steps iterations per round)"
            )
        LabelDomain.parse(self.labels)
        for name in self.baselines:
            if name not in BASELINES:
                raise ConfigError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
        if self.baselines and math.isinf(mode.spend()[0]):
            raise ConfigError(
                "--baselines run at the job's epsilon, and this job is not private (epsilon "
                "inf): give a finite --epsilon or --keep-prob"
            )
        return self

    def _validate_backend(self) -> None:
        """Options that cannot apply on the simulated backend (no rounds on their own
        machines to checkpoint, no messages to wait for)."""
        if self.backend != "simulated":
            return
        unusable = [
            ("--checkpoint", self.checkpoint is not None),
            ("--resume", self.resume is not None),
            ("--peer-timeout", self.peer_timeout != DEFAULT_PEER_TIMEOUT),
        ]
        for option, given in unusable:
            if given:
                raise ConfigError(
                    f"{option} does not apply on --backend simulated (all machines as arrays "
                    "in one process); use the threads or MPI backend"
                )

    def _validate_record(self) -> None:
        """--privacy record: only what the mechanism covers (its theta step is its own, of
        fixed work; --cv would read the rows outside it; checkpoints fingerprint the raw
        rows). Its budget and row bound: :attr:`privacy_mode`."""
        unusable = [
            ("--cv", self.cv is not None),
            ("--checkpoint", self.checkpoint is not None),
            ("--resume", self.resume is not None),
            # the record mode's theta step is its own, of fixed work (record.fixed_work)
            ("--theta-rtol", self.theta_rtol != _ADMM.theta_rtol),
        ]
        for option, given in unusable:
            if given:
                raise ConfigError(f"{option} does not apply with --privacy record")

    def _validate_record_limits(self) -> None:
        """--privacy record: the largest budget the job's releases can take (beyond it the
        held-out accuracy's count would go without noise). The row bound's: the mode's."""
        epsilon = self.privacy_mode.epsilon
        if not epsilon <= MAX_COUNT_EPSILON:
            raise ConfigError(
                f"--epsilon must be at most {MAX_COUNT_EPSILON:g} with --privacy record (a "
                f"larger budget leaves the held-out accuracy's noisy count without noise), "
                f"got {epsilon:g}"
            )

    def _validate_cv(self) -> None:
        """--cv and its options (the rows per machine are checked once the data are split)."""
        if self.cv is None:
            cv_only = (
                (self.lam_grid is not None, "--lam-grid"),
                (self.cv_plot is not None, "--cv-plot"),
                (self.n_lambdas != DEFAULT_PATH.n_lambdas, "--n-lambdas"),
                (self.lambda_ratio != DEFAULT_PATH.ratio, "--lambda-ratio"),
                (self.cv_rule != DEFAULT_PATH.rule, "--cv-rule"),
            )
            for given, option in cv_only:
                if given:
                    raise ConfigError(f"{option} needs --cv K")
            return
        if self.cv < 2:
            raise ConfigError(f"--cv must be >= 2 folds, got {self.cv}")
        if self.checkpoint or self.resume:
            raise ConfigError("--cv cannot be combined with --checkpoint or --resume")
        if self.lam_grid is not None:
            check_grid(self.lam_grid)
        if not 2 <= self.n_lambdas <= 1000:
            raise ConfigError(f"--n-lambdas must lie in [2, 1000], got {self.n_lambdas}")
        if not 0 < self.lambda_ratio < 1:
            raise ConfigError(f"--lambda-ratio must lie in (0, 1), got {self.lambda_ratio}")

    def as_dict(self) -> dict:
        out = asdict(self)
        epsilon = self.privacy_mode.epsilon  # as asked, the default filled in
        out["epsilon"] = None if math.isinf(epsilon) else epsilon  # None: inf (JSON has none)
        if self.budget_cap is not None:  # strict JSON: inf as "inf", as the ledger writes it
            out["budget_cap"] = [c if math.isfinite(c) else str(c) for c in self.budget_cap]
        return out


BASELINES = ("median", "rdp-admm")
MAX_MACHINES = 100_000
MAX_PEER_TIMEOUT = 86_400.0  # a day: beyond, a hung job would look alive for ever
MAX_ROWS = 10**8  # synthetic rows: beyond this the data would not fit in memory


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage wall
        if message.endswith("expected one argument"):  # argparse takes '-1,1' for an option
            flag = message.removeprefix("argument ").split(":", 1)[0]
            message += f" (a value that starts with '-' goes after '=': {flag}=-VALUE)"
        raise ConfigError(message)


class _HelpFormatter(argparse.HelpFormatter):
    """Each option's default, once: appended unless its help already says it, or the default
    is nothing to show (None, a flag's False, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        nothing = action.default in (None, False, True, ()) or action.default == argparse.SUPPRESS
        if not nothing and "default" not in text and action.option_strings:
            text += " (default: %(default)s)"
        return text


def build_parser() -> argparse.ArgumentParser:
    """The CLI, generated from RunConfig's fields (defaults, help, groups, types)."""
    p = _Parser(
        prog="python -m dpnet.run",
        description="Decentralized, differentially private group-lasso logistic regression: "
        "every MPI rank is one machine of a graph; it privatizes its own shard (randomized "
        "response on its labels, or with --privacy record Gaussian noise on every theta it "
        "sends) and talks only to its graph neighbours.",
        formatter_class=_HelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"dpnet {__version__}")
    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in fields(RunConfig):
        meta = dict(f.metadata)
        group = groups.setdefault(meta.pop("group"), p.add_argument_group(f.metadata["group"]))
        flag = meta.pop("flag", "--" + f.name.replace("_", "-"))
        group.add_argument(flag, dest=f.name, default=f.default, **meta)
    return p


def parse_config(argv: list[str] | None = None) -> RunConfig:
    """Parse and validate command-line arguments; ConfigError with one line on bad input."""
    return RunConfig(**vars(build_parser().parse_args(argv))).validate()
