"""Synthetic generators, loaders for user and real data sets, and row partitioning."""
