"""Single-node baselines hosted by rank 0: DP median regression and Rényi-DP ADMM.

Centralized, single-process code: nothing here imports :mod:`dpnet.network`.
"""
