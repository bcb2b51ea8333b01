"""Rényi-DP ADMM for L1-regularised classification (Chen & Lee, arXiv 1909.08180) and the
methods it is compared with.

Modules: :mod:`.gradient` (ssADMM, DP-SGD), :mod:`.model` (mpADMM), :mod:`.comparators`
(DP-ADMM, ADMM-objP), :mod:`.common` (shared steps and the scikit-learn base class),
:mod:`.privacy` (accounting of each method, on :mod:`dpnet.privacy`), :mod:`.data` (the
paper's synthetic design), :mod:`.experiment` (settings and the rank-0 run).
"""

from dpnet.baselines.rdp_admm.comparators import ADMMObjPClassifier, DPADMMClassifier
from dpnet.baselines.rdp_admm.experiment import (
    COVERAGE_KS,
    ESTABLISHED_METHODS,
    TUNED_SETTINGS,
    fit_rdp_admm_on_rows,
    make_estimators,
    method_seeds,
    run_rdp_admm_baselines,
)
from dpnet.baselines.rdp_admm.gradient import DPSGDClassifier, SSADMMClassifier
from dpnet.baselines.rdp_admm.model import MPADMMClassifier

__all__ = [
    "COVERAGE_KS",
    "ESTABLISHED_METHODS",
    "TUNED_SETTINGS",
    "ADMMObjPClassifier",
    "DPADMMClassifier",
    "DPSGDClassifier",
    "MPADMMClassifier",
    "SSADMMClassifier",
    "fit_rdp_admm_on_rows",
    "make_estimators",
    "method_seeds",
    "run_rdp_admm_baselines",
]
