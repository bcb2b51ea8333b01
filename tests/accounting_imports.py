"""Test hook: ``mpiexec -n J python -m tests.accounting_imports ARGS`` runs the main job, then
every rank prints whether it imported dp-accounting (only rank 0 builds the ledger; the
import costs every other rank ~0.6 s of CPU at start-up)."""

from __future__ import annotations

import sys

from dpnet import run


def main(argv: list[str] | None = None) -> int:
    code = run.main(argv)
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.rank
    print(f"rank {rank} imported dp_accounting: {'dp_accounting' in sys.modules}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
