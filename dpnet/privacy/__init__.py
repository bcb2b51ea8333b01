"""Privacy core: mechanisms, DP events, the per-run ledger, RDP/PLD accounting, clipping.

Names are loaded lazily from the submodules (see docs/privacy.md).
"""

from __future__ import annotations

from dpnet._lazy import lazy_names

_LAZY = {
    "laplace_mechanism": "mechanisms",
    "gaussian_mechanism": "mechanisms",
    "gaussian_sigma": "gaussian",
    "composed_gaussian_multiplier": "gaussian",
    "randomized_response": "mechanisms",
    "kary_randomized_response": "mechanisms",
    "keep_prob_from_epsilon": "binary_rr",
    "epsilon_from_keep_prob": "binary_rr",
    "objective_perturbation_noise": "mechanisms",
    "PureDpEvent": "events",
    "PrivacyLedger": "ledger",
    "BudgetAccountant": "budget",
    "BudgetExceeded": "budget",
    "default_accountant": "budget",
    "BudgetFileAccountant": "budget_file",
    "DEFAULT_ORDERS": "rdp",
    "rdp_poisson_gaussian": "rdp",
    "rdp_fixed_size_gaussian": "rdp",
    "rdp_to_epsilon": "rdp",
    "epsilon_for": "rdp",
    "calibrate_noise_multiplier": "rdp",
    "sampled_gaussian_event": "rdp",
    "clip_rows_l2": "clipping",
    "clip_values": "clipping",
    "clip_per_example": "clipping",
    "check_row_norms": "clipping",
    "PrivacyLeakWarning": "leaks",
    "LabelPrivacy": "modes",
    "RecordPrivacy": "modes",
    "privacy_mode": "modes",
    "flip_labels": "binary_rr",
    "charge": "budget",
    "composed_gaussian_delta": "gaussian",
    "randomized_response_event": "mechanisms",
    "DEFAULT_DELTA": "modes",
}

__all__ = list(_LAZY)


__getattr__ = lazy_names(__name__, _LAZY)
