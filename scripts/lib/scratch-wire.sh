#!/usr/bin/env bash
# scratch-wire.sh up|cut|mend|down|carried|explain: a wire of two SoftRoCE devices whose outage drops packets
# the way a switch port that goes dark does, for a flap that must come back (the rdma tests'
# ScratchWire, bench-flap.sh --transport rdma). Root only, on a machine whose network and RDMA
# devices are the caller's to change (the SoftRoCE nested VM: VMM_RDMA_HOTPLUG=1).
#
#   rxe7a on veth7a at 10.99.7.1 (the source's side), rxe7b on veth7b at 10.99.7.2 (the
#   destination's), one veth pair; `cut` drops every packet both ways (netem loss 100%), `mend`
#   lets them through again. Neither side's sends fail meanwhile.
#
# Why not take a netdev down: SoftRoCE on a netdev that is down fails its sends locally, and a
# failed send puts its QP in error for good; a connection request or a disconnect sent in the
# outage does that to the device's QP1, and no connection over that device is answered again
# until it is deleted (Debian's 6.1 kernel; rping alone shows it). Hardware drops such packets
# on the wire, as this wire does.
#
# Both addresses are local, so the kernel would route between them inside the host: rules for
# what this host sends (iif lo) to either address send it out of the other's veth, ahead of the
# local table (moved behind them while the wire is up). Exit status 2: the machine lacks the
# veth or sch_netem kernel module.
set -euo pipefail

up() {
    modprobe veth && modprobe sch_netem || exit 2
    ip link add veth7a type veth peer name veth7b
    ip addr add 10.99.7.1/24 dev veth7a
    ip addr add 10.99.7.2/24 dev veth7b
    ip link set veth7a up
    ip link set veth7b up
    for i in all veth7a veth7b; do
        sysctl -qw "net.ipv4.conf.$i.accept_local=1" "net.ipv4.conf.$i.rp_filter=0"
    done
    ip route add 10.99.7.2 dev veth7a src 10.99.7.1 table 72
    ip route add 10.99.7.1 dev veth7b src 10.99.7.2 table 71
    ip rule add pref 72 iif lo to 10.99.7.2 lookup 72
    ip rule add pref 71 iif lo to 10.99.7.1 lookup 71
    local rules
    rules=$(ip rule show pref 1000)  # not piped into grep -q: its early exit fails the pipe
    if [[ $rules != *local* ]]; then
        ip rule add pref 1000 lookup local
        ip rule del pref 0 lookup local
    fi
    ip neigh add 10.99.7.2 lladdr "$(cat /sys/class/net/veth7b/address)" dev veth7a nud permanent
    ip neigh add 10.99.7.1 lladdr "$(cat /sys/class/net/veth7a/address)" dev veth7b nud permanent
    rdma link add rxe7a type rxe netdev veth7a
    rdma link add rxe7b type rxe netdev veth7b
    # The devices' GID tables fill in the background: a connection made before its address is
    # there would not go over the wire. And what this host sends each way must leave by the wire.
    local i
    for i in $(seq 1 100); do
        grep -qs 'ffff:0a63:0701' /sys/class/infiniband/rxe7a/ports/1/gids/* &&
            grep -qs 'ffff:0a63:0702' /sys/class/infiniband/rxe7b/ports/1/gids/* && break
        sleep 0.1
    done
    [ "$i" != 100 ] || { echo "scratch-wire: the devices' GIDs did not appear" >&2; return 1; }
    ip route get 10.99.7.2 | grep -q 'dev veth7a' || { echo "scratch-wire: 10.99.7.2 is not routed over the wire: $(ip route get 10.99.7.2)" >&2; return 1; }
    ip route get 10.99.7.1 | grep -q 'dev veth7b' || { echo "scratch-wire: 10.99.7.1 is not routed over the wire: $(ip route get 10.99.7.1)" >&2; return 1; }
}

# What has gone over the wire from the source's side, in packets (and what routes and rules say).
carried() { cat /sys/class/net/veth7a/statistics/tx_packets; }
explain() { ip rule; ip route get 10.99.7.2; ip route get 10.99.7.1; rdma link; rdma res show cm_id 2>/dev/null; }

down() {
    rdma link delete rxe7a 2>/dev/null || true
    rdma link delete rxe7b 2>/dev/null || true
    ip link del veth7a 2>/dev/null || true
    ip rule del pref 72 2>/dev/null || true
    ip rule del pref 71 2>/dev/null || true
    ip route flush table 71 2>/dev/null || true
    ip route flush table 72 2>/dev/null || true
    local rules
    rules=$(ip rule show pref 1000)
    if [[ $rules == *local* ]]; then
        ip rule add pref 0 lookup local
        ip rule del pref 1000 lookup local
    fi
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    cut) tc qdisc add dev veth7a root netem loss 100% && tc qdisc add dev veth7b root netem loss 100% ;;
    mend) tc qdisc del dev veth7a root && tc qdisc del dev veth7b root ;;
    carried) carried ;;
    explain) explain ;;
    *) echo "usage: $0 up|cut|mend|down|carried|explain" >&2; exit 64 ;;
esac
