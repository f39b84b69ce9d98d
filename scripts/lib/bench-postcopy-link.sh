# bench-postcopy.sh's postcopy-preempt pair, sourced by it after its other runs (expects run(),
# $work, and the globals it sets). Where the answers to faults travel matters when the push
# fills the link: then the socket buffers of the one connection hold megabytes of push, and a
# plain answer queues behind them, while postcopy-preempt's goes on a connection of its own.
# Both runs: a network namespace whose loopback is a $link_rate link (tbf with a short queue, as
# a NIC's), nothing capped (max-bandwidth and max-postcopy-bandwidth 0), the
# switch after the bulk round. Writes postcopy-link-plain.json and postcopy-link-preempt.json.

link_rate=${VMM_BENCH_LINK:-1gbit}
link_ns=vmm-bench-$$
ip netns add "$link_ns" || die "cannot make a network namespace (ip netns add): the link runs need root and iproute2"
ip netns exec "$link_ns" ip link set lo up
# A NIC's own queue is short (byte queue limits): 5 ms of the rate here; the backlog stays in
# each connection's socket buffer, which is where a plain answer waits behind the push.
ip netns exec "$link_ns" tc qdisc add dev lo root handle 1: tbf rate "$link_rate" burst 128kb latency 5ms ||
    die "cannot rate-limit the namespace's loopback (tc tbf): the link runs need the sch_tbf module"
log "postcopy over a $link_rate link (network namespace $link_ns), push uncapped: plain, then postcopy-preempt"
saved_bw=$bw saved_pcbw=$pcbw
wrap=(ip netns exec "$link_ns") bw=0 pcbw=0
preempt=0 attempt postcopy-link tcp postcopy-link-plain
preempt=1 attempt postcopy-link tcp postcopy-link-preempt
wrap=() bw=$saved_bw pcbw=$saved_pcbw preempt=1
ip netns del "$link_ns"
link_ns=
