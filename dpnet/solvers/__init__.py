"""Centralized single-process solvers (rank-0 baselines). Never import dpnet.network."""
