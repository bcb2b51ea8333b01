#!/usr/bin/env bash
# Run dpnet across several hosts over ssh: launch/cluster.sh HOSTFILE [-n N] [dpnet.run options]
#
# HOSTFILE is MPICH hydra's format (see hostfile.example): one "host" or "host:slots" per line
# (given to Open MPI's mpiexec as --host host:slots,...).
# N defaults to the total number of slots. Requirements on every host: passwordless ssh from
# this one, the same venv path ($DPNET_VENV or the active $VIRTUAL_ENV) with dpnet installed,
# the same data paths, and TCP reachability between all hosts (hydra's proxies connect back to
# this host; MPI traffic goes host to host). Rank r runs on the r-th slot in file order.
set -euo pipefail

usage="usage: launch/cluster.sh HOSTFILE [-n N] [dpnet.run options ...]"
hostfile="${1:?$usage}"
shift
if [[ ! -f "$hostfile" ]]; then
    echo "cluster.sh: hostfile $hostfile does not exist" >&2
    exit 2
fi

venv="${DPNET_VENV:-${VIRTUAL_ENV:-}}"
if [[ -z "$venv" || ! -x "$venv/bin/mpiexec" ]]; then
    echo "cluster.sh: activate the dpnet venv or set DPNET_VENV (same path on every host)" >&2
    exit 2
fi

# total slots: "host:k" counts k, a bare "host" counts 1; '#' starts a comment
slots=$(sed -e 's/#.*//' "$hostfile" | awk 'NF { n = split($1, a, ":"); s += (n > 1 ? a[2] : 1) } END { print s + 0 }')
np="$slots"
if [[ "${1:-}" == "-n" ]]; then
    np="${2:?cluster.sh: -n needs a number}"
    shift 2
fi
if (( np < 1 )); then
    echo "cluster.sh: hostfile $hostfile lists no hosts" >&2
    exit 2
fi

# Open MPI's launcher ends the job itself when a host's daemon is lost
if "$venv/bin/mpiexec" --version 2>&1 | grep -q "Open MPI"; then
    hosts=$(sed -e 's/#.*//' "$hostfile" | awk 'NF { n = split($1, a, ":"); printf "%s%s:%s", sep, a[1], (n > 1 ? a[2] : 1); sep = "," }')
    exec "$venv/bin/mpiexec" --host "$hosts" -n "$np" "$venv/bin/python" -m mpi4py -m dpnet.run "$@"
fi
# MPICH: watched-mpiexec.sh: mpiexec, stopped (exit code 5) when it would wait for ever for a host
# whose link died or a rank that stalled (the ranks themselves stop by --peer-timeout)
here="$(dirname "$(readlink -f "$0")")"
PATH="$venv/bin:$PATH" exec "$here/watched-mpiexec.sh" -launcher ssh -f "$hostfile" -n "$np" \
    "$venv/bin/python" -m mpi4py -m dpnet.run "$@"
