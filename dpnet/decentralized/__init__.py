"""Decentralized group-lasso logistic ADMM: pure-numpy steps and the round loop."""
