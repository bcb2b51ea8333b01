#!/usr/bin/env bash
# Entrypoint of the dpnet image (and of launch/netns-demo.sh's hosts).
#   worker                 run sshd in the foreground (hydra starts the ranks over ssh)
#   launcher [options]     wait until every other host of $DPNET_HOSTFILE accepts ssh (at
#                          most $DPNET_WAIT_SECONDS seconds in all), then run all ranks:
#                          mpiexec -f hostfile -n $DPNET_NP python -m mpi4py -m dpnet.run
#                          --output $DPNET_OUTPUT [--peer-timeout $DPNET_PEER_TIMEOUT] [options]
#                          and exit with its exit code
#   anything else          exec'd as a command (e.g. `python -m dpnet.run --help`)
#
# Environment:
#   DPNET_HOSTFILE       hydra hostfile                        default /etc/dpnet/hostfile
#   DPNET_NP             number of ranks                       default 5
#   DPNET_OUTPUT         results file (written by rank 0)      default /results/result.json
#   DPNET_WAIT_SECONDS   deadline for the hosts' ssh, seconds  default 60
#   DPNET_PEER_TIMEOUT   passed as --peer-timeout if set (a machine that hears nothing from a
#                        neighbour for that long stops the job, exit code 5)
#   MPIEXEC_TIMEOUT      the job's deadline in whole seconds (unset = none): a job still
#                        running at it is stopped, exit code 124 (see watched-mpiexec.sh)
#   DPNET_RESULTS_UID    uid[:gid] that gets the results directory and file after the run
#   DPNET_SSHD_CONFIG    sshd configuration file               default /etc/ssh/sshd_config
#   DPNET_SSH            ssh client command (hydra's -launcher-exec too)   default ssh
#   DPNET_LOST_HOST_GRACE  seconds mpiexec may wait with no child process left (a host whose
#                        link died) before it is stopped, exit code 5        default 3
#                        (see watched-mpiexec.sh)
# Results are created with umask 022: readable by everyone who can read the directory.
# SIGINT and SIGTERM to this script (Ctrl-C, `docker stop`, `docker kill -s INT`) go to the job
# as they came: every machine stops at its next exchange, exit code 130 / 143, nothing written.
set -euo pipefail

hostfile="${DPNET_HOSTFILE:-/etc/dpnet/hostfile}"
np="${DPNET_NP:-5}"
output="${DPNET_OUTPUT:-/results/result.json}"
wait_seconds="${DPNET_WAIT_SECONDS:-60}"
sshd_config="${DPNET_SSHD_CONFIG:-/etc/ssh/sshd_config}"
ssh_cmd="${DPNET_SSH:-ssh}"
here="$(dirname "$(readlink -f "$0")")"
# next to this script in a checkout; installed beside it as dpnet-watched-mpiexec in the image
watched_mpiexec="$here/watched-mpiexec.sh"
[[ -x "$watched_mpiexec" ]] || watched_mpiexec="$here/dpnet-watched-mpiexec"
umask 022

# wait_for_hosts: every host of the hostfile but this one accepts ssh, within wait_seconds
wait_for_hosts() {
    local deadline=$((SECONDS + wait_seconds)) me host left
    local -a hosts
    me=$(hostname)
    mapfile -t hosts < <(sed -e 's/#.*//' "$hostfile" | awk 'NF { split($1, a, ":"); print a[1] }' | sort -u)
    for host in "${hosts[@]}"; do
        # rank 0's host: hydra starts its ranks without ssh
        [[ "$host" != "$me" && "$host" != "localhost" ]] || continue
        while true; do
            left=$((deadline - SECONDS))
            if ((left <= 0)); then
                echo "entrypoint: host $host accepts no ssh after ${wait_seconds}s" >&2
                exit 1
            fi
            if "$ssh_cmd" -o BatchMode=yes -o ConnectTimeout=$((left < 2 ? left : 2)) \
                "$host" true 2>/dev/null; then
                break
            fi
            sleep 1
        done
    done
}

case "${1:-worker}" in
worker)
    mkdir -p /run/sshd
    exec /usr/sbin/sshd -D -e -f "$sshd_config"
    ;;
launcher)
    shift
    wait_for_hosts
    mkdir -p "$(dirname "$output")"
    peer=()
    if [[ -n "${DPNET_PEER_TIMEOUT:-}" ]]; then
        peer=(--peer-timeout "$DPNET_PEER_TIMEOUT")
    fi
    # In the background, so that this shell (PID 1 in a container) can pass SIGINT / SIGTERM on
    # and give the results to DPNET_RESULTS_UID afterwards; watched-mpiexec.sh stops an mpiexec
    # that waits for a lost host or rank (exit code 5) or runs past MPIEXEC_TIMEOUT (124).
    # A background job of a script starts with SIGINT ignored, and a bash started so cannot
    # trap it: env gives it the default back.
    restore=()
    if env --default-signal=INT true 2>/dev/null; then restore=(env --default-signal=INT); fi
    "${restore[@]}" "$watched_mpiexec" -launcher ssh -launcher-exec "$ssh_cmd" \
        -f "$hostfile" -n "$np" \
        python -m mpi4py -m dpnet.run --output "$output" "${peer[@]}" "$@" &
    job=$!
    trap 'kill -INT "$job" 2>/dev/null || true' INT
    trap 'kill -TERM "$job" 2>/dev/null || true' TERM
    status=0
    while true; do # a trapped signal interrupts wait: wait again until the job has ended
        wait "$job" && status=0 || status=$?
        kill -0 "$job" 2>/dev/null || break
    done
    if [[ -n "${DPNET_RESULTS_UID:-}" ]]; then
        chown "$DPNET_RESULTS_UID" "$(dirname "$output")"
        [[ ! -e "$output" ]] || chown "$DPNET_RESULTS_UID" "$output"
    fi
    exit "$status"
    ;;
*)
    exec "$@"
    ;;
esac
