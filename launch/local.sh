#!/usr/bin/env bash
# Run dpnet on this machine: launch/local.sh [-n N] [dpnet.run options ...]
#
# Uses the mpiexec and the python of one virtual environment: $DPNET_VENV if set, else the
# active $VIRTUAL_ENV. N defaults to $DPNET_NP or 5. Any MPI: MPICH's hydra (the `mpich` wheel)
# or Open MPI's mpiexec, told --oversubscribe (more ranks than cores is what this is for; as
# root Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).
# Example: launch/local.sh -n 5 --topology paper5 --output run.json (the directory must exist)
set -euo pipefail

venv="${DPNET_VENV:-${VIRTUAL_ENV:-}}"
if [[ -z "$venv" || ! -x "$venv/bin/mpiexec" || ! -x "$venv/bin/python" ]]; then
    echo "local.sh: activate the dpnet venv or set DPNET_VENV (need \$venv/bin/mpiexec and python)" >&2
    exit 2
fi

np="${DPNET_NP:-5}"
if [[ "${1:-}" == "-n" ]]; then
    np="${2:?local.sh: -n needs a number}"
    shift 2
fi

flags=()
if "$venv/bin/mpiexec" --version 2>&1 | grep -q "Open MPI"; then
    flags=(--oversubscribe)
fi
exec "$venv/bin/mpiexec" "${flags[@]}" -n "$np" "$venv/bin/python" -m mpi4py -m dpnet.run "$@"
