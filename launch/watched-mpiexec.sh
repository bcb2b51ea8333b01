#!/usr/bin/env bash
# watched-mpiexec.sh MPIEXEC-ARGS...: run `mpiexec MPIEXEC-ARGS...` and stop it when it waits
# for what cannot come; exit with mpiexec's exit code, or 5 when it had to be stopped.
# Used by entrypoint.sh (the compose demo, launch/netns-demo.sh) and cluster.sh.
#
# hydra's mpiexec can wait forever: for the proxy of a host whose link died (its control
# connection never closes), or for a rank that stalled while its neighbours stopped. Its
# children are the local proxy (rank 0's host) and one ssh client per other host; ssh gives up
# on a silent host (ServerAliveInterval) and every live rank ends within the peer deadline once
# a neighbour is lost (--peer-timeout). So mpiexec is stopped (exit code 5: a machine was lost,
# no estimate) when it has had no child for DPNET_LOST_HOST_GRACE seconds (default 3), or when
# the local ranks ended more than DPNET_PEER_TIMEOUT (default 60, dpnet.run's) + that grace
# seconds ago. Ctrl-C / SIGTERM are forwarded to mpiexec as SIGINT (every machine stops).
set -euo pipefail

lost_grace="${DPNET_LOST_HOST_GRACE:-3}"
peer_timeout="${DPNET_PEER_TIMEOUT:-60}"
peer_timeout=$((${peer_timeout%%.*} + 1)) # whole seconds, rounded up

mpiexec "$@" &
job=$!
trap 'kill -INT "$job" 2>/dev/null || true' INT TERM
ticks=0 # half seconds
idle_since=-1
local_done_since=-1
lost=0
while kill -0 "$job" 2>/dev/null; do
    sleep 0.5
    ticks=$((ticks + 1))
    children=$(cat "/proc/$job/task/$job/children" 2>/dev/null) || continue
    if [[ -z "$children" ]]; then
        ((idle_since >= 0)) || idle_since=$ticks
    else
        idle_since=-1
    fi
    proxy=0
    for child in $children; do
        [[ "$(cat "/proc/$child/comm" 2>/dev/null)" != hydra_pmi_prox* ]] || proxy=1
    done
    if ((proxy)); then
        local_done_since=-1
    elif ((local_done_since < 0)); then
        local_done_since=$ticks
    fi
    if { ((idle_since >= 0 && ticks - idle_since >= 2 * lost_grace)); } ||
        { ((local_done_since >= 0 && ticks - local_done_since >= 2 * (peer_timeout + lost_grace))); }; then
        echo "dpnet: mpiexec still waits for a lost host or rank: stopping it (exit code 5)" >&2
        lost=1
        kill -TERM "$job" 2>/dev/null || true
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$job" 2>/dev/null || break
            sleep 0.2
        done
        # shellcheck disable=SC2086  # one pid per word; the ssh clients end their sessions
        kill -KILL "$job" $children 2>/dev/null || true
        break
    fi
done
status=0
wait "$job" || status=$?
if ((lost)); then
    status=5
fi
exit "$status"
