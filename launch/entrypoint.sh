#!/usr/bin/env bash
# Container entrypoint of the dpnet image.
#   worker                 run sshd in the foreground (hydra starts the ranks over ssh)
#   launcher [options]     start sshd, wait for every host of $DPNET_HOSTFILE to accept ssh,
#                          then run all ranks: mpiexec -f hostfile -n $DPNET_NP python -m
#                          mpi4py -m dpnet.run --output $DPNET_OUTPUT [options]
#   anything else          exec'd as a command (e.g. `python -m dpnet.run --help`)
set -euo pipefail

hostfile="${DPNET_HOSTFILE:-/etc/dpnet/hostfile}"
np="${DPNET_NP:-5}"
output="${DPNET_OUTPUT:-/results/result.json}"
wait_seconds="${DPNET_WAIT_SECONDS:-60}"

case "${1:-worker}" in
worker)
    exec /usr/sbin/sshd -D -e
    ;;
launcher)
    shift
    /usr/sbin/sshd -e
    hosts=$(sed -e 's/#.*//' "$hostfile" | awk 'NF { split($1, a, ":"); print a[1] }' | sort -u)
    for host in $hosts; do
        for ((i = 0; ; i++)); do
            if ssh -o BatchMode=yes -o ConnectTimeout=2 "$host" true 2>/dev/null; then
                break
            fi
            if ((i >= wait_seconds)); then
                echo "entrypoint: host $host accepts no ssh after ${wait_seconds}s" >&2
                exit 1
            fi
            sleep 1
        done
    done
    mkdir -p "$(dirname "$output")"
    exec mpiexec -launcher ssh -f "$hostfile" -n "$np" \
        python -m mpi4py -m dpnet.run --output "$output" "$@"
    ;;
*)
    exec "$@"
    ;;
esac
