#!/usr/bin/env bash
# Run dpnet on this machine: launch/local.sh [-n N] [dpnet.run options ...]
#
# Uses the mpiexec (MPICH hydra, from the `mpich` wheel) and the python of one virtual
# environment: $DPNET_VENV if set, else the active $VIRTUAL_ENV. N defaults to $DPNET_NP or 5.
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

exec "$venv/bin/mpiexec" -n "$np" "$venv/bin/python" -m mpi4py -m dpnet.run "$@"
