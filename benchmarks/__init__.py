"""The benchmarks of dpnet, one module per experiment, run from the repository root:

    python -m benchmarks.speed_vs_skglm --help
    python -m benchmarks.paper3 --mode quick --data-dir DIR

Shared helpers are in ``benchmarks.common``; the skglm reference optimum comes from
``devtools.reference``. Outputs (CSV, PNG) go to benchmarks/out/, which git ignores.
"""
