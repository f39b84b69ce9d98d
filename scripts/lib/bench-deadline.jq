# bench-deadline.sh's tables from its results (one JSON object per run, slurped). jq 1.6: no
# string interpolation inside another; strings are joined with +.
def pad($n): tostring | if length >= $n then . else . + (" " * ($n - length)) end;
def rpad($n): tostring | if length >= $n then . else (" " * ($n - length)) + . end;
def s: if . == null then "-" else ((. / 100 | round) / 10 | tostring) + " s" end;
def pct: if . == null then "-" else ((. * 100 | round) | tostring) + " %" end;
def err($pred; $real): if $pred == null or $real == null or $real == 0 then null else (($pred - $real) / $real) end;
def abs: if . < 0 then -. else . end;
def r1: . * 10 | round / 10;
def yn: if . then "yes" else "no" end;
def met: .status == "completed" and .total_ms <= .deadline_ms;
def ms: if . == null then "-" else (tostring + " ms") end;
def with_errors: if .status != "completed" then . + {err_early: null, err_first: null, err_last: null} else
                 . + {err_early: err(.pred_early_ms; .total_ms), err_first: err(.pred_first_ms; .total_ms),
                      err_last: err(.pred_last_ms; .total_ms)} end;
def measured: if .status == "completed" then (.total_ms | s) else .status end;
def planned: if .plan.converges then (.plan["total-ms"] | s) else "never" end;
# A plan's verdict held: it said "ends" and the run completed, or "never" and it did not.
def verdict_held: (.plan.converges and .status == "completed") or ((.plan.converges | not) and .status != "completed");
# A plan that says "ends" after the run's bound was not checked by it.
def verdict_checked: (.plan.converges | not) or .bound_ms == null or .plan["total-ms"] <= .bound_ms;

[.[] | select(.kind == "precopy") | with_errors] as $pre |
. as $all |
# The last pause as it would be on a link of the cap's rate: both VMMs send the stop-and-copy
# uncapped, which on loopback takes milliseconds whatever it carries.
def pause_at_cap: if .downtime_ms == null then null else
                  [.downtime_ms, ((.downtime_bytes // 0) / (.cap * 1048576) * 1000 | round)] | max end;
# The total and the verdict with that pause: a pause that only loopback made short keeps no deadline.
def total_at_cap: if .total_ms == null then null else .total_ms - (.downtime_ms // 0) + (pause_at_cap // 0) end;
def met_at_cap: .status == "completed" and total_at_cap <= .deadline_ms;
def measured_at_cap: if .status == "completed" then (total_at_cap | s) else .status end;
# What keeping (or missing) D cost the guest: throttled + blocked, and the last pause at the cap
# (where the blocked time holds the pause as measured already, QEMU's force_complete pause, what
# the cap adds to it).
def cost: .blocked_ms + .throttled_ms +
          (if .status != "completed" then 0 elif (.paused_ms // 0) > 0 then pause_at_cap - .downtime_ms else pause_at_cap end);
def cell($k; $v): [$all[] | select(.kind == $k and .cap == $v.cap and .guest == $v.guest)] | .[0];
# What the deadline keeper did in a run, from the source's log lines: "pause", "throttle", "ease", in turn.
def chose: [(.acted // [])[] | if test("downtime-limit raised") then "pause" elif test("eased to") then "ease" else "throttle" end] |
           if length == 0 then "nothing" else join(",") end;
def run3: if . == null then ("-" | pad(26)) else ((measured_at_cap | rpad(7)) + " " + (met_at_cap | yn | pad(3)) + " " + (cost | ms | rpad(9)) + " " + (pause_at_cap | ms | rpad(8))) end;
[{name: "post-copy permitted", vmm: "vmm", qemu: "qemu",
  title: "Deadlines, post-copy permitted: vmm (x-deadline D, x-deadline-strategy postcopy) beside QEMU 7.2 under Nova's policy (downtime-limit 50 -> 500 ms in steps, post-copy at D)"},
 {name: "auto-converge", vmm: "vmm-ac", qemu: "qemu-ac",
  title: "Deadlines, post-copy not permitted: vmm (x-deadline D, x-deadline-strategy throttle) beside QEMU 7.2 under Nova's policy (auto-converge, downtime-limit 50 -> 500 ms in steps, the guest paused at D; blocked = paused)"}] as $variants |
[.[] | select(.kind == "tight")] as $tight |
([$pre[] | select(.status == "completed" and .plan.converges)]) as $done |

"Plans and ETAs: vmm, precopy alone (run up to its bound even when the plan says it never ends)",
"cap MiB/s  guest   dirty MiB/s (x link)  plan     measured   1 s in (error)        after round 1 (error)  last round (error)  rounds",
($pre[] |
  (.cap | rpad(9)) + "  " + (.guest | pad(6)) + "  " + ((.dirty_rate | r1 | tostring) + " (" + ((.dirty_rate / .cap * 100 | round) / 100 | tostring) + ")" | pad(20)) +
  "  " + (planned | pad(7)) + "  " + (measured | pad(9)) + "  " +
  ((.pred_early_ms | s) + " (" + (.err_early | pct) + ")" | pad(20)) + "  " +
  ((.pred_first_ms | s) + " (" + (.err_first | pct) + ")" | pad(21)) + "  " + ((.pred_last_ms | s) + " (" + (.err_last | pct) + ")" | pad(18)) +
  "  " + (.rounds // "-" | tostring)),
"",
($variants[] | . as $var | ([$all[] | select(.kind == $var.vmm)]) as $vmm | ([$all[] | select(.kind == $var.qemu)]) as $qemu |
  select($vmm | length > 0) |
  ($var.title,
   "cap  guest   D       floor   plan      | vmm: total  met  postcopy blocked  throttled downtime | QEMU: total  met  postcopy blocked  throttled downtime",
   ($vmm[] | . as $v | ([$qemu[] | select(.cap == $v.cap and .guest == $v.guest)] | .[0]) as $q |
     (.cap | rpad(3)) + "  " + (.guest | pad(6)) + "  " + (.deadline_ms | s | pad(6)) + "  " + (.floor_ms | s | pad(6)) + "  " +
     (if .feasible then "feasible" else "not" end | pad(8)) + "  | " + (measured | rpad(10)) + "  " + (met | yn | pad(3)) + "  " +
     (.postcopy | yn | pad(8)) + " " + (.blocked_ms | ms | pad(8)) + " " + (.throttled_ms | ms | pad(9)) + " " + (.downtime_ms | ms | pad(8)) + " | " +
     (if $q == null then "-" else
       ($q | measured | rpad(11)) + "  " + ($q | met | yn | pad(3)) + "  " + ($q.postcopy | yn | pad(8)) + " " +
       ($q.blocked_ms | ms | pad(8)) + " " + ($q.throttled_ms | ms | pad(9)) + " " + ($q.downtime_ms | ms) end)),
   "")),
(([$all[] | select(.kind == "vmm-ac")]) as $ac | select($ac | length > 0) |
  ("Keeping D without post-copy, by what the guest gives up (cost: throttled + blocked + the last pause, taken at the cap's rate): vmm throttle, vmm one pause (x-deadline-strategy downtime, x-deadline-max-downtime D), QEMU 7.2 under Nova's policy (paused at D)",
   "(totals and verdicts with that pause too)",
   "cap  guest   D       | throttle: total met cost      pause     | one pause: total met cost  pause     | QEMU: total met cost      pause",
   ($ac[] | . as $v | (.cap | rpad(3)) + "  " + (.guest | pad(6)) + "  " + (.deadline_ms | s | pad(6)) + "  | " + (run3 | pad(42)) + "| " +
     (cell("vmm-dt"; $v) | run3 | pad(36)) + "| " + (cell("qemu-ac"; $v) | run3)),
   "",
   "x-deadline-strategy cheapest (the same D, x-deadline-max-downtime D): what it chose, against the two above (cost, each last pause at the cap)",
   "cap  guest   D       | cheapest: total met cost      pause    chose             | throttle cost | one pause cost | the cheaper",
   ($all[] | select(.kind == "vmm-ch") | . as $v | cell("vmm-ac"; $v) as $t | cell("vmm-dt"; $v) as $p |
     (.cap | rpad(3)) + "  " + (.guest | pad(6)) + "  " + (.deadline_ms | s | pad(6)) + "  | " + (run3 | pad(30)) + "  " + (chose | pad(17)) + " | " +
     (if $t == null then "-" else ($t | cost | ms) + (if ($t | met_at_cap) then "" else " (missed)" end) end | rpad(13)) + " | " +
     (if $p == null then "-" else ($p | cost | ms) + (if ($p | met_at_cap) then "" else " (missed)" end) end | rpad(14)) + " | " +
     (if $t == null or $p == null then "-" elif ($t | cost) < ($p | cost) then "throttle" else "one pause" end)),
   "",
   "The same at QEMU's end: where QEMU ended after D, vmm on its own guest with x-deadline D' = the time QEMU took",
   "cap  guest   D'      | throttle: total met cost      pause     | one pause: total met cost  pause     | QEMU: total     cost      pause",
   ($all[] | select(.kind == "vmm-ac-late") | . as $v | (.cap | rpad(3)) + "  " + (.guest | pad(6)) + "  " + (.deadline_ms | s | pad(6)) + "  | " +
     (run3 | pad(42)) + "| " + (cell("vmm-dt-late"; $v) | run3 | pad(36)) + "| " +
     (cell("qemu-ac"; $v) | (measured_at_cap | rpad(7)) + "     " + (cost | ms | rpad(9)) + " " + (pause_at_cap | ms | rpad(8)))),
   "")),
"Deadlines no migration could meet (D = half what the populated RAM takes at the cap): vmm must say so at once",
($tight[] | "cap " + (.cap | tostring) + " " + (.guest | pad(6)) + " D " + (.deadline_ms | s | pad(6)) + ": " + .status +
  " after " + (.first_s // "-" | tostring) + " s, source " + .source_after + ": " + (.error // "(no error)")),
"",
"Summary",
(($done | map(select(.err_first != null))) as $p | ($p | map(select((.err_first | abs) <= 0.2)) | length) as $k |
  "  the prediction once the first round ended, within +-20 % of the measured total: " + ($k | tostring) + " of " +
  ($p | length | tostring) + " precopy runs with a round after the first (the issue asks >= 80 %)"),
(($done | map(select(.err_early != null))) as $p | ($p | map(select((.err_early | abs) <= 0.2)) | length) as $k |
  "  the prediction 1 s in, within +-20 %: " + ($k | tostring) + " of " + ($p | length | tostring) + " precopy runs that ended"),
(($pre | map(select(verdict_checked))) as $c | ($c | map(select(verdict_held)) | length) as $k |
  "  the plan's verdict before migrating (ends / never) held: " + ($k | tostring) + " of " + ($c | length | tostring) +
  (($pre | length) - ($c | length) | if . > 0 then " (" + tostring + " more said \"ends\" after the run's bound: not checked)" else "" end)),
(($done | map(select(.err_early != null and .err_last != null))) as $p |
  ($p | map(select((.err_last | abs) <= (.err_early | abs) / 2 or (.err_last | abs) <= 0.02)) | length) as $k |
  "  the ETA's error at the last round's start at most half its error 1 s in (or within 2 %): " + ($k | tostring) + " of " +
  ($p | length | tostring) + " runs with 3 rounds or more"),
# The same two against the total with the last pause at the cap (the measured one is short by
# what loopback carried uncapped, which the predictions, at the link's rate, do not assume).
(($done | map(select(.downtime_bytes != null and .pred_first_ms != null))) as $p | select($p | length > 0) |
  ($p | map(select((err(.pred_first_ms; total_at_cap) | abs) <= 0.2)) | length) as $k |
  ($p | map(select(.pred_early_ms != null and .pred_last_ms != null)) |
    map((err(.pred_early_ms; total_at_cap) | abs) as $e | (err(.pred_last_ms; total_at_cap) | abs) as $l |
        select($l <= $e / 2 or $l <= 0.02))) as $h |
  ($p | map(select(.pred_early_ms != null and .pred_last_ms != null)) | length) as $n |
  "  with the last pause at the cap: the prediction once the first round ended within +-20 %: " + ($k | tostring) + " of " +
  ($p | length | tostring) + "; the ETA's error halved by the last round's start (or within 2 %): " + ($h | length | tostring) +
  " of " + ($n | tostring)),
($variants[] | . as $var | ([$all[] | select(.kind == $var.vmm)]) as $vmm | ([$all[] | select(.kind == $var.qemu)]) as $qemu |
  select($vmm | length > 0) |
  (($vmm | map(select(.feasible))) as $f |
    "  " + $var.name + ": vmm, feasible by its plan: " + ($f | map(select(met)) | length | tostring) + " of " + ($f | length | tostring) +
    " met the deadline; not feasible by its plan: " + ($vmm | map(select(.feasible | not)) | length | tostring)),
  ("  " + $var.name + ": deadlines missed: vmm " + ($vmm | map(select(met | not)) | length | tostring) + " of " + ($vmm | length | tostring) +
    ", QEMU 7.2 " + ($qemu | map(select(met | not)) | length | tostring) + " of " + ($qemu | length | tostring)),
  (([$vmm[] | . as $v | ([$qemu[] | select(.cap == $v.cap and .guest == $v.guest and .status == "completed")] | .[0]) as $q |
     select($v.status == "completed" and $q != null) | {v: ($v.blocked_ms + $v.throttled_ms), q: ($q.blocked_ms + $q.throttled_ms)}]) as $both |
    "  " + $var.name + ": guest throttled + blocked, the runs both completed (" + ($both | length | tostring) + "): vmm " +
    ($both | map(.v) | add // 0 | tostring) + " ms, QEMU 7.2 " + ($both | map(.q) | add // 0 | tostring) + " ms")),
# The plan's one-pause row before migrating against the run, its pause at the cap.
(([$all[] | select((.kind == "vmm-dt" or .kind == "vmm-dt-late") and .status == "completed" and .planned.converges)]) as $p |
  select($p | length > 0) |
  ($p | map(select((err(.planned["total-ms"]; total_at_cap) | abs) <= 0.2)) | length) as $k |
  "  the plan's one pause, made before migrating, within +-20 % of the total (the pause at the cap): " + ($k | tostring) +
  " of " + ($p | length | tostring) + "; its pause within +-20 %: " +
  ($p | map(select((err(.planned["downtime-ms"]; pause_at_cap) | abs) <= 0.2)) | length | tostring) + " of " + ($p | length | tostring)),
("  said at once that the deadline cannot be met (failed within 1 s saying so): " +
  ($tight | map(select(.status == "failed" and (.first_s // 99) <= 1 and ((.error // "") | test("cannot be met")))) | length | tostring) +
  " of " + ($tight | length | tostring) + "; the source running on after: " + ($tight | map(select(.source_after == "running")) | length | tostring))
,
# Each vmm strategy against QEMU where both completed: at D, and at QEMU's end.
# cheapest against the cheaper of the two arms that each take one way, where all three met D (at the cap).
(([$all[] | select(.kind == "vmm-ch")]) as $ch | select($ch | length > 0) |
  ([$ch[] | . as $v | cell("vmm-ac"; $v) as $t | cell("vmm-dt"; $v) as $p |
    select(($v | met_at_cap) and $t != null and $p != null and ($t | met_at_cap) and ($p | met_at_cap)) |
    {c: ($v | cost), t: ($t | cost), p: ($p | cost)} | . + {m: ([.t, .p] | min)}]) as $all3 |
  "  cheapest: deadlines met (the last pause at the cap) " + ($ch | map(select(met_at_cap)) | length | tostring) + " of " +
  ($ch | length | tostring) + "; where it and both single strategies met D (" + ($all3 | length | tostring) +
  "): cost no more than 1.2 x the cheaper of the two in " + ($all3 | map(select(.c <= 1.2 * .m + 100)) | length | tostring) +
  "; cost " + ($all3 | map(.c) | add // 0 | tostring) + " ms, against the cheaper's " + ($all3 | map(.m) | add // 0 | tostring) +
  " ms, throttle's " + ($all3 | map(.t) | add // 0 | tostring) + " ms, one pause's " + ($all3 | map(.p) | add // 0 | tostring) + " ms"),
(["vmm-ac", "vmm-dt", "vmm-ac-late", "vmm-dt-late"][] as $k | ([$all[] | select(.kind == $k)]) as $runs | select($runs | length > 0) |
  ([$runs[] | . as $v | cell("qemu-ac"; $v) as $q | select($v.status == "completed" and $q != null and $q.status == "completed") |
    {v: ($v | cost), q: ($q | cost)}]) as $both |
  "  " + ({"vmm-ac": "at D, throttle", "vmm-dt": "at D, one pause", "vmm-ac-late": "at QEMU's end, throttle",
           "vmm-dt-late": "at QEMU's end, one pause"}[$k]) + ": deadlines met (the last pause at the cap) " +
  ($runs | map(select(met_at_cap)) | length | tostring) + " of " + ($runs | length | tostring) +
  "; cost (throttled + blocked + pause) where both completed (" + ($both | length | tostring) + "): vmm " +
  ($both | map(.v) | add // 0 | tostring) + " ms, QEMU 7.2 " + ($both | map(.q) | add // 0 | tostring) + " ms")
