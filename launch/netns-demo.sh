#!/usr/bin/env bash
# The docker-compose demo's 5 hosts on one Linux machine, without Docker (needs root,
# iproute2, util-linux and openssh-server):
#
#   sudo launch/netns-demo.sh [dpnet.run options]    up, run, print the result, down (on exit)
#
# Every host of launch/hostfile.compose (launcher, worker1..worker4) becomes a network
# namespace with its own hostname, its own /dev/shm and /etc/hosts, one veth to a bridge that
# lives in a namespace of its own, and a real sshd (generated keys, its own sshd_config). The
# launcher host runs launch/entrypoint.sh in the launcher role, exactly as the compose service
# does. Nothing is configured in the machine's own network namespace: no address, no route,
# no bridge; no packet leaves the machine.
#
# Step by step (the 5-host test, tests/test_multihost_netns.py, drives these):
#   netns-demo.sh up                 create the hosts, start sshd on every worker
#   netns-demo.sh run [options]      entrypoint.sh launcher [options] on the launcher host
#   netns-demo.sh cut HOST           take HOST's bridge port down (the cable is pulled)
#   netns-demo.sh heal HOST          and up again
#   netns-demo.sh counters           "host tx_bytes rx_bytes" of every host's eth0
#   netns-demo.sh pids               "host pid command" of every process on the hosts
#   netns-demo.sh on HOST CMD...     run CMD on HOST (e.g. `on worker1 ip addr`)
#   netns-demo.sh down               kill every process on the hosts, delete everything
#
# Environment (all optional):
#   DPNET_NETNS_STATE   state directory (keys, configs, logs)   default /tmp/dpnet-netns-demo
#   DPNET_NETNS_PREFIX  namespace name prefix (set at `up`)     default dpnet<pid>
#   DPNET_NETNS_SUBNET  first three octets of the host network  default 10.213.0
#   DPNET_VENV          the venv with dpnet and mpich           default $VIRTUAL_ENV, or the
#                                                               venv of the `python` on PATH
#   DPNET_OUTPUT        results file of `run`/the demo          default ./results/netns.json
#   DPNET_PEER_TIMEOUT, DPNET_WAIT_SECONDS, MPIEXEC_TIMEOUT     passed to entrypoint.sh
#                                                               (defaults 10, 30, 600)
# The results directory is given to the invoking user ($SUDO_UID) when run under sudo.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
entrypoint="$here/entrypoint.sh"
hostfile="$here/hostfile.compose"
state="${DPNET_NETNS_STATE:-/tmp/dpnet-netns-demo}"
subnet="${DPNET_NETNS_SUBNET:-10.213.0}"

die() {
    echo "netns-demo: $*" >&2
    exit 2
}

hosts() { # host names in hostfile order (rank order)
    sed -e 's/#.*//' "$hostfile" | awk 'NF { split($1, a, ":"); print a[1] }'
}

prefix() {
    [[ -f "$state/prefix" ]] || die "no hosts are up (no $state/prefix): run '$0 up' first"
    cat "$state/prefix"
}

ns_of() {
    local p
    p=$(prefix)
    echo "$p-$1"
}

check_requirements() {
    ((EUID == 0)) || die "needs root (network namespaces, mounts)"
    local tool
    for tool in ip unshare nsenter setsid ssh ssh-keygen /usr/sbin/sshd; do
        command -v "$tool" >/dev/null || die "missing $tool (packages: iproute2 util-linux openssh-server openssh-client)"
    done
}

venv_dir() {
    local venv="${DPNET_VENV:-${VIRTUAL_ENV:-}}"
    if [[ -z "$venv" ]] && command -v python >/dev/null; then
        venv=$(python -c 'import sys; print(sys.prefix)')
    fi
    [[ -n "$venv" && -x "$venv/bin/mpiexec" && -x "$venv/bin/python" ]] ||
        die "set DPNET_VENV to the venv with dpnet and mpich (need \$DPNET_VENV/bin/mpiexec)"
    echo "$venv"
}

# host_exec HOST CMD...: CMD as HOST: in its network namespace (ip netns exec also binds
# /etc/netns/NS/hosts over /etc/hosts), with its own hostname and a private tmpfs /dev/shm,
# so that neither MPI nor UCX can reach another host through shared memory files.
host_exec() {
    local host=$1
    shift
    # shellcheck disable=SC2016  # $0 and $@ belong to the inner sh
    ip netns exec "$(ns_of "$host")" unshare --mount --uts --propagation private \
        sh -c 'hostname "$0" && mount -t tmpfs -o mode=1777,size=256m dpnet-shm /dev/shm && exec "$@"' \
        "$host" "$@"
}

# the variables of entrypoint.sh for HOST, plus PATH with the venv first
host_env() {
    local host=$1 venv
    venv=$(venv_dir)
    echo "PATH=$venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    echo "DPNET_SSHD_CONFIG=$state/$host/sshd_config"
    echo "DPNET_SSH=$state/ssh/ssh"
    echo "DPNET_HOSTFILE=$hostfile"
    echo "DPNET_NP=$(hosts | wc -l)"
    # MPICH 5's default netmod is ch4:ucx; UCX reaches processes of the same machine through
    # shared memory and cross-memory attach (via /proc/PID, not /dev/shm) whatever the network
    # namespace: only TCP (and self, for a rank's messages to itself) may carry MPI traffic.
    echo "UCX_TLS=tcp,self"
    echo "FI_PROVIDER=tcp"
}

write_configs() {
    local host i=0
    mkdir -p "$state/ssh"
    chmod 700 "$state" "$state/ssh"
    ssh-keygen -q -t ed25519 -N "" -C dpnet-netns-host -f "$state/ssh/host_key"
    ssh-keygen -q -t ed25519 -N "" -C dpnet-netns-client -f "$state/ssh/id_ed25519"
    cp "$state/ssh/id_ed25519.pub" "$state/ssh/authorized_keys"
    : >"$state/ssh/known_hosts"
    : >"$state/etc-hosts"
    printf '127.0.0.1\tlocalhost\n' >>"$state/etc-hosts"
    for host in $(hosts); do
        local addr="$subnet.$((10 + i))"
        i=$((i + 1))
        printf '%s\t%s\n' "$addr" "$host" >>"$state/etc-hosts"
        echo "$host,$addr $(cut -d' ' -f1-2 "$state/ssh/host_key.pub")" >>"$state/ssh/known_hosts"
        mkdir -p "$state/$host"
        echo "$addr" >"$state/$host/addr"
        # ClientAlive*: a session whose client went silent (cut link) ends after ~3 s, and
        # with it the hydra proxy and the rank it started on this host.
        cat >"$state/$host/sshd_config" <<EOF
ListenAddress $addr
Port 22
HostKey $state/ssh/host_key
PidFile $state/$host/sshd.pid
AuthorizedKeysFile $state/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
ClientAliveInterval 1
ClientAliveCountMax 3
EOF
    done
    cat >"$state/ssh/config" <<EOF
Host *
  IdentityFile $state/ssh/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $state/ssh/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  ServerAliveInterval 1
  ServerAliveCountMax 3
  LogLevel ERROR
EOF
    printf '#!/bin/sh\nexec ssh -F %s/ssh/config "$@"\n' "$state" >"$state/ssh/ssh"
    chmod 755 "$state/ssh/ssh"
}

cmd_up() {
    check_requirements
    [[ ! -e "$state/prefix" ]] || die "$state/prefix exists: hosts are up ('$0 down' first)"
    mkdir -p "$state"
    echo "${DPNET_NETNS_PREFIX:-dpnet$$}" >"$state/prefix"
    write_configs
    local br host ns
    br="$(prefix)-br"
    ip netns add "$br"
    ip -n "$br" link set lo up
    ip -n "$br" link add br0 type bridge
    ip -n "$br" link set br0 up
    for host in $(hosts); do
        ns=$(ns_of "$host")
        ip netns add "$ns"
        mkdir -p "/etc/netns/$ns"
        cp "$state/etc-hosts" "/etc/netns/$ns/hosts"
        # both ends are created directly in their namespaces: nothing appears in the root one
        ip -n "$br" link add "p-$host" type veth peer name eth0 netns "$ns"
        ip -n "$br" link set "p-$host" master br0 up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "$(cat "$state/$host/addr")/24" dev eth0
        ip -n "$ns" link set eth0 up
    done
    # every host but the launcher runs the entrypoint's worker role (sshd in the foreground)
    local first
    first=$(hosts | head -n1)
    for host in $(hosts); do
        [[ "$host" != "$first" ]] || continue
        DPNET_NETNS_STATE="$state" setsid "$0" on "$host" \
            env "DPNET_SSHD_CONFIG=$state/$host/sshd_config" "$entrypoint" worker \
            >"$state/$host/sshd.log" 2>&1 </dev/null &
    done
    echo "netns-demo: hosts $(hosts | tr '\n' ' ')up (namespaces $(prefix)-*, state $state)" >&2
}

cmd_run() {
    local first output
    first=$(hosts | head -n1)
    output="${DPNET_OUTPUT:-$PWD/results/netns.json}"
    local -a env
    mapfile -t env < <(host_env "$first")
    env+=("DPNET_OUTPUT=$output")
    env+=("DPNET_PEER_TIMEOUT=${DPNET_PEER_TIMEOUT-10}")
    env+=("DPNET_WAIT_SECONDS=${DPNET_WAIT_SECONDS:-30}")
    env+=("MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-600}")
    if [[ -n "${SUDO_UID:-}" ]]; then
        env+=("DPNET_RESULTS_UID=$SUDO_UID:${SUDO_GID:-$SUDO_UID}")
    fi
    # not exec: the caller's signals (Ctrl-C) reach this shell's foreground child chain
    host_exec "$first" env "${env[@]}" "$entrypoint" launcher "$@"
}

cmd_cut() {
    local host=${1:?usage: netns-demo.sh cut HOST}
    ip -n "$(prefix)-br" link set "p-$host" down
}

cmd_heal() {
    local host=${1:?usage: netns-demo.sh heal HOST}
    ip -n "$(prefix)-br" link set "p-$host" up
}

cmd_counters() {
    local host ns
    for host in $(hosts); do
        ns=$(ns_of "$host")
        echo "$host $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)" \
            "$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes)"
    done
}

cmd_pids() {
    local host pid
    for host in $(hosts); do
        for pid in $(ip netns pids "$(ns_of "$host")" 2>/dev/null); do
            echo "$host $pid $({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null || true)"
        done
    done
}

# every namespace named PREFIX-*, also those of an `up` that failed halfway
our_namespaces() {
    local p
    p=$(prefix)
    ip netns list | awk '{ print $1 }' | while read -r ns; do
        if [[ "$ns" == "$p-"* ]]; then echo "$ns"; fi
    done
}

cmd_down() {
    [[ -f "$state/prefix" ]] || return 0
    local ns pids tries
    for ns in $(our_namespaces); do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        # shellcheck disable=SC2086  # one pid per word
        [[ -z "$pids" ]] || kill -TERM $pids 2>/dev/null || true
    done
    for ((tries = 0; tries < 20; tries++)); do
        pids=""
        for ns in $(our_namespaces); do pids+="$(ip netns pids "$ns" 2>/dev/null || true) "; done
        [[ -n "${pids// /}" ]] || break
        sleep 0.1
    done
    for ns in $(our_namespaces); do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        # shellcheck disable=SC2086
        [[ -z "$pids" ]] || kill -KILL $pids 2>/dev/null || true
        ip netns del "$ns"
        rm -rf "/etc/netns/${ns:?}"
    done
    rm -rf "${state:?}"
}

cmd_demo() {
    # a fresh, private state directory unless one was given
    if [[ -z "${DPNET_NETNS_STATE:-}" ]]; then
        state=$(mktemp -d /tmp/dpnet-netns-demo.XXXXXX)
        rmdir "$state"
    fi
    trap cmd_down EXIT
    trap 'exit 130' INT TERM
    cmd_up
    local output="${DPNET_OUTPUT:-$PWD/results/netns.json}"
    local rc=0
    DPNET_OUTPUT="$output" cmd_run "$@" || rc=$?
    [[ $rc -ne 0 ]] || echo "netns-demo: results in $output" >&2
    return "$rc"
}

case "${1:-}" in
up | down)
    sub=$1
    shift
    "cmd_$sub" "$@"
    ;;
run | cut | heal | counters | pids)
    sub=$1
    shift
    prefix >/dev/null # dies unless the hosts are up
    "cmd_$sub" "$@"
    ;;
on)
    shift
    prefix >/dev/null
    host_exec "$@"
    ;;
-h | --help | help)
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    ;;
*)
    cmd_demo "$@"
    ;;
esac
