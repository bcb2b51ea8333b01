"""DP median regression (Chen, Miao & Tang 2020, corrected): objective perturbation, IRLS with
Laplace output perturbation and greedy coordinate descent.

Modules: :mod:`.regressor` (the estimator and the rank-0 run), :mod:`.algorithms` (the three
private fits), :mod:`.privacy` (calibration and sensitivities), :mod:`.numerics` (non-private
solvers of the smoothed and exact problems).
"""

from dpnet.baselines.median.regressor import (
    METHODS,
    PAPER_PARAMS,
    TRUE_THETA,
    DPMedianRegressor,
    run_median_baselines,
    simulate_median_data,
)

__all__ = [
    "METHODS",
    "PAPER_PARAMS",
    "TRUE_THETA",
    "DPMedianRegressor",
    "run_median_baselines",
    "simulate_median_data",
]
