r"""Convex losses of the margin m = y z (labels y in {-1, +1}) behind one small interface.

A solver asks a :class:`MarginLoss` for the elementwise value l(m), derivative l'(m) and
curvature l''(m), for ``curvature_bound`` c = sup_m l''(m) (step sizes) and for
``lipschitz_bound`` L = sup_m |l'(m)| (sensitivities):

- :class:`Logistic`: l(m) = log(1 + e^{-m}), l' = -sigma(-m), l'' = sigma(m) sigma(-m) <= 1/4,
  L = 1.
- :class:`UnbiasedLogistic` (Natarajan et al. 2013) for labels that randomized response kept
  with probability p in (1/2, 1]:  l_p(m) = [p l(m) - (1 - p) l(-m)] / (2p - 1), so that
  E_flip l_p = p l_p(m) + (1 - p) l_p(-m) = l(m); l_p' = -[p sigma(-m) + (1 - p) sigma(m)]/(2p - 1)
  and, as l''(m) = l''(-m), l_p'' = l'' >= 0: the corrected loss stays convex, c = 1/4;
  |l_p'| <= max(p, 1 - p)/(2p - 1) = p/(2p - 1) = L (sigma(-m) + sigma(m) = 1).
- :class:`HuberizedHinge` of width h > 0 (:mod:`dpnet.losses.huberized_hinge`): c = 1/(2h),
  L = 1.

The losses are frozen dataclasses: equal parameters give equal, hashable losses.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from dpnet.errors import ConfigError
from dpnet.losses.huberized_hinge import (
    check_width,
    huberized_hinge_d2loss,
    huberized_hinge_dloss,
    huberized_hinge_loss,
)
from dpnet.losses.logistic import (
    logistic_d2loss,
    logistic_derivatives,
    logistic_dloss,
    logistic_loss,
    logistic_loss_and_sigmoid,
)


class MarginLoss(ABC):
    """A convex loss of the margin: value, derivative and curvature in m, and sup l''."""

    @abstractmethod
    def value(self, m: np.ndarray) -> np.ndarray:
        """Elementwise l(m)."""

    @abstractmethod
    def derivative(self, m: np.ndarray) -> np.ndarray:
        """Elementwise l'(m)."""

    @abstractmethod
    def curvature(self, m: np.ndarray) -> np.ndarray:
        """Elementwise l''(m) >= 0."""

    def derivatives(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(l'(m), l''(m)) together: a Newton iteration needs both (the logistic losses share
        one exponential between them)."""
        return self.derivative(m), self.curvature(m)

    def value_and_derivative(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(l(m), l'(m)) together, each bitwise what :meth:`value` and :meth:`derivative`
        give: a line search's accepted point needs its gradient next."""
        return self.value(m), self.derivative(m)

    @property
    @abstractmethod
    def curvature_bound(self) -> float:
        """c = sup_m l''(m)."""

    @property
    @abstractmethod
    def lipschitz_bound(self) -> float:
        """L = sup_m |l'(m)|."""


@dataclass(frozen=True)
class Logistic(MarginLoss):
    """l(m) = log(1 + e^{-m})."""

    def value(self, m: np.ndarray) -> np.ndarray:
        return logistic_loss(m)

    def derivative(self, m: np.ndarray) -> np.ndarray:
        return logistic_dloss(m)

    def curvature(self, m: np.ndarray) -> np.ndarray:
        return logistic_d2loss(m)

    def derivatives(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s, curvature = logistic_derivatives(m)
        return -s, curvature

    def value_and_derivative(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        value, s = logistic_loss_and_sigmoid(m)
        return value, -s

    @property
    def curvature_bound(self) -> float:
        return 0.25

    @property
    def lipschitz_bound(self) -> float:
        return 1.0


@dataclass(frozen=True)
class UnbiasedLogistic(MarginLoss):
    """l_p(m) = [p l(m) - (1 - p) l(-m)] / (2p - 1), p = ``keep_prob`` in (1/2, 1]."""

    keep_prob: float

    def __post_init__(self) -> None:
        if not 0.5 < self.keep_prob <= 1.0:
            raise ConfigError(f"keep_prob must lie in (0.5, 1], got {self.keep_prob}")

    def value(self, m: np.ndarray) -> np.ndarray:
        return self._from_logistic(logistic_loss(m), m)

    def _from_logistic(self, value: np.ndarray, m: np.ndarray) -> np.ndarray:
        """l_p(m) from l(m): as l(-m) = l(m) + m, l_p(m) = l(m) - m (1 - p)/(2p - 1) (l
        itself for p = 1, also at m = +-inf)."""
        p = self.keep_prob
        return value if p == 1.0 else value - ((1 - p) / (2 * p - 1)) * m

    def derivative(self, m: np.ndarray) -> np.ndarray:
        return self._from_sigmoid(-logistic_dloss(m))

    def value_and_derivative(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        value, s = logistic_loss_and_sigmoid(m)
        return self._from_logistic(value, m), self._from_sigmoid(s)

    def _from_sigmoid(self, s: np.ndarray) -> np.ndarray:
        """l_p'(m) from s = sigma(-m)."""
        p = self.keep_prob
        return -(p * s + (1 - p) * (1 - s)) / (2 * p - 1)

    def curvature(self, m: np.ndarray) -> np.ndarray:
        return logistic_d2loss(m)

    def derivatives(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s, curvature = logistic_derivatives(m)
        return self._from_sigmoid(s), curvature

    @property
    def curvature_bound(self) -> float:
        return 0.25

    @property
    def lipschitz_bound(self) -> float:
        return self.keep_prob / (2.0 * self.keep_prob - 1.0)


@dataclass(frozen=True)
class HuberizedHinge(MarginLoss):
    """Huberized hinge of width ``h`` > 0: 1 - m, (1 + h - m)^2 / (4h) or 0."""

    h: float = 0.5

    def __post_init__(self) -> None:
        check_width(self.h)

    def value(self, m: np.ndarray) -> np.ndarray:
        return huberized_hinge_loss(m, self.h)

    def derivative(self, m: np.ndarray) -> np.ndarray:
        return huberized_hinge_dloss(m, self.h)

    def curvature(self, m: np.ndarray) -> np.ndarray:
        return huberized_hinge_d2loss(m, self.h)

    @property
    def curvature_bound(self) -> float:
        return 1.0 / (2.0 * self.h)

    @property
    def lipschitz_bound(self) -> float:
        return 1.0
