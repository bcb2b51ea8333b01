"""Helpers shared by the tests (tests/) and the benchmarks (benchmarks/), which import from
here and never from each other. Not part of the installed package (pyproject.toml installs
``dpnet`` and its subpackages only); run from the repository root, like tests and benchmarks.

- ``reference``: the centralized group-lasso logistic objective and its optimum (skglm, scipy)
- ``record_attack``: the record-privacy attacker's likelihood ratio on the theta release
- ``flop_count``: counting the flops of the theta step's products, factorizations and solves
- ``audit``: empirical privacy audits (Monte Carlo lower bound on epsilon, sensitivity search)
- ``surfaces``: the inventory of everything the main job prints, writes and sends
- ``results``: where the benchmarks write their reports (benchmarks/out/, docs/ on request)
"""
