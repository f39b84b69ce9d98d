#!/usr/bin/env bash
# scripts/lib/bench-deadline.jq over made-up runs whose verdicts are known: a prediction within
# and one outside +-20 %, an ETA whose error halves and one whose does not, a deadline met and
# one missed on each side, a plan's "never" that held and one that did not, a deadline refused at
# once and one refused late. Usage: bench_deadline_summary_test.sh SOURCE_DIR
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
    deadline vmm a 900 1000 10; deadline qemu a 1200 1000 300          # QEMU misses
    deadline vmm b 1100 1000 20; deadline qemu b 800 1000 40           # vmm misses
    deadline vmm c 0 1000 0 failed                                     # failed: missed, not a "both completed" pair
    deadline vmm-ac a 950 1000 0; deadline qemu-ac a 1400 1000 600     # post-copy not permitted: QEMU paused 600 ms
    deadline vmm-ac b 0 1000 0 cancelled; deadline qemu-ac b 1300 1000 250
    tight a failed 0.3 "x-deadline 0.5 s cannot be met: ..."
    tight b failed 2.5 "x-deadline 0.5 s cannot be met: ..."
} | jq -s -r -f "$jqf")
expect "within +-20 % of the measured total: 1 of 2 precopy runs"
expect "the prediction 1 s in, within +-20 %: 1 of 2"
expect "the plan's verdict before migrating (ends / never) held: 3 of 4"
expect "at most half its error 1 s in (or within 2 %): 1 of 2 runs"
expect "post-copy permitted: vmm, feasible by its plan: 1 of 3 met the deadline"
expect "post-copy permitted: deadlines missed: vmm 2 of 3, QEMU 7.2 1 of 2"
expect "post-copy permitted: guest throttled + blocked, the runs both completed (2): vmm 30 ms, QEMU 7.2 340 ms"
expect "auto-converge: vmm, feasible by its plan: 1 of 2 met the deadline"
expect "auto-converge: deadlines missed: vmm 1 of 2, QEMU 7.2 2 of 2"
expect "auto-converge: guest throttled + blocked, the runs both completed (1): vmm 0 ms, QEMU 7.2 600 ms"
expect "Deadlines, post-copy not permitted"
expect "said at once that the deadline cannot be met (failed within 1 s saying so): 1 of 2"
