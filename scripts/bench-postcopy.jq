# bench-postcopy.sh's report: the three runs' last query-migrate on both sides, the arrivals
# series, and a summary of the ratios the targets name (docs/performance.md).
def gib: . / 1073741824;
def per_gib(ms; bytes): if bytes > 0 then (ms / (bytes | gib) * 10 | round / 10) else null end;
($once[0].source) as $o | ($pc[0].source) as $ps | ($pc[0].destination) as $pd | ($pre[0].source) as $r |
{
  guest: {mem: $mem, fill: $fill, hot: $hot, dirty_rate_mib_s: $rate, cap_mib_s: ($cap / 1048576)},
  summary: {
    "send RAM once (guest paused), ms": $o."total-time",
    "postcopy total, ms": $ps."total-time",
    "postcopy / once (target <= 1.5)": (($ps."total-time" / $o."total-time") * 100 | round / 100),
    "precopy + auto-converge total, ms": $r."total-time",
    "precopy + auto-converge / once": (($r."total-time" / $o."total-time") * 100 | round / 100),
    "postcopy switch pause, ms": $ps."x-postcopy"."switch-ms",
    "postcopy missing pages at the switch": $ps."x-postcopy"."missing-pages",
    "postcopy requests": $pd."x-postcopy".requests,
    "postcopy fault latency p50 / p99 / max, us":
      "\($pd."x-postcopy"."fault-latency"."p50-us" | round) / \($pd."x-postcopy"."fault-latency"."p99-us" | round) / \($pd."x-postcopy"."fault-latency"."max-us" | round)",
    "postcopy guest blocked (all vCPUs), ms": $pd."postcopy-blocktime",
    "postcopy guest blocked per migrated GiB, ms": per_gib($pd."postcopy-blocktime"; $ps.ram.transferred),
    "postcopy guest's own longest pause (control device), ms": ($pd."x-guest-max-pause-ms" // null),
    "precopy downtime, ms": $r.downtime,
    "precopy guest blocked (downtime) per migrated GiB, ms": per_gib($r.downtime; $r.ram.transferred),
    "precopy guest's own longest pause (control device), ms": ($pre[0].destination."x-guest-max-pause-ms" // null),
    "precopy rounds": $r."x-rounds"
  },
  arrivals_note: "requested: pages a vCPU (or the VMM) faulted on and waited for; pushed: placed by the background push before anything touched them",
  arrivals: [$arr[] | {t, requested, pushed: (.placed - .requested)}],
  runs: {once: $once[0], postcopy: $pc[0], precopy_auto_converge: $pre[0]}
}
| .summary |= with_entries(select(.value != null))
