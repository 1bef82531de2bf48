#!/usr/bin/env bash
# tfdist's two-node Slurm test cluster on one machine (tools/slurm/README.md).
#
#   tools/slurm/cluster.sh up       install slurm-wlm + munge if missing, start everything (idempotent)
#   tools/slurm/cluster.sh down     stop and remove everything this script made (safe after a failed up)
#   tools/slurm/cluster.sh status   what is running
#   tools/slurm/cluster.sh check    exit 0 if this machine can make network namespaces, else say why
#   tools/slurm/cluster.sh env      print `export SLURM_CONF=...` to use the cluster from a shell
#
# What it makes, every name prefixed with tfdist so nothing else is touched:
#   - a Linux bridge tfdistbr0 with 10.250.0.1/24 (slurmctld's address), in the root namespace;
#   - network namespaces tfdist-node1 / tfdist-node2, each with a veth pair (tfdistv1/tfdistv1p, ...)
#     on the bridge and the address 10.250.0.11 / 10.250.0.12; each slurmd (and so every task it
#     starts) also gets its own UTS namespace, so `hostname` there is the node's name;
#   - /etc/hosts lines for tfdist-node1 / tfdist-node2, each ending in the marker "# tfdist-slurm";
#   - its own munged (own key, socket, pid and log files), slurmctld in the root namespace and one
#     slurmd per node namespace, all with files under $TFDIST_SLURM_DIR (default /run/tfdist-slurm),
#     listening on their own ports (16817/16818), so a system Slurm or munge is never touched.
# Tasks run as root in the node namespaces and share the machine's file system (the repo's .venv).
set -euo pipefail

DIR=${TFDIST_SLURM_DIR:-/run/tfdist-slurm}
CONF=$DIR/slurm.conf
# Serializes up/down of concurrent callers (two pytest sessions, make). Kept outside $DIR, which
# down removes; the empty lock file itself stays.
LOCK=${TFDIST_SLURM_LOCK:-/run/lock/tfdist-slurm.lock}
MUNGE_DIR=$DIR/munge
MUNGE_SOCKET=$MUNGE_DIR/munge.socket
BRIDGE=tfdistbr0
SUBNET=10.250.0
CTLD_ADDR=$SUBNET.1
NODES=(tfdist-node1 tfdist-node2)
NODE_ADDRS=("$SUBNET.11" "$SUBNET.12")
VETHS=(tfdistv1 tfdistv2)
HOSTS_MARK="# tfdist-slurm"
CTLD_PORT=16817
SLURMD_PORT=16818
# Seconds a requeued job waits before it may start again: Slurm holds it for the step credential
# lifetime (AuthInfo cred_expire, default 120 s, which held a requeued job ~170 s here).
CRED_EXPIRE=${TFDIST_SLURM_CRED_EXPIRE:-10}

log() { echo "slurm-cluster: $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

check() {
    # Can this machine make what the cluster needs? Prints the reason and exits 1 if not.
    [ "$(id -u)" = 0 ] || die "needs root (network namespaces, bridge, /etc/hosts); running as $(id -un)"
    command -v ip >/dev/null || die "the 'ip' command (iproute2) is missing"
    command -v nsenter >/dev/null || die "the 'nsenter' command (util-linux) is missing"
    local probe=tfdist-probe$$
    if ! ip netns add "$probe" 2>/tmp/tfdist-netns-probe.err; then
        die "cannot create a network namespace: $(cat /tmp/tfdist-netns-probe.err)"
    fi
    local ok=1 why=""
    if ! ip link add tfdpr$$ type veth peer name tfdpr$$p 2>/tmp/tfdist-netns-probe.err; then
        ok=0
        why="cannot create a veth pair: $(cat /tmp/tfdist-netns-probe.err)"
    else
        ip link del tfdpr$$ 2>/dev/null || true
    fi
    ip netns del "$probe" 2>/dev/null || true
    rm -f /tmp/tfdist-netns-probe.err
    [ $ok = 1 ] || die "$why"
    echo "ok: this machine can make network namespaces, veth pairs and bridges"
}

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    command -v munged >/dev/null || missing+=(munge)
    [ ${#missing[@]} = 0 ] && return 0
    log "installing slurm-wlm and munge (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q slurm-wlm munge >/dev/null
}

write_config() {
    local host
    host=$(hostname)
    mkdir -p "$DIR"/ctld "$DIR"/log
    for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/$n"; done
    cat >"$CONF".tmp <<EOF
# Written by tools/slurm/cluster.sh: tfdist's two-node test cluster. Do not edit; re-run \`make slurm-up\`.
ClusterName=tfdist
SlurmctldHost=$host($CTLD_ADDR)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=$CRED_EXPIRE
StateSaveLocation=$DIR/ctld
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdSpoolDir=$DIR/spool/%n
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5
SlurmdTimeout=30
SlurmctldTimeout=30
InactiveLimit=0
# SIGTERM to SIGKILL. After scancel, rank 0 stops at an agreed step, checkpoints and asks
# scontrol whether the job was cancelled (tests/slurm/test_jobs.py): under a second idle, and
# a loaded machine is 3-7x slower. Tasks that exit on SIGTERM do not wait for it.
KillWait=15
MinJobAge=600
MessageTimeout=20
NodeName=${NODES[0]} NodeAddr=${NODE_ADDRS[0]} CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 State=UNKNOWN
NodeName=${NODES[1]} NodeAddr=${NODE_ADDRS[1]} CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 State=UNKNOWN
PartitionName=tfdist Nodes=${NODES[0]},${NODES[1]} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    if [ -f "$CONF" ] && cmp -s "$CONF".tmp "$CONF"; then
        rm -f "$CONF".tmp
    else
        CONFIG_CHANGED=1
        mv "$CONF".tmp "$CONF"
    fi
    # slurmd and slurmctld look for cgroup.conf beside slurm.conf; an explicit one keeps it quiet.
    echo "CgroupPlugin=autodetect" >"$DIR"/cgroup.conf
}

# A process that exited but was not yet reaped (a zombie) counts as gone.
alive() {
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}
pid_alive() { [ -f "$1" ] && alive "$(cat "$1" 2>/dev/null)"; }

start_munge() {
    if pid_alive "$MUNGE_DIR/munged.pid"; then return 0; fi
    id munge >/dev/null 2>&1 || die "user 'munge' does not exist (is the munge package installed?)"
    mkdir -p "$MUNGE_DIR"
    chmod 700 "$MUNGE_DIR"
    if [ ! -s "$MUNGE_DIR/munge.key" ]; then
        dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=1024 count=1 status=none
    fi
    chown -R munge:munge "$MUNGE_DIR"
    chmod 400 "$MUNGE_DIR/munge.key"
    # The socket must be reachable by every user that runs sbatch/srun: its directory is 0755.
    chmod 755 "$MUNGE_DIR"
    su munge -s /bin/sh -c "/usr/sbin/munged --socket=$MUNGE_SOCKET --key-file=$MUNGE_DIR/munge.key \
        --pid-file=$MUNGE_DIR/munged.pid --log-file=$MUNGE_DIR/munged.log --seed-file=$MUNGE_DIR/munged.seed" 9>&-
    for _ in $(seq 50); do [ -S "$MUNGE_SOCKET" ] && return 0; sleep 0.1; done
    die "munged did not create $MUNGE_SOCKET (log: $MUNGE_DIR/munged.log)"
}

ensure_network() {
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link add "$BRIDGE" type bridge
    fi
    # (Never `ip ... | grep -q` here: with pipefail, grep's early exit can fail the pipeline.)
    [[ "$(ip addr show dev "$BRIDGE")" == *"inet $CTLD_ADDR/"* ]] ||
        ip addr add "$CTLD_ADDR/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    local i ns veth
    for i in "${!NODES[@]}"; do
        ns=${NODES[$i]}
        veth=${VETHS[$i]}
        [ -e "/run/netns/$ns" ] || ip netns add "$ns"
        if ! ip link show "$veth" >/dev/null 2>&1; then
            ip link add "$veth" type veth peer name "${veth}p"
            ip link set "${veth}p" netns "$ns"
        fi
        ip link set "$veth" master "$BRIDGE"
        ip link set "$veth" up
        ip -n "$ns" link set lo up
        [[ "$(ip -n "$ns" addr show dev "${veth}p")" == *"inet ${NODE_ADDRS[$i]}/"* ]] ||
            ip -n "$ns" addr add "${NODE_ADDRS[$i]}/24" dev "${veth}p"
        ip -n "$ns" link set "${veth}p" up
    done
}

ensure_hosts() {
    local i
    for i in "${!NODES[@]}"; do
        grep -qE "^${NODE_ADDRS[$i]}[[:space:]]+${NODES[$i]}([[:space:]]|$)" /etc/hosts ||
            echo "${NODE_ADDRS[$i]} ${NODES[$i]} $HOSTS_MARK" >>/etc/hosts
    done
}

remove_hosts() {
    grep -q "$HOSTS_MARK" /etc/hosts 2>/dev/null || return 0
    # Rewrite in place (not sed -i): /etc/hosts may be a bind mount that cannot be replaced.
    local kept
    kept=$(grep -v "$HOSTS_MARK" /etc/hosts || true)
    printf '%s\n' "$kept" >/etc/hosts
}

start_slurmctld() {
    if pid_alive "$DIR/slurmctld.pid"; then return 0; fi
    # -i: ignore saved state errors; -c would clear state. A fresh cluster has none anyway.
    # 9>&-: the daemons must not inherit (and so hold) the up/down lock.
    slurmctld -f "$CONF" -i 9>&-
    STARTED_CTLD=1
}

start_slurmd() {
    local i ns
    for i in "${!NODES[@]}"; do
        ns=${NODES[$i]}
        pid_alive "$DIR/slurmd-$ns.pid" && continue
        # nsenter, not `ip netns exec`: the latter remounts /sys and slurmd's cgroup plugin fails.
        # A UTS namespace of its own too, so that `hostname` in a task says the node's name (as on
        # a real cluster); it lives as long as the slurmd and the tasks it starts.
        nsenter --net="/run/netns/$ns" unshare --uts \
            sh -c "hostname $ns && exec slurmd -f $CONF -N $ns" 9>&-
    done
}

wait_ready() {
    local t0=$SECONDS out
    while ((SECONDS - t0 < 60)); do
        out=$(SLURM_CONF=$CONF sinfo -h -N -o '%N %t' 2>/dev/null || true)
        if [ "$(echo "$out" | grep -cE ' (idle|mix|alloc)$')" = "${#NODES[@]}" ]; then
            log "ready: $(echo "$out" | tr '\n' ' ')"
            return 0
        fi
        # A node left down/drained by an earlier run comes back here.
        if [[ "$out" =~ \ (down|drain|drng) ]]; then
            SLURM_CONF=$CONF scontrol update NodeName="$(
                IFS=,
                echo "${NODES[*]}"
            )" State=RESUME >/dev/null 2>&1 || true
        fi
        sleep 0.5
    done
    log "nodes not idle after 60 s: $out"
    log "see $DIR/log/"
    return 1
}

lock() {
    mkdir -p "$(dirname "$LOCK")"
    exec 9>>"$LOCK"
    flock -w 600 9 || die "another up/down holds $LOCK for more than 600 s"
}

up() {
    lock
    check >/dev/null
    install_packages
    write_config
    start_munge
    ensure_network
    ensure_hosts
    start_slurmctld
    start_slurmd
    if [ "${CONFIG_CHANGED:-0}" = 1 ] && [ "${STARTED_CTLD:-0}" = 0 ]; then
        log "slurm.conf changed: scontrol reconfigure"
        SLURM_CONF=$CONF scontrol reconfigure 9>&-
    fi
    wait_ready
    # Who wants it up: the test fixture (TFDIST_SLURM_STARTED_BY=tests) takes it down again at the
    # end of its session only when it started it and nobody asked by hand (`make slurm-up`).
    if [ "${TFDIST_SLURM_STARTED_BY:-}" != tests ]; then
        echo manual >"$DIR/started-by"
    elif [ "${STARTED_CTLD:-0}" = 1 ]; then
        echo tests >"$DIR/started-by"
    fi
    log "up: SLURM_CONF=$CONF (nodes ${NODES[*]} at ${NODE_ADDRS[*]}, controller $CTLD_ADDR)"
}

stop_pidfile() {
    local f=$1 name=$2 pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f" 2>/dev/null || true)
    if [ -n "$pid" ] && alive "$pid"; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then
            log "$name ($pid) did not stop; killing it"
            kill -9 "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$f"
}

kill_in_netns() {
    # Anything still running in one of our namespaces (job steps, stray tasks) is ours.
    local ns=$1 pids
    [ -e "/run/netns/$ns" ] || return 0
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] && return 0
    kill $pids 2>/dev/null || true
    sleep 0.5
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
}

kill_strays() {
    # Daemons whose pid file is gone (a failed up, a removed $DIR) are found by their command
    # line, which names this cluster's own config or munge socket: never anybody else's.
    local pids
    pids=$(pgrep -f -- "-f $CONF( |$)|--socket=$MUNGE_SOCKET( |$)" || true)
    [ -z "$pids" ] && return 0
    log "stopping daemons without pid file: $pids"
    kill $pids 2>/dev/null || true
    sleep 1
    for pid in $pids; do alive "$pid" && kill -9 "$pid" 2>/dev/null; done
    return 0
}

down() {
    local i ns veth
    lock
    if [ -f "$CONF" ] && command -v scancel >/dev/null; then
        SLURM_CONF=$CONF timeout 5 scancel --quiet --user=root >/dev/null 2>&1 || true
    fi
    for ns in "${NODES[@]}"; do stop_pidfile "$DIR/slurmd-$ns.pid" "slurmd $ns"; done
    stop_pidfile "$DIR/slurmctld.pid" slurmctld
    for ns in "${NODES[@]}"; do kill_in_netns "$ns"; done
    stop_pidfile "$MUNGE_DIR/munged.pid" munged
    kill_strays
    for i in "${!NODES[@]}"; do
        ip link del "${VETHS[$i]}" 2>/dev/null || true
        [ -e "/run/netns/${NODES[$i]}" ] && ip netns del "${NODES[$i]}"
    done
    ip link del "$BRIDGE" 2>/dev/null || true
    # Leftovers of a `check` that was interrupted.
    for ns in $(ip netns list | awk '/^tfdist-probe[0-9]+( |$)/ {print $1}'); do ip netns del "$ns"; done
    for veth in $(ip -o link | awk -F'[:@]' '$2 ~ /^ tfdpr[0-9]+p?$/ {print $2}'); do
        ip link del "$veth" 2>/dev/null || true
    done
    remove_hosts
    rm -rf "$DIR"
    log "down: removed namespaces, bridge, /etc/hosts entries, daemons and $DIR"
}

status() {
    local ns
    echo "started by: $(cat "$DIR/started-by" 2>/dev/null || echo -)"
    echo "config: $CONF $([ -f "$CONF" ] && echo present || echo absent)"
    echo "munged: $(pid_alive "$MUNGE_DIR/munged.pid" && echo running || echo stopped)"
    echo "slurmctld: $(pid_alive "$DIR/slurmctld.pid" && echo running || echo stopped)"
    for ns in "${NODES[@]}"; do
        echo "slurmd $ns: $(pid_alive "$DIR/slurmd-$ns.pid" && echo running || echo stopped)" \
            "netns: $([ -e "/run/netns/$ns" ] && echo present || echo absent)"
    done
    echo "bridge $BRIDGE: $(ip link show "$BRIDGE" >/dev/null 2>&1 && echo present || echo absent)"
    echo "hosts entries: $(grep -c "$HOSTS_MARK" /etc/hosts || true)"
    if [ -f "$CONF" ] && pid_alive "$DIR/slurmctld.pid"; then SLURM_CONF=$CONF sinfo -N || true; fi
}

case ${1:-} in
    up) up ;;
    down) down ;;
    status) status ;;
    check) check ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *)
        echo "usage: $0 up|down|status|check|env" >&2
        exit 2
        ;;
esac
