"""Command-line configuration of the main job: parsing and validation (no MPI, no data)."""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass

from dpnet.data.labels import LabelDomain
from dpnet.errors import ConfigError
from dpnet.network.topology import TOPOLOGY_NAMES
from dpnet.privacy.mechanisms import keep_prob_from_epsilon


@dataclass(frozen=True)
class RunConfig:
    """Everything the main job needs to know; identical on every rank."""

    topology: str = "paper5"
    machines: int = 5
    backend: str = "auto"
    epsilon: float = math.inf
    keep_prob: float | None = None
    loss: str = "logistic"
    lam: float = 0.1
    group_weights: str = "ones"
    c: float = 0.005
    adapt_c: bool = True
    alpha_z: float = 1.0
    theta_solver: str = "newton"
    beta_steps: int = 10
    beta_step_size: float = 0.4
    max_rounds: int = 3000
    tol: float = 1e-9
    max_coef_norm: float = 1e4
    seed: int | None = None
    topology_seed: int = 0
    data: str | None = None
    groups: str | None = None
    labels: str | None = None
    test_data: str | None = None
    test_fraction: float = 0.25
    n_samples: int = 2000
    n_test: int = 1000
    n_groups: int = 16
    label_rule: str = "bernoulli"
    shard_sizes: tuple[int, ...] | None = None
    output: str | None = None
    oracle_output: str | None = None
    plot: str | None = None
    progress_every: int = 50
    baselines: tuple[str, ...] = ()
    quiet: bool = False

    @property
    def keep_probability(self) -> float:
        """p of randomized response: the given one, or e^eps/(1+e^eps); 1 when eps = inf."""
        if self.keep_prob is not None:
            return self.keep_prob
        if math.isinf(self.epsilon):
            return 1.0
        if not self.epsilon < MAX_FINITE_EPSILON:
            return 1.0  # refused by validate()
        return keep_prob_from_epsilon(self.epsilon)

    @property
    def label_epsilon(self) -> float:
        p = self.keep_probability
        return math.inf if p == 1.0 else math.log(p / (1.0 - p))

    def validate(self) -> RunConfig:
        """Return ``self`` or raise ConfigError naming the first invalid option (one line)."""
        if self.keep_prob is not None and not math.isinf(self.epsilon):
            raise ConfigError("give either --epsilon or --keep-prob, not both")
        if not (self.epsilon > 0):
            raise ConfigError(f"--epsilon must be > 0 (inf for no privacy), got {self.epsilon}")
        if not math.isinf(self.epsilon) and not self.epsilon < MAX_FINITE_EPSILON:
            raise ConfigError(
                f"--epsilon {self.epsilon:g} is so large that the keep probability "
                f"e^eps/(1+e^eps) rounds to 1 (no label is ever flipped): use --epsilon inf "
                f"for no privacy, or an epsilon below {MAX_FINITE_EPSILON:g}")
        if self.keep_prob is not None and not (0.5 < self.keep_prob < 1.0):
            raise ConfigError(f"--keep-prob must lie in (0.5, 1), got {self.keep_prob}")
        checks = [
            (0 < self.lam < math.inf, f"--lam must be finite and > 0, got {self.lam}"),
            (0 < self.c < math.inf, f"--c must be finite and > 0, got {self.c}"),
            (0 < self.alpha_z <= 1, f"--alpha-z must lie in (0, 1], got {self.alpha_z}"),
            (self.max_rounds >= 1, f"--max-rounds must be >= 1, got {self.max_rounds}"),
            (0 < self.tol < 1, f"--tol must lie in (0, 1), got {self.tol}"),
            (0 < self.max_coef_norm < math.inf,
             f"--max-coef-norm must be finite and > 0, got {self.max_coef_norm}"),
            (self.seed is None or 0 <= self.seed < 2**63,
             f"--seed must be an integer in [0, 2^63), got {self.seed}"),
            (0 <= self.topology_seed < 2**32,
             f"--topology-seed must be an integer in [0, 2^32), got {self.topology_seed}"),
            (self.machines >= 1, f"--machines must be >= 1, got {self.machines}"),
            (self.n_samples >= 2, f"--n-samples must be >= 2, got {self.n_samples}"),
            (self.n_test >= 0, f"--n-test must be >= 0, got {self.n_test}"),
            (0 <= self.test_fraction < 1, "--test-fraction must lie in [0, 1)"),
            (self.beta_steps >= 1, "--beta-steps must be >= 1"),
            (0 < self.beta_step_size < math.inf, "--beta-step-size must be finite and > 0"),
            (self.progress_every >= 0, "--progress-every must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        if self.shard_sizes is not None and self.data is not None and "{rank}" in self.data:
            raise ConfigError("--shard-sizes does not apply when every machine loads its own "
                              "file ({rank} in --data)")
        LabelDomain.parse(self.labels)
        for name in self.baselines:
            if name not in BASELINES:
                raise ConfigError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
        return self

    def as_dict(self) -> dict:
        out = asdict(self)
        out["epsilon"] = None if math.isinf(self.epsilon) else self.epsilon
        return out


BASELINES = ("median", "rdp-admm")
# from about 36.74 on, e^eps / (1 + e^eps) rounds to 1 in float64: no label would be flipped
MAX_FINITE_EPSILON = 36.7


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage wall
        raise ConfigError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m dpnet.run",
        description="Decentralized, label-private group-lasso logistic regression: every MPI "
        "rank is one machine of a graph; it applies randomized response to its own labels and "
        "talks only to its graph neighbours.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    g = p.add_argument_group("network")
    g.add_argument("--topology", default="paper5",
                   help=f"graph name ({', '.join(TOPOLOGY_NAMES)}) or a graph file")
    g.add_argument("--topology-seed", type=int, default=0, help="seed of random graph families")
    g.add_argument("--backend", choices=("auto", "mpi", "inprocess"), default="auto",
                   help="auto: MPI under mpiexec, otherwise all machines in this process")
    g.add_argument("--machines", type=int, default=5, help="J for the in-process backend")
    g = p.add_argument_group("privacy (randomized response on labels, per machine)")
    g.add_argument("--epsilon", type=float, default=math.inf,
                   help="label-DP budget per machine; inf = no privacy")
    g.add_argument("--keep-prob", type=float, default=None,
                   help="RR keep probability p in (0.5, 1); epsilon = ln(p/(1-p))")
    g.add_argument("--loss", choices=("logistic", "unbiased"), default="logistic",
                   help="unbiased: Natarajan et al. loss corrected for the known flip rate")
    g = p.add_argument_group("model and solver")
    g.add_argument("--lam", type=float, default=0.1, help="lambda in (lambda/2) sum_g w_g||b_g||")
    g.add_argument("--group-weights", choices=("ones", "sqrt-size"), default="ones")
    g.add_argument("--c", type=float, default=0.005, help="ADMM penalty c (initial value)")
    g.add_argument("--no-adapt-c", dest="adapt_c", action="store_false",
                   help="keep c fixed (default: network-wide residual balancing)")
    g.add_argument("--alpha-z", type=float, default=1.0, help="Z step size (1 = exact prox)")
    g.add_argument("--theta-solver", choices=("newton", "gradient"), default="newton")
    g.add_argument("--beta-steps", type=int, default=10, help="U, gradient theta solver only")
    g.add_argument("--beta-step-size", type=float, default=0.4, help="alpha_beta, gradient only")
    g.add_argument("--max-rounds", type=int, default=3000)
    g.add_argument("--tol", type=float, default=1e-9,
                   help="stop when every machine's residual / max(1, ||theta||) is below tol")
    g.add_argument("--max-coef-norm", type=float, default=1e4,
                   help="stop with stop_reason 'diverged' once a machine's ||theta|| exceeds it")
    g = p.add_argument_group("data")
    g.add_argument("--data", default=None,
                   help="npz / csv / libsvm file (default: synthetic); with {rank} in the path "
                   "every machine loads its own file (e.g. 'shards/part-{rank}.npz')")
    g.add_argument("--groups", default=None,
                   help="'size:K', comma-separated ids, or a file with one id per column")
    g.add_argument("--labels", default=None, metavar="NEG,POS",
                   help="the public label domain: the file values meaning -1 and +1 "
                   "(default: -1 or 0 -> -1, 1 -> +1; write --labels=-1,1 when NEG starts "
                   "with '-'); a machine may hold one class only")
    g.add_argument("--test-data", default=None,
                   help="a PUBLIC test file, scored on its labels as given (default: hold out "
                   "--test-fraction of --data, whose labels are randomized like all others)")
    g.add_argument("--test-fraction", type=float, default=0.25)
    g.add_argument("--n-samples", type=int, default=2000, help="synthetic training rows")
    g.add_argument("--n-test", type=int, default=1000, help="synthetic test rows")
    g.add_argument("--n-groups", type=int, default=16, help="synthetic groups (>= 6)")
    g.add_argument("--label-rule", choices=("bernoulli", "threshold"), default="bernoulli")
    g.add_argument("--shard-sizes", default=None, help="comma-separated rows per machine")
    g = p.add_argument_group("run")
    g.add_argument("--seed", type=int, default=None,
                   help="run seed (reproducible; whoever knows it can undo the RR). Default: "
                   "every machine draws its own OS entropy")
    g.add_argument("--output", default=None, help="results JSON file (written by rank 0)")
    g.add_argument("--oracle-output", default=None, metavar="FILE",
                   help="simulation oracles (true-label objective, flip counts, raw-label "
                   "accuracy) to this separate JSON file: NOT covered by the privacy guarantee")
    g.add_argument("--plot", default=None, help="convergence figure (PNG) written by rank 0")
    g.add_argument("--progress-every", type=int, default=50, help="rounds between progress lines")
    g.add_argument("--baselines", default="",
                   help=f"comma-separated rank-0 baselines to run too: {', '.join(BASELINES)}")
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def parse_config(argv: list[str] | None = None) -> RunConfig:
    """Parse and validate command-line arguments; ConfigError with one line on bad input."""
    ns = build_parser().parse_args(argv)
    values = vars(ns)
    if values["shard_sizes"]:
        try:
            values["shard_sizes"] = tuple(int(s) for s in values["shard_sizes"].split(","))
        except ValueError:
            raise ConfigError("--shard-sizes must be comma-separated integers") from None
    values["baselines"] = tuple(b for b in values["baselines"].split(",") if b)
    return RunConfig(**values).validate()
