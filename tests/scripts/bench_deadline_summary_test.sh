#!/usr/bin/env bash
# scripts/lib/bench-deadline.jq over made-up runs whose verdicts are known: a prediction within
# and one outside +-20 %, an ETA whose error halves and one whose does not, a deadline met and
# one missed on each side, a plan's "never" that held and one that did not, one past the run's
# bound, a deadline refused at once and one refused late; and where post-copy is not permitted,
# each last pause counted at the cap. Usage: bench_deadline_summary_test.sh SOURCE_DIR
set -euo pipefail
jqf=$1/scripts/lib/bench-deadline.jq
command -v jq >/dev/null || { echo "SKIP: needs jq (Debian package jq)"; exit 77; }
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
expect() { grep -qF -- "$1" <<<"$out" || fail "'$1' not in the summary"; echo "ok: $1"; }

# precopy GUEST CONVERGES STATUS TOTAL EARLY FIRST LAST
precopy() {
    jq -nc --arg g "$1" --argjson c "$2" --arg st "$3" --argjson t "$4" --argjson e "$5" --argjson f "$6" --argjson l "$7" \
        '{kind: "precopy", guest: $g, cap: 4, dirty_rate: 1, plan: {converges: $c, "total-ms": 1000}, status: $st,
          total_ms: $t, pred_early_ms: $e, pred_first_ms: $f, pred_last_ms: $l, rounds: 4}'
}
# deadline KIND GUEST TOTAL D BLOCKED [STATUS]
deadline() {
    jq -nc --arg k "$1" --arg g "$2" --argjson t "$3" --argjson d "$4" --argjson b "$5" --arg st "${6:-completed}" \
        '{kind: $k, guest: $g, cap: 4, deadline_ms: $d, floor_ms: 1000, feasible: true, status: $st, total_ms: $t,
          blocked_ms: $b, throttled_ms: 0, postcopy: false, downtime_ms: 5}'
}
# last KIND GUEST TOTAL D THROTTLED DOWNTIME DOWNTIME_BYTES PAUSED [STATUS]: a no-post-copy run whose
# last pause counts at the cap (4 MiB/s: 4 MiB is 1000 ms)
last() {
    jq -nc --arg k "$1" --arg g "$2" --argjson t "$3" --argjson d "$4" --argjson th "$5" --argjson dt "$6" \
        --argjson db "$7" --argjson p "$8" --arg st "${9:-completed}" \
        '{kind: $k, guest: $g, cap: 4, deadline_ms: $d, floor_ms: 1000, feasible: true, status: $st, total_ms: $t,
          blocked_ms: $p, paused_ms: $p, throttled_ms: $th, postcopy: false, downtime_ms: $dt, downtime_bytes: $db}'
}
# tight GUEST STATUS FIRST_S ERROR
tight() {
    jq -nc --arg g "$1" --arg st "$2" --argjson s "$3" --arg e "$4" \
        '{kind: "tight", guest: $g, cap: 4, deadline_ms: 500, floor_ms: 1000, status: $st, first_s: $s, error: $e, source_after: "running"}'
}
out=$({
    precopy a true completed 10000 13000 10500 10100   # after round 1: +5 %; ETA 30 % -> 1 %: halves
    precopy b true completed 10000 10500 13000 10400   # after round 1: +30 %; ETA 5 % -> 4 %: does not halve
    precopy c false cancelled 20000 null null null     # "never", and it did not end: held
    precopy d false completed 5000 null null null      # "never", but it ended: not held
    precopy e true cancelled 3000 null null null | jq -c '. + {bound_ms: 900}'  # "ends" after its bound: not checked
    # Its last pause 4 MiB, 1 s at the cap: 25 % -> 15 % as measured (not halved), 13.6 % -> 4.6 %
    # against the 10.995 s at the cap (halved).
    precopy f true completed 10000 12500 11000 11500 | jq -c '. + {downtime_ms: 5, downtime_bytes: 4194304}'
    deadline vmm a 900 1000 10; deadline qemu a 1200 1000 300          # QEMU misses
    deadline vmm b 1100 1000 20; deadline qemu b 800 1000 40           # vmm misses
    deadline vmm c 0 1000 0 failed                                     # failed: missed, not a "both completed" pair
    deadline vmm-ac a 950 1000 0; deadline qemu-ac a 1400 1000 600     # post-copy not permitted: QEMU paused 600 ms
    deadline vmm-ac b 0 1000 0 cancelled; deadline qemu-ac b 1300 1000 250
    # Guest p at D 10 s: a throttle of 2 s, and a last pause of 8 MiB measured as 5 ms (2 s at the
    # cap), ending 1.995 s later than measured; QEMU paused 1 s, then sent 4 MiB in 3 ms (+0.997 s).
    # The plan's one pause: 10 s with a 2 s pause (within 20 % of 10.495 s and of 2 s), then 8 s
    # with 1 s (the total 24 % short, the pause 50 %).
    last vmm-ac p 9000 10000 2000 5 0 0
    last vmm-dt p 8500 10000 0 5 8388608 0 | jq -c '. + {planned: {"total-ms": 10000, "downtime-ms": 2000, converges: true}}'
    last qemu-ac p 11000 10000 0 3 4194304 1000
    last vmm-ac-late p 10000 12000 1500 5 0 0
    last vmm-dt-late p 8500 12000 0 5 8388608 0 | jq -c '. + {planned: {"total-ms": 8000, "downtime-ms": 1000, converges: true}}'
    tight a failed 0.3 "x-deadline 0.5 s cannot be met: ..."
    tight b failed 2.5 "x-deadline 0.5 s cannot be met: ..."
} | jq -s -r -f "$jqf")
expect "within +-20 % of the measured total: 2 of 3 precopy runs"
expect "the prediction 1 s in, within +-20 %: 1 of 3"
expect "the plan's verdict before migrating (ends / never) held: 4 of 5 (1 more said \"ends\" after the run's bound: not checked)"
expect "at most half its error 1 s in (or within 2 %): 1 of 3 runs"
expect "with the last pause at the cap: the prediction once the first round ended within +-20 %: 1 of 1; the ETA's error halved by the last round's start (or within 2 %): 1 of 1"
expect "post-copy permitted: vmm, feasible by its plan: 1 of 3 met the deadline"
expect "post-copy permitted: deadlines missed: vmm 2 of 3, QEMU 7.2 1 of 2"
expect "post-copy permitted: guest throttled + blocked, the runs both completed (2): vmm 30 ms, QEMU 7.2 340 ms"
expect "auto-converge: vmm, feasible by its plan: 2 of 3 met the deadline"
expect "auto-converge: deadlines missed: vmm 1 of 3, QEMU 7.2 3 of 3"
expect "auto-converge: guest throttled + blocked, the runs both completed (2): vmm 2000 ms, QEMU 7.2 1600 ms"
# Each last pause at the cap: guest p's one pause (measured 5 ms) misses D by 0.495 s at the cap;
# QEMU's pause grows by what its 4 MiB completion takes there (997 ms).
expect "at D, throttle: deadlines met (the last pause at the cap) 2 of 3; cost (throttled + blocked + pause) where both completed (2): vmm 2010 ms, QEMU 7.2 2602 ms"
expect "at D, one pause: deadlines met (the last pause at the cap) 0 of 1; cost (throttled + blocked + pause) where both completed (1): vmm 2000 ms, QEMU 7.2 1997 ms"
expect "at QEMU's end, throttle: deadlines met (the last pause at the cap) 1 of 1; cost (throttled + blocked + pause) where both completed (1): vmm 1505 ms, QEMU 7.2 1997 ms"
expect "at QEMU's end, one pause: deadlines met (the last pause at the cap) 1 of 1; cost (throttled + blocked + pause) where both completed (1): vmm 2000 ms, QEMU 7.2 1997 ms"
expect "  4  p       10 s    |     9 s yes   2005 ms     5 ms            |  10.5 s no    2000 ms  2000 ms      |    12 s no    1997 ms  1000 ms"
expect "the plan's one pause, made before migrating, within +-20 % of the total (the pause at the cap): 1 of 2; its pause within +-20 %: 1 of 2"
expect "Deadlines, post-copy not permitted"
expect "said at once that the deadline cannot be met (failed within 1 s saying so): 1 of 2"

# x-deadline-strategy cheapest beside the two single strategies: guest q dirties faster than the
# link (one pause of 4 MiB, 1 s at the cap, against 3 s throttled): cheapest paused, as cheap as
# the pause; guest r dirties under it (the throttle costs 1.005 s, the pause 2 s): cheapest paused,
# 2 x the cheaper; guest s: cheapest missed D.
acted() { jq -c --arg a "$1" '. + {acted: [$a]}'; }
out=$({
    last vmm-ac q 9000 10000 3000 5 0 0
    last vmm-dt q 8000 10000 0 5 4194304 0
    last vmm-ch q 8000 10000 0 5 4194304 0 | acted "x-deadline: downtime-limit raised from 300 to 1000 ms, the least that meets it; cheapest: ..."
    last vmm-ac r 9000 10000 1000 5 0 0
    last vmm-dt r 8000 10000 0 5 8388608 0
    last vmm-ch r 8000 10000 0 5 8388608 0 | acted "x-deadline: downtime-limit raised from 300 to 2000 ms, the least that meets it; cheapest: ..."
    last vmm-ac s 9000 10000 1000 5 0 0
    last vmm-ch s 10500 10000 1000 5 0 0 | acted "x-deadline: the plan misses it; the vCPUs throttled to 30 %; cheapest: ..."
} | jq -s -r -f "$jqf")
expect "cheapest: deadlines met (the last pause at the cap) 2 of 3; where it and both single strategies met D (2): cost no more than 1.2 x the cheaper of the two in 1; cost 3000 ms, against the cheaper's 2005 ms, throttle's 4010 ms, one pause's 3000 ms"
expect "  4  q       10 s    |     9 s yes   1000 ms  1000 ms  pause             |       3005 ms |        1000 ms | one pause"
expect "  4  s       10 s    |  10.5 s no    1005 ms     5 ms  throttle          |       1005 ms |              - | -"
