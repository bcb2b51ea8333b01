"""Test hook: ``mpiexec -n J python -m tests.accounting_imports ARGS`` runs the main job, then
every rank prints whether it imported dp-accounting (only rank 0 builds the ledger; the
import costs every other rank ~0.5 s of CPU at start-up) and scipy.optimize (only the
calibrations and cross-validation call it: ~0.14 s)."""

from __future__ import annotations

import sys

from dpnet import run

LAZY = ("dp_accounting", "scipy.optimize")


def main(argv: list[str] | None = None) -> int:
    code = run.main(argv)
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.rank
    for module in LAZY:
        print(f"rank {rank} imported {module}: {module in sys.modules}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
