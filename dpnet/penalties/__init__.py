"""Penalties and their proximal operators (L1, ridge, group L2)."""
