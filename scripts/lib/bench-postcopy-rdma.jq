# bench-postcopy.sh --rdma's report: the runs' last query-migrate on both sides, perftest's
# latencies before and after them, the rdma run's arrivals, and the ratios the targets name
# (docs/performance.md, "Postcopy over RDMA").
def gib: . / 1073741824;
# A run that failed has no figures ({"failed": why, logs}): everything that needs them reads
# null (left out of the summary) or "-".
def num: (. | type) == "number";
def per_gib(ms; bytes): if (ms | num) and (bytes | num) and bytes > 0 then (ms / (bytes | gib) * 10 | round / 10) else null end;
def r2: . * 100 | round / 100;
def ratio(a; b): if (a | num) and (b | num) and b > 0 then (a / b) | r2 else null end;
def us(x): if (x | num) then x | round else "-" end;
def stalls(g): if g == null then null else "\(g.stalled_ms) ms in \(g.stalls) stalls over \(g.window_ms) ms; \(g.excess_ms // "-") ms more than its stalled share before migrate (\(if g.stalled_share_before == null then "-" else (g.stalled_share_before * 1000 | round / 10) end) %)" end;
def excess(g): if g == null then null else g.excess_ms end;
def lat(d): d."x-postcopy"."fault-latency";
($once[0].source) as $o | ($rdma[0].source) as $rs | ($rdma[0].destination) as $rd |
($now[0].source) as $ns | ($now[0].destination) as $nd |
($tcp[0].source) as $ts | ($tcp[0].destination) as $td | ($qemu[0].source) as $qs | ($qemu[0].destination) as $qd | ($bare[0].source) as $bs | ($bare[0].destination) as $bd |
(if ($lb[0].sum_us | num) and ($la[0].sum_us | num) then ($lb[0].sum_us + $la[0].sum_us) / 2 else null end) as $floor |
{
  guest: {mem: $mem, fill: $fill, hot: $hot, dirty_rate_mib_s: $rate, cap_mib_s: ($cap / 1048576), device: $dev},
  summary: {
    "ib_write_lat 4 KiB + ib_send_lat 32 B, us (before / after)": "\($lb[0].sum_us // "-") / \($la[0].sum_us // "-")",
    "send RAM once over rdma (guest paused), ms": $o."total-time",
    "postcopy over rdma total, ms": $rs."total-time",
    "postcopy over rdma / once (target <= 1.5)": ratio($rs."total-time"; $o."total-time"),
    "postcopy at once over rdma (migrate_start_postcopy right after migrate) total, ms": $ns."total-time",
    "postcopy at once over rdma / once (target <= 1.5)": ratio($ns."total-time"; $o."total-time"),
    "postcopy at once over rdma: guest blocked, ms": $nd."postcopy-blocktime",
    "postcopy at once over rdma: guest blocked per migrated GiB, ms": per_gib($nd."postcopy-blocktime"; $ns.ram.transferred),
    "postcopy over tcp total, ms": $ts."total-time",
    "fault latency over rdma p50 / p99 / max, us":
      "\(us(lat($rd)."p50-us")) / \(us(lat($rd)."p99-us")) / \(us(lat($rd)."max-us")) (\(lat($rd).count // "-") faults)",
    "fault latency over tcp p50 / p99 / max, us":
      "\(us(lat($td)."p50-us")) / \(us(lat($td)."p99-us")) / \(us(lat($td)."max-us")) (\(lat($td).count // "-") faults)",
    "of which at the source (a request read until its page was written, x-serve-latency) p50 / p99, rdma / tcp, us":
      "\($rs."x-postcopy"."x-serve-latency"."p50-us" // "-" | if type == "number" then round else . end) / \($rs."x-postcopy"."x-serve-latency"."p99-us" // "-" | if type == "number" then round else . end), \($ts."x-postcopy"."x-serve-latency"."p50-us" // "-" | if type == "number" then round else . end) / \($ts."x-postcopy"."x-serve-latency"."p99-us" // "-" | if type == "number" then round else . end)",
    "rdma p50 / tcp p50 (target <= 0.5)": ratio(lat($rd)."p50-us"; lat($td)."p50-us"),
    "rdma p50 / (ib_write_lat + ib_send_lat) (target <= 3)": ratio(lat($rd)."p50-us"; $floor),
    "guest blocked over rdma (all vCPUs), ms": $rd."postcopy-blocktime",
    "guest blocked over rdma per migrated GiB, ms": per_gib($rd."postcopy-blocktime"; $rs.ram.transferred),
    "the guest's own longest stall in postcopy (its clock reads), rdma / tcp / at once over rdma, ms":
      "\($rd."x-guest-postcopy-stall-ms" // "-") / \($td."x-guest-postcopy-stall-ms" // "-") / \($nd."x-guest-postcopy-stall-ms" // "-")",
    "guest blocked over tcp (all vCPUs), ms": $td."postcopy-blocktime",
    "guest blocked over tcp per migrated GiB, ms": per_gib($td."postcopy-blocktime"; $ts.ram.transferred),
    "postcopy requests over rdma / tcp": "\($rd."x-postcopy".requests // "-") / \($td."x-postcopy".requests // "-")",
    "same guest, nothing prefilled: ours over tcp total, ms": $bs."total-time",
    "same guest: ours over tcp guest blocked per migrated GiB, ms": per_gib($bd."postcopy-blocktime"; $bs.ram.transferred),
    "QEMU 7.2 postcopy over tcp total, ms": (if $qemu[0].failed then null else $qs."total-time" end),
    "QEMU 7.2 postcopy failed": ($qemu[0].failed // null),
    "QEMU 7.2 guest blocked (postcopy-blocktime), ms": ($qd."postcopy-blocktime" // null),
    "QEMU 7.2 guest blocked per migrated GiB, ms": per_gib($qd."postcopy-blocktime"; $qs.ram.transferred),
    "ours / QEMU total time, same guest over tcp (target <= 1)": (if $qemu[0].failed then null else ratio($bs."total-time"; $qs."total-time") end),
    "ours / QEMU guest blocked time, same guest over tcp (target <= 1)": ratio($bd."postcopy-blocktime"; $qd."postcopy-blocktime"),
    "the guest's own stalls (its TSC, gaps >= \($bare[0].guest.stall_floor_us // "-") us) from migrate to a second after it ended: ours over tcp / QEMU 7.2, same guest":
      "\(stalls($bare[0].guest) // "-") / \(stalls($qemu[0].guest) // "-")",
    "ours / QEMU, what migrating added to the guest's own stalled time, same guest over tcp (target <= 1)":
      ratio(excess($bare[0].guest); excess($qemu[0].guest)),
    "the guest's own stalls: postcopy over rdma / over tcp / at once over rdma":
      "\(stalls($rdma[0].guest) // "-") / \(stalls($tcp[0].guest) // "-") / \(stalls($now[0].guest) // "-")"
  },
  arrivals_note: "over rdma; requested: pages a vCPU (or the VMM) faulted on and waited for; pushed: placed by the background push before anything touched them",
  arrivals: [$arr[] | {t, requested, pushed: (.placed - .requested)}],
  latencies: {before: $lb[0], after: $la[0]},
  failed: ([{latencies_before: $lb[0], once_rdma: $once[0], postcopy_rdma: $rdma[0], postcopy_at_once_rdma: $now[0],
             postcopy_tcp: $tcp[0], postcopy_tcp_bare: $bare[0], postcopy_qemu: $qemu[0], latencies_after: $la[0]}
            | to_entries[] | select(.value.failed != null) | {run: .key, why: .value.failed, logs: .value.logs}]),
  runs: {once_rdma: $once[0], postcopy_rdma: $rdma[0], postcopy_at_once_rdma: $now[0], postcopy_tcp: $tcp[0],
         postcopy_tcp_bare: $bare[0],
         postcopy_qemu: $qemu[0]}
}
| .summary |= with_entries(select(.value != null))
