"""The privacy modes of the decentralized fit as objects, one place for each rule.

The command line (:class:`dpnet.cli.config.RunConfig`) and the estimator
(:class:`dpnet.estimators.DecentralizedGroupLassoLogistic`) each turn their settings into a
:class:`LabelPrivacy` or a :class:`RecordPrivacy` with :func:`privacy_mode`, which checks them
once; every rule of a mode — its defaults, what it refuses, the randomized-response keep
probability, whether the penalty may adapt, what a fit spends, the words of its guarantee —
is read from the object, never re-derived by a front door. Errors name a setting as the front
door spells it (:class:`Spelling`). The proofs: docs/privacy.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from dpnet.errors import ConfigError
from dpnet.privacy.binary_rr import (
    MAX_FINITE_EPSILON,
    epsilon_from_keep_prob,
    keep_prob_from_epsilon,
)

DEFAULT_EPSILON = 1.0
"""The budget of a fit that names none, under either mode (per machine): label privacy at
epsilon = 1 by default, as diffprivlib's; epsilon = inf (no privacy) only when asked for."""
DEFAULT_DELTA = 1e-5
MAX_ROW_BOUND = 1e100
"""The largest row bound R (as features, :data:`dpnet.data.dataset.MAX_ABS_FEATURE`): R~^2 =
R^2 + 1 enters the theta step's work count and leaves the float64 range from R ~ 1.3e154 on; a
noise standard deviation proportional to R that large is unusable anyway."""
LABEL_GUARANTEE = "epsilon-label-DP per machine (replace one label); features are NOT protected"
NOT_PRIVATE = "not private (epsilon inf): labels used as given"
"""The guarantee of a label-mode fit asked for epsilon = inf: none (every surface says so)."""
RECORD_GUARANTEE = "(epsilon, delta)-DP against every other machine, colluding or not"
RECORD_DISTANCE = (
    "the same (epsilon, delta) against every other machine, near or far in the graph: no "
    "discount for distance is claimed (a neighbour's Z carries a sum of released thetas, and "
    "the stop statistics and the final gather reach every machine)"
)
STANDARDIZE_SHARE = 0.1
"""Under record privacy with standardization, the share of the budget the released column sums
take, measured in the Gaussian differential privacy of the whole fit: the fit is mu-GDP with
mu = 1 / s_1(epsilon, delta) (one Gaussian release of multiplier s_1 is exactly (epsilon,
delta)-DP), the two column releases get mu_c^2 = STANDARDIZE_SHARE mu^2 and the theta releases
the rest, (1 - STANDARDIZE_SHARE) mu^2. GDP composes by adding mu^2, so the whole fit stays
exactly (epsilon, delta)-DP: the share costs the thetas a factor 1 / sqrt(0.9) = 1.054 on their
noise (docs/privacy.md, "Standardization under record privacy")."""
RECORD_WORK = (
    "every round's theta step is a public number of gradient steps: the same operations for "
    "every data set"
)


@dataclass(frozen=True)
class Spelling:
    """How a front door names the modes' settings in its one-line errors."""

    record: str
    epsilon: str
    delta: str
    row_bound: str
    keep_prob: str
    theta_solver: str
    standardize: str


CLI = Spelling(
    "--privacy record",
    "--epsilon",
    "--delta",
    "--row-bound",
    "--keep-prob",
    "--theta-solver",
    "--standardize",
)
ESTIMATOR = Spelling(
    "privacy='record'",
    "epsilon",
    "delta",
    "row_bound",
    "keep_prob",
    "theta_solver",
    "standardize=True",
)


def _check_keep_prob(keep_prob: float | None, spelling: Spelling) -> None:
    if keep_prob is not None and not 0.5 < keep_prob < 1.0:
        raise ConfigError(f"{spelling.keep_prob} must lie in (0.5, 1), got {keep_prob}")


@dataclass(frozen=True)
class LabelPrivacy:
    """Randomized response on every machine's labels with budget ``epsilon`` (default
    :data:`DEFAULT_EPSILON`; inf: none, not private), or the given keep probability
    ``keep_prob``: epsilon-label-DP per machine under replacing one label; the features are not
    protected. The machines may adapt the penalty c (residual
    balancing reads released statistics only)."""

    epsilon: float = DEFAULT_EPSILON
    keep_prob: float | None = None
    name: ClassVar[str] = "label"
    features_public: ClassVar[bool] = True
    """The features are public inputs: the machines may pool facts of them (centred columns,
    the start's curvature) and score held-out rows on them directly."""
    releases_objective: ClassVar[bool] = True
    """The fit's objective, which reads the rows, is released."""
    noisy_thetas: ClassVar[bool] = False
    """Every theta a machine sends carries noise spread over the rounds: the rounds are the
    budget (stopping at them is expected), with the defaults of
    :func:`dpnet.decentralized.admm.mode_defaults`."""
    fixed_work_theta: ClassVar[bool] = False
    """The theta step is the mode's own, of fixed work: no theta solver may be chosen."""
    takes_delta: ClassVar[bool] = False
    """The budget is (epsilon, delta), not epsilon alone."""
    row_bound: ClassVar[None] = None  # no row is scaled
    adapts_penalty: ClassVar[bool] = True
    protects: ClassVar[str] = "labels"
    neighbours: ClassVar[str] = "replace one label (replace-one), within one machine's shard"

    @classmethod
    def of(
        cls,
        epsilon: float | None,
        delta: float | None,
        row_bound: float | None,
        keep_prob: float | None,
        spelling: Spelling,
        *,
        standardize: bool = False,
    ) -> LabelPrivacy:
        """The checked mode of these settings; a given ``delta`` or ``row_bound`` refused.
        ``epsilon`` None (not given): :data:`DEFAULT_EPSILON`, unless ``keep_prob`` names the
        budget instead. ``standardize`` costs nothing here (the features are public)."""
        for name, given in ((spelling.delta, delta), (spelling.row_bound, row_bound)):
            if given is not None:
                raise ConfigError(f"{name} applies to {spelling.record} only")
        if epsilon is None:
            epsilon = DEFAULT_EPSILON if keep_prob is None else math.inf
        return cls(epsilon, keep_prob).check(spelling)

    def check(self, spelling: Spelling) -> LabelPrivacy:
        """``self``, or ConfigError naming the first setting the mode cannot take."""
        if self.keep_prob is not None and not math.isinf(self.epsilon):
            raise ConfigError(f"give either {spelling.epsilon} or {spelling.keep_prob}, not both")
        if not self.epsilon > 0:
            raise ConfigError(
                f"{spelling.epsilon} must be > 0 (inf for no privacy), got {self.epsilon}"
            )
        if not math.isinf(self.epsilon) and not self.epsilon < MAX_FINITE_EPSILON:
            raise ConfigError(
                f"{spelling.epsilon} {self.epsilon:g} is so large that the keep probability "
                f"e^eps/(1+e^eps) rounds to 1 (no label is ever flipped): use inf for no "
                f"privacy, or an epsilon below {MAX_FINITE_EPSILON:g}"
            )
        _check_keep_prob(self.keep_prob, spelling)
        return self

    @property
    def keep_probability(self) -> float:
        """p of randomized response: the given one, or e^eps / (1 + e^eps); 1 at eps = inf."""
        if self.keep_prob is not None:
            return self.keep_prob
        if math.isinf(self.epsilon) or not self.epsilon < MAX_FINITE_EPSILON:
            return 1.0  # the second refused by check()
        return keep_prob_from_epsilon(self.epsilon)

    @property
    def label_epsilon(self) -> float:
        """What randomized response with :attr:`keep_probability` spends (inf at p = 1)."""
        return epsilon_from_keep_prob(self.keep_probability)

    @property
    def private(self) -> bool:
        """Whether any label is randomized (False: epsilon = inf, asked for explicitly)."""
        return self.keep_probability < 1.0

    @property
    def guarantee(self) -> str:
        """The words of the guarantee: :data:`LABEL_GUARANTEE`, or :data:`NOT_PRIVATE`."""
        return LABEL_GUARANTEE if self.private else NOT_PRIVATE

    def spend(self) -> tuple[float, float]:
        """(epsilon, delta) one fit charges an accountant, per machine."""
        return self.label_epsilon, 0.0

    @property
    def guarantee_delta(self) -> float | None:
        """The delta the ledger reports its epsilon at: None (a pure epsilon guarantee)."""
        return None


@dataclass(frozen=True)
class RecordPrivacy:
    """Gaussian noise on every theta a machine sends: (``epsilon``, ``delta``)-DP for a whole
    record against every other machine over a fit's rounds, rows scaled to ``row_bound`` R (a
    public bound, required); ``keep_prob``: randomized response on the labels as well;
    ``standardize``: every machine first releases the noisy sums of its rows' columns and
    squared columns (:func:`dpnet.decentralized.columns.release_column_sums`), from which all
    machines standardize, within the same (epsilon, delta) (:data:`STANDARDIZE_SHARE`). The
    penalty c stays fixed (residual balancing would chase the noise)."""

    epsilon: float
    row_bound: float
    delta: float = DEFAULT_DELTA
    keep_prob: float | None = None
    standardize: bool = False
    name: ClassVar[str] = "record"
    features_public: ClassVar[bool] = False
    releases_objective: ClassVar[bool] = False
    noisy_thetas: ClassVar[bool] = True
    fixed_work_theta: ClassVar[bool] = True
    takes_delta: ClassVar[bool] = True
    adapts_penalty: ClassVar[bool] = False
    guarantee: ClassVar[str] = RECORD_GUARANTEE
    private: ClassVar[bool] = True  # its budget is always finite
    protects: ClassVar[str] = "records (features and label)"
    neighbours: ClassVar[str] = "replace one record (features and label) of one machine's shard"

    @classmethod
    def of(
        cls,
        epsilon: float | None,
        delta: float | None,
        row_bound: float | None,
        keep_prob: float | None,
        spelling: Spelling,
        *,
        standardize: bool = False,
    ) -> RecordPrivacy:
        """The checked mode of these settings; ``epsilon`` or ``delta`` None: the default
        (:data:`DEFAULT_EPSILON`, :data:`DEFAULT_DELTA`); ``row_bound`` required;
        ``standardize``: the machines release noisy column sums first (:data:`STANDARDIZE_SHARE`
        of the budget)."""
        if row_bound is None:
            raise ConfigError(
                f"{spelling.record} needs {spelling.row_bound}: a public bound on every row's "
                f"L2 norm (longer rows are scaled to it); it must not be computed from the data"
            )
        epsilon = DEFAULT_EPSILON if epsilon is None else epsilon
        delta = DEFAULT_DELTA if delta is None else delta
        return cls(epsilon, row_bound, delta, keep_prob, standardize).check(spelling)

    def check(self, spelling: Spelling) -> RecordPrivacy:
        """``self``, or ConfigError naming the first setting the mode cannot take."""
        if not 0 < self.epsilon < math.inf:
            raise ConfigError(
                f"{spelling.record} needs a finite {spelling.epsilon} > 0 (the record budget), "
                f"got {self.epsilon}"
            )
        if not 0 < self.row_bound:
            raise ConfigError(f"{spelling.row_bound} must be finite and > 0, got {self.row_bound}")
        if not self.row_bound <= MAX_ROW_BOUND:
            raise ConfigError(
                f"{spelling.row_bound} must be at most {MAX_ROW_BOUND:g} (its square enters the "
                f"theta step's work count), got {self.row_bound:g}"
            )
        if not 0 < self.delta < 1:
            raise ConfigError(f"{spelling.delta} must lie in (0, 1), got {self.delta}")
        _check_keep_prob(self.keep_prob, spelling)
        return self

    @property
    def keep_probability(self) -> float:
        """p of the labels' randomized response: the given one, else 1 (none)."""
        return 1.0 if self.keep_prob is None else self.keep_prob

    @property
    def label_epsilon(self) -> float:
        """What the labels' randomized response spends (inf at p = 1: none applied)."""
        return epsilon_from_keep_prob(self.keep_probability)

    @property
    def theta_share(self) -> float:
        """The share of the budget's mu^2 (Gaussian DP) the theta releases take: 1, or
        1 - :data:`STANDARDIZE_SHARE` with standardization."""
        return 1.0 - STANDARDIZE_SHARE if self.standardize else 1.0

    def noise_multiplier(self, rounds: int) -> float:
        """The multiplier s of every round's theta release, calibrated so that ``rounds``
        releases take :attr:`theta_share` of the budget's mu^2: s = sqrt(rounds / share) s_1,
        s_1 the multiplier of one exactly (epsilon, delta)-DP Gaussian release
        (:func:`composed_gaussian_multiplier`); without standardization the rounds compose to
        exactly (epsilon, delta)."""
        from dpnet.privacy.gaussian import composed_gaussian_multiplier  # scipy.special: ~0.2 s

        single = composed_gaussian_multiplier(self.epsilon, self.delta, 1)
        return math.sqrt(rounds / self.theta_share) * single

    @property
    def column_noise_multiplier(self) -> float | None:
        """With standardization, the multiplier of each of the two column releases (the
        column sums and the sums of squares, each relative to its own L2 sensitivity):
        m = sqrt(2 / STANDARDIZE_SHARE) s_1, so that the two take STANDARDIZE_SHARE of the
        budget's mu^2 (2 / m^2 = STANDARDIZE_SHARE / s_1^2); None without."""
        if not self.standardize:
            return None
        from dpnet.privacy.gaussian import composed_gaussian_multiplier  # scipy.special: ~0.2 s

        single = composed_gaussian_multiplier(self.epsilon, self.delta, 1)
        return math.sqrt(2.0 / STANDARDIZE_SHARE) * single

    def gdp_mu(self, rounds: int) -> float:
        """mu of the Gaussian DP of a machine's releases over ``rounds`` rounds:
        sqrt(rounds / s^2 + 2 / m^2) (the column releases' term only with standardization),
        1 / s_1(epsilon, delta) up to rounding."""
        mu2 = rounds / self.noise_multiplier(rounds) ** 2
        if self.column_noise_multiplier is not None:
            mu2 += 2.0 / self.column_noise_multiplier**2
        return math.sqrt(mu2)

    def exact_delta(self, rounds: int) -> float:
        """The exact delta at epsilon of a machine's releases over ``rounds`` rounds (the
        closed form of mu-GDP, :meth:`gdp_mu`): delta itself, up to rounding."""
        from dpnet.privacy.gaussian import composed_gaussian_delta  # scipy.special: ~0.2 s

        return composed_gaussian_delta(1.0 / self.gdp_mu(rounds), 1, self.epsilon)

    def spend(self) -> tuple[float, float]:
        """(epsilon, delta) one fit charges an accountant, per machine: every release of the
        fit (the rounds' thetas, and with standardization the column sums) composes to
        exactly this (:meth:`exact_delta`)."""
        return self.epsilon, self.delta

    @property
    def guarantee_delta(self) -> float | None:
        """The delta the ledger reports its epsilon at: the budget's."""
        return self.delta


PrivacyMode = LabelPrivacy | RecordPrivacy
MODES: dict[str, type[LabelPrivacy] | type[RecordPrivacy]] = {
    mode.name: mode for mode in (LabelPrivacy, RecordPrivacy)
}
PRIVACY_MODES = tuple(MODES)  # the modes' names, as the front doors spell them


def mode_class(privacy: str) -> type[LabelPrivacy] | type[RecordPrivacy]:
    """The class of the mode named ``privacy``, whose class attributes say what it does
    before any setting is checked; ConfigError for an unknown name."""
    if privacy not in MODES:
        raise ConfigError(f"unknown privacy mode {privacy!r}; expected one of {PRIVACY_MODES}")
    return MODES[privacy]


def privacy_mode(
    privacy: str,
    *,
    epsilon: float | None,
    delta: float | None,
    row_bound: float | None,
    keep_prob: float | None,
    spelling: Spelling,
    standardize: bool = False,
) -> PrivacyMode:
    """The checked mode ``privacy`` (a name of :data:`PRIVACY_MODES`) of these settings
    (:meth:`LabelPrivacy.of`, :meth:`RecordPrivacy.of`); ``epsilon`` None: the mode's default
    (:data:`DEFAULT_EPSILON`; under label privacy a given ``keep_prob`` names the budget
    instead); ``standardize``: the fit standardizes its columns (under record privacy a
    release of its own, inside the budget)."""
    return mode_class(privacy).of(
        epsilon, delta, row_bound, keep_prob, spelling, standardize=standardize
    )
