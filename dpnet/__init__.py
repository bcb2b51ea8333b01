"""dpnet: differentially private regression over a network of data-holding machines.

Importing dpnet never starts MPI: only :mod:`dpnet.network.mpi_comm` imports mpi4py, and
only when an MPI run asks for it. Estimators are loaded lazily on first access.
"""

from __future__ import annotations

import time

from dpnet._lazy import lazy_names

__version__ = "0.1.0"
IMPORTED_AT = time.perf_counter()  # `python -m dpnet.run` times its start-up from here

_LAZY = {
    "DecentralizedGroupLassoLogistic": "dpnet.estimators",
    "DPMedianRegressor": "dpnet.baselines.median",
    "SSADMMClassifier": "dpnet.baselines.rdp_admm",
    "MPADMMClassifier": "dpnet.baselines.rdp_admm",
    "DPSGDClassifier": "dpnet.baselines.rdp_admm",
    "DPADMMClassifier": "dpnet.baselines.rdp_admm",
    "ADMMObjPClassifier": "dpnet.baselines.rdp_admm",
    "PrivacyLedger": "dpnet.privacy.ledger",
}

__all__ = ["__version__", *_LAZY]


__getattr__ = lazy_names(__name__, _LAZY)
