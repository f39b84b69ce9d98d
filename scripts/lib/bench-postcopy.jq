# bench-postcopy.sh's report: the three runs' last query-migrate on both sides, the arrivals
# series, and a summary of the ratios the targets name (docs/performance.md).
def gib: . / 1073741824;
def lat(d): d."x-postcopy"."fault-latency";
def stalls(g): if g == null then null else "\(g.stalled_ms) ms in \(g.stalls) stalls over \(g.window_ms) ms; \(g.excess_ms // "-") ms more than its stalled share before migrate (\(if g.stalled_share_before == null then "-" else (g.stalled_share_before * 1000 | round / 10) end) %)" end;
def excess(g): if g == null then null else g.excess_ms end;
def per_gib(ms; bytes): if (ms | type) == "number" and (bytes | type) == "number" and bytes > 0
                        then (ms / (bytes | gib) * 10 | round / 10) else null end;
# A run that failed has no figures ({"failed": why}): everything that needs them reads null or "-".
def ratio(a; b): if (a | type) == "number" and (b | type) == "number" and b > 0 then (a / b * 100 | round / 100) else null end;
def us(x): if (x | type) == "number" then x | round else "-" end;
($once[0].source) as $o | ($pc[0].source) as $ps | ($pc[0].destination) as $pd | ($pre[0].source) as $r |
($now[0].source) as $ns | ($now[0].destination) as $nd | ($mfd[0].source) as $fs | ($mfd[0].destination) as $fd |
def bulk_mbs(s): (s."x-round-log" // [])[0] as $r | if $r and $r.seconds > 0 then ($r.bytes / $r.seconds / 1e6 * 10 | round / 10) else null end;
($plain[0].destination) as $ld | ($pmt[0].destination) as $md |
{
  guest: {mem: $mem, fill: $fill, hot: $hot, dirty_rate_mib_s: $rate, cap_mib_s: ($cap / 1048576)},
  summary: {
    "send RAM once (guest paused), ms": $o."total-time",
    "postcopy total, ms": $ps."total-time",
    "postcopy / once (target <= 1.5)": ratio($ps."total-time"; $o."total-time"),
    "postcopy with multifd (2 lanes) total, ms": $fs."total-time",
    "postcopy with multifd / postcopy alone, total": ratio($fs."total-time"; $ps."total-time"),
    "postcopy with multifd: guest blocked (all vCPUs), ms, against postcopy alone": "\($fd."postcopy-blocktime" // "-") / \($pd."postcopy-blocktime" // "-")",
    "bulk round before the switch, MB/s: multifd lanes / one connection": "\(bulk_mbs($fs) // "-") / \(bulk_mbs($ps) // "-")",
    "postcopy at once (migrate_start_postcopy right after migrate) total, ms": $ns."total-time",
    "postcopy at once / once (target <= 1.5)": ratio($ns."total-time"; $o."total-time"),
    "postcopy at once: guest blocked (all vCPUs), ms": $nd."postcopy-blocktime",
    "postcopy at once: guest blocked per migrated GiB, ms": per_gib($nd."postcopy-blocktime"; $ns.ram.transferred),
    "postcopy at once: requests": $nd."x-postcopy".requests,
    "postcopy at once: the guest's own longest stall (its clock reads), ms": ($nd."x-guest-postcopy-stall-ms" // null),
    "over a \($link) link, push uncapped: fault latency p50 / p99 / max, us, plain":
      "\(us(lat($ld)."p50-us")) / \(us(lat($ld)."p99-us")) / \(us(lat($ld)."max-us")) (\(lat($ld).count // "-") faults)",
    "over a \($link) link, push uncapped: fault latency p50 / p99 / max, us, postcopy-preempt":
      "\(us(lat($md)."p50-us")) / \(us(lat($md)."p99-us")) / \(us(lat($md)."max-us")) (\(lat($md).count // "-") faults)",
    "over a \($link) link: preempt p50 / plain p50": ratio(lat($md)."p50-us"; lat($ld)."p50-us"),
    "over a \($link) link: guest blocked, ms, plain / postcopy-preempt": "\($ld."postcopy-blocktime") / \($md."postcopy-blocktime")",
    "over a \($link) link: total, ms, plain / postcopy-preempt": "\($plain[0].source."total-time") / \($pmt[0].source."total-time")",
    "precopy + auto-converge total, ms": $r."total-time",
    "precopy + auto-converge / once": ratio($r."total-time"; $o."total-time"),
    "postcopy switch pause, ms": $ps."x-postcopy"."switch-ms",
    "postcopy missing pages at the switch": $ps."x-postcopy"."missing-pages",
    "postcopy requests": $pd."x-postcopy".requests,
    "postcopy fault latency p50 / p99 / max, us":
      "\(us($pd."x-postcopy"."fault-latency"."p50-us")) / \(us($pd."x-postcopy"."fault-latency"."p99-us")) / \(us($pd."x-postcopy"."fault-latency"."max-us"))",
    "postcopy guest blocked (all vCPUs), ms": $pd."postcopy-blocktime",
    "postcopy guest blocked per migrated GiB, ms": per_gib($pd."postcopy-blocktime"; $ps.ram.transferred),
    "postcopy: the guest's own longest stall (its clock reads), ms": ($pd."x-guest-postcopy-stall-ms" // null),
    "precopy downtime, ms": $r.downtime,
    "precopy guest blocked (downtime) per migrated GiB, ms": per_gib($r.downtime; $r.ram.transferred),
    "precopy: the guest's own longest stall while it ran there / across the switchover, ms":
      "\($r."x-guest-migration-stall-ms" // "-") / \($pre[0].destination."x-guest-switchover-pause-ms" // "-")",
    "precopy rounds": $r."x-rounds",
    "the guest's own stalls (its TSC, gaps >= \($pc[0].guest.stall_floor_us // "-") us), from migrate to a second after it ended: postcopy":
      stalls($pc[0].guest),
    "the guest's own stalls: postcopy at once": stalls($now[0].guest),
    "the guest's own stalls: precopy + auto-converge": stalls($pre[0].guest),
    "the guest's own stalls over a \($link) link: plain / postcopy-preempt":
      "\(stalls($plain[0].guest) // "-") / \(stalls($pmt[0].guest) // "-")"
  },
  failed: ([{once: $once[0], postcopy: $pc[0], postcopy_multifd: $mfd[0], postcopy_at_once: $now[0], precopy_auto_converge: $pre[0],
             postcopy_link_plain: $plain[0], postcopy_link_preempt: $pmt[0]} | to_entries[]
            | select(.value.failed != null) | {run: .key, why: .value.failed, logs: .value.logs}]),
  arrivals_note: "requested: pages a vCPU (or the VMM) faulted on and waited for; pushed: placed by the background push before anything touched them",
  arrivals: [$arr[] | {t, requested, pushed: (.placed - .requested)}],
  runs: {once: $once[0], postcopy: $pc[0], postcopy_multifd: $mfd[0], postcopy_at_once: $now[0], precopy_auto_converge: $pre[0],
         postcopy_link_plain: $plain[0], postcopy_link_preempt: $pmt[0]}
}
| .summary |= with_entries(select(.value != null))
