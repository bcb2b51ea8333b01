#!/usr/bin/env bash
# watched-mpiexec.sh MPIEXEC-ARGS...: run `mpiexec MPIEXEC-ARGS...` and stop it when it waits
# for what cannot come; exit with mpiexec's exit code (255 when a rank was killed), or 5 when it
# had to be stopped.
# Used by entrypoint.sh (the compose demo, launch/netns-demo.sh) and cluster.sh.
#
# hydra's mpiexec can wait forever: for the proxy of a host whose link died (its control
# connection never closes), or for a rank that stalled while its neighbours stopped. Its
# children are the local proxy (rank 0's host) and one ssh client per other host; ssh gives up
# on a silent host (ServerAliveInterval) and every live rank ends within the peer deadline once
# a neighbour is lost (--peer-timeout). So mpiexec is stopped (exit code 5: a machine was lost,
# no estimate) when it has had no child for DPNET_LOST_HOST_GRACE seconds (default 3), or when
# the local ranks ended more than DPNET_PEER_TIMEOUT (default 60, dpnet.run's) + that grace
# seconds ago. SIGINT (Ctrl-C) and SIGTERM (`docker stop`, a scheduler's cancel) are passed to
# mpiexec as they came; hydra passes them to every rank: exit code 130 / 143, nothing written.
#
# MPIEXEC_TIMEOUT (hydra's variable, whole seconds) is the job's deadline, enforced here and not
# passed on: a job still running at it gets SIGTERM (then SIGKILL 5 s later) and the exit code
# is 124, whatever mpiexec returned (hydra's own deadline exits 255, or now and then 0, after
# `APPLICATION TIMED OUT`).
set -euo pipefail

lost_grace="${DPNET_LOST_HOST_GRACE:-3}"
peer_timeout="${DPNET_PEER_TIMEOUT:-60}"
peer_timeout=$((${peer_timeout%%.*} + 1)) # whole seconds, rounded up
deadline="${MPIEXEC_TIMEOUT:-}"
unset MPIEXEC_TIMEOUT
if [[ -n "$deadline" && ! "$deadline" =~ ^[1-9][0-9]*$ ]]; then
    echo "dpnet: MPIEXEC_TIMEOUT must be a whole number of seconds > 0, not '$deadline'" >&2
    exit 2
fi

# stop_job: SIGTERM to mpiexec, at most 2 s to end, then SIGKILL to it and its children (the
# local proxy, the ssh clients: their sessions end, and with them the remote ranks)
stop_job() {
    local kids
    kids=$(cat "/proc/$job/task/$job/children" 2>/dev/null) || true
    kill -TERM "$job" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        kill -0 "$job" 2>/dev/null || return 0
        sleep 0.2
    done
    # shellcheck disable=SC2086  # one pid per word
    kill -KILL "$job" $kids 2>/dev/null || true
}

# A background job of a script starts with SIGINT ignored: give mpiexec the default back.
restore=()
if env --default-signal=INT true 2>/dev/null; then restore=(env --default-signal=INT); fi
"${restore[@]}" mpiexec "$@" &
job=$!
trap 'kill -INT "$job" 2>/dev/null || true' INT
trap 'kill -TERM "$job" 2>/dev/null || true' TERM
ticks=0 # half seconds
idle_since=-1
local_done_since=-1
lost=0
timed_out=0
while kill -0 "$job" 2>/dev/null; do
    sleep 0.5
    ticks=$((ticks + 1))
    if [[ -n "$deadline" ]] && ((SECONDS >= deadline)); then
        echo "dpnet: the job is still running at its deadline (MPIEXEC_TIMEOUT=$deadline s):" \
            "stopping it (exit code 124)" >&2
        timed_out=1
        kill -TERM "$job" 2>/dev/null || true
        for _ in $(seq 25); do # the ranks stop at their next exchange; 5 s at most
            kill -0 "$job" 2>/dev/null || break
            sleep 0.2
        done
        stop_job
        break
    fi
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
        stop_job
        break
    fi
done
status=0
while true; do # a trapped signal interrupts wait: wait again until mpiexec has ended
    wait "$job" && status=0 || status=$?
    kill -0 "$job" 2>/dev/null || break
done
if ((lost)); then
    status=5
elif ((timed_out)); then
    status=124
elif ((status == 9)); then
    # a rank was killed (SIGKILL): hydra aborts the job and exits 255 once the ssh sessions to
    # the other hosts' proxies have ended, or with the signal's number, 9, when it ends before
    # them (seen under load). 255 either way; dpnet itself never exits 9.
    status=255
fi
exit "$status"
