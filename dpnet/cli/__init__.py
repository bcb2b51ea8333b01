"""The command-line job (``python -m dpnet.run``): options, set-up, every machine's work,
rank 0's release and report.

A layer above the library: it imports dpnet's subpackages (decentralized, network, privacy,
data, losses, penalties, baselines), which never import it. The entry point is
:mod:`dpnet.run`, which loads nothing heavy before its signal handlers are in place; names are
loaded lazily from the modules here, so importing one of them stays as cheap as before:

- ``command``: the command line's ``main``: parse the options, pick the backend, end the job
- ``config``: parsing and validation of the options (no MPI, no data)
- ``pipeline``: the job, written once for every backend
- ``setup``: data, shards, held-out rows; ``job``: a block of machines' work; ``simulation``:
  the simulated backend's memory check; ``checkpoint``: ``--checkpoint`` / ``--resume``
- ``release``, ``report``, ``evaluation``, ``oracle``, ``plots``, ``provenance``: rank 0's
  release, results file, summary, test accuracy, oracle file, figures, run provenance
"""

from __future__ import annotations

from dpnet._lazy import lazy_names

_LAZY = {
    "main": "command",
    "RunConfig": "config",
    "build_parser": "config",
    "parse_config": "config",
    "prepare_problem": "setup",
    "admm_config": "job",
    "process_job": "pipeline",
    "Checkpointer": "checkpoint",
    "EvaluationSet": "evaluation",
    "accuracy_estimate": "evaluation",
    "ProgressPrinter": "report",
}

__all__ = list(_LAZY)


__getattr__ = lazy_names(__name__, _LAZY)
