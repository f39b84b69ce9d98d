# bench-postcopy.sh --vs-qemu's report: ours (with and without readahead) and QEMU 7.2, the same
# stress guest, postcopy at once over tcp in the nested VM. Two counts of the guest's blocked
# time: each VMM's own (postcopy-blocktime) and the guest's (its TSC: stall_us and longer gaps).
def r2: . * 100 | round / 100;
def stalls(g): if g == null then "-" else "\(g.stalled_ms) ms in \(g.stalls) stalls over \(g.window_ms) ms (longest since boot \(g.longest_since_boot_ms) ms, \(g.passes) passes); \(g.excess_ms // "-") ms more than its stalled share before migrate (\(if g.stalled_share_before == null then "-" else (g.stalled_share_before * 1000 | round / 10) end) %)" end;
# A run that failed has no figures ({"failed": why, logs}): what needs them reads "-" or null.
def num: (. | type) == "number";
def ratio(a; b): if (a | num) and (b | num) and b > 0 then (a / b) | r2 else null end;
def us(x): if (x | num) then x | round else "-" end;
def total(r): if r.failed then "failed" else r.source."total-time" // "-" end;
($bare[0]) as $b | ($nora[0]) as $n | ($qemu[0]) as $q |
{
  guest: {hot: $hot, cap_mib_s: ($cap / 1048576), stall_floor_us: $floor},
  summary: {
    "total, ms: ours / ours without readahead / QEMU 7.2":
      "\(total($b)) / \(total($n)) / \(total($q))",
    "blocked by each VMM's count, ms: ours / ours without readahead / QEMU 7.2":
      "\($b.destination."postcopy-blocktime" // "-") / \($n.destination."postcopy-blocktime" // "-") / \($q.destination."postcopy-blocktime" // "-")",
    "the guest's own stalls: ours": stalls($b.guest),
    "the guest's own stalls: ours without readahead": stalls($n.guest),
    "the guest's own stalls: QEMU 7.2": stalls($q.guest),
    "faults, ours / ours without readahead": "\($b.destination."x-postcopy".requests // "-") / \($n.destination."x-postcopy".requests // "-")",
    "a fault's latency, p50 us, ours / ours without readahead: at the source (request read to page written) of the whole (request sent to page placed)":
      "\(us($b.source."x-postcopy"."x-serve-latency"."p50-us")) of \(us($b.destination."x-postcopy"."fault-latency"."p50-us")) / \(us($n.source."x-postcopy"."x-serve-latency"."p50-us")) of \(us($n.destination."x-postcopy"."fault-latency"."p50-us"))",
    "readahead pages, ours": $b.source."x-postcopy"."x-readahead-pages",
    "ours / QEMU total (target <= 1)": ratio($b.source."total-time"; $q.source."total-time"),
    "ours / QEMU blocked, each VMM's count (target <= 1)": ratio($b.destination."postcopy-blocktime"; $q.destination."postcopy-blocktime"),
    "ours / QEMU, what migrating added to the guest's own stalled time (target <= 1)": ratio($b.guest.excess_ms; $q.guest.excess_ms),
    "readahead: faults with / without": ratio($b.destination."x-postcopy".requests; $n.destination."x-postcopy".requests),
    "readahead: blocked (our count) with / without": ratio($b.destination."postcopy-blocktime"; $n.destination."postcopy-blocktime"),
    "readahead: what migrating added to the guest's stalled time, with / without": ratio($b.guest.excess_ms; $n.guest.excess_ms)
  },
  failed: ([{ours: $b, ours_without_readahead: $n, qemu: $q} | to_entries[] | select(.value.failed != null)
            | {run: .key, why: .value.failed, logs: .value.logs}]),
  runs: {ours: $b, ours_without_readahead: $n, qemu: $q}
}
| .summary |= with_entries(select(.value != null))
