#!/usr/bin/env bash
# scripts/bench-rdma-summary.sh over two made-up result files whose medians, ranges and counts
# are known: pairs are formed per file and run, a migration without a total time is left out,
# and files that are not results are refused. Usage: bench_rdma_summary_test.sh SOURCE_DIR
set -euo pipefail
summary=$1/scripts/bench-rdma-summary.sh
command -v jq >/dev/null || { echo "SKIP: needs jq (Debian package jq)"; exit 77; }
dir=$(mktemp -d /tmp/bench-summary.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# run MODE RUN RATIO [TOTAL_MS] [BULK] [CPU] [DOWNTIME] [RAM_RATIO] [MB/S] [SETUP_MS] [COMMAND_S]:
# one migration's record; its ratio by guest RAM moved is RATIO unless given.
run() {
    jq -nc --arg m "$1" --argjson r "$2" --argjson x "$3" --argjson t "${4:-1000}" \
        --argjson b "${5:-null}" --argjson c "${6:-null}" --argjson d "${7:-10}" \
        --argjson g "${8:-$3}" --argjson s "${9:-null}" --argjson u "${10:-null}" --argjson k "${11:-null}" \
        '{mode: $m, run: $r, ratio_to_ceiling_around: $x, total_ms: $t, bulk_ratio_to_ceiling_around: $b,
          cpu_s_per_gb: $c, downtime_ms: $d, ram_ratio_to_ceiling_around: $g, throughput_mbs: $s,
          setup_ms: $u, command_s: $k}'
}
# file NAME [BUSY_CEILING]: the records on stdin as a result file.
file() { jq -s --argjson busy "${2:-null}" '{ceiling_ib_write_bw_busy_core_mbs: $busy, runs: .}' >"$dir/$1"; }

# File a: run 1 pairs 0.6 / 0.3 = 2.0 (by guest RAM 0.9 / 0.3 = 3.0), run 2 pairs 0.4 / 0.4 =
# 1.0 (CPU 200 / 50 = 4.0). Its busy-core ceiling is 10 MB/s: run 1 moved 12 and 6 MB/s.
{ run vmm-rdma-dynamic 1 0.6 1000 null null 10 0.9 12; run qemu-rdma-dynamic 1 0.3 1000 null null 10 0.3 6
  run vmm-rdma-dynamic 2 0.4 1000 null 50; run qemu-rdma-dynamic 2 0.4 1000 null 200 300
  run vmm-rdma-dynamic-idle 1 0.9 1000 0.95; } | file a.json 10
# File b: its run 1 is paired with its own QEMU run (0.5 / 0.25 = 2.0), never with file a's;
# a QEMU run without a total time has no pair; two idle runs at 0.85 and 1.05. It has no
# busy-core ceiling, so its MB/s figures are not set against one.
{ run vmm-rdma-dynamic 1 0.5; run qemu-rdma-dynamic 1 0.25
  run vmm-rdma-dynamic 2 0.7 1000 null null 10 0.7 20; run qemu-rdma-dynamic 2 0.1 0
  run vmm-rdma-dynamic-idle 1 0.8 1000 0.85; run vmm-rdma-dynamic-idle 2 1 1000 1.05; } | file b.json

# File c: end to end and setup. Run 1: QEMU 3000 ms over ours 1500 = 2.0; run 2: 2000 / 2000 =
# 1.0. Setup: ours 100 and 300 ms; QEMU's 50 ms plus a 0.45 s command = 500, and 200 + 0 = 200;
# ours from its migration thread (less its "start" part), below.
{ run vmm-rdma-pin-all 1 0.5 1500 null null 10 0.5 null 100; run qemu-rdma-pin-all 1 0.3 3000 null null 10 0.3 null 50 0.45
  run vmm-rdma-pin-all 2 0.5 2000 null null 10 0.5 null 300; run qemu-rdma-pin-all 2 0.3 2000 null null 10 0.3 null 200; } |
    file c.json
# Our setup's parts: "start" 40 and 100 ms, so counted from the migration thread: 60 and 200.
jq '.runs |= map(if .mode == "vmm-rdma-pin-all" then
        .setup_parts_detail = [{name: "start", ms: (if .run == 1 then 40 else 100 end)}, {name: "connect", ms: 1}] else . end)' \
    "$dir/c.json" >"$dir/c2.json" && mv "$dir/c2.json" "$dir/c.json"
out_c=$("$summary" "$dir/c.json")
grep -qF "  pin-all: 2 pairs, median 1.5 (1–2), 1 at or above 1.5" <<<"$out_c" ||
    { printf 'no end-to-end line for file c in\n%s\n' "$out_c"; exit 1; }
grep -qF "  ours, pin-all: 2 runs, median 200 (100–300)" <<<"$out_c" || { printf 'no setup of ours in\n%s\n' "$out_c"; exit 1; }
grep -qF "  QEMU, pin-all: 2 runs, median 350 (200–500)" <<<"$out_c" || { printf "no setup of QEMU's in\n%s\n" "$out_c"; exit 1; }
grep -qF "  ours, pin-all: 2 runs, median 130 (60–200)" <<<"$out_c" ||
    { printf 'no setup of ours from its migration thread in\n%s\n' "$out_c"; exit 1; }

out=$("$summary" "$dir/a.json" "$dir/b.json")
expect() {
    grep -qF -- "$1" <<<"$out" || { printf 'expected the line\n  %s\nin\n%s\n' "$1" "$out"; exit 1; }
}
expect "2 file(s), 4 run(s), 1 migration(s) without a total time left out"
expect "  dynamic: 3 pairs, median 2 (1–2), 2 at or above 1.5"
expect "  pin-all: no runs"
expect "  dynamic: 3 pairs, median 2 (1–3), 2 at or above 1.5"
expect "  ours, dynamic: 1 runs, median 1.2 (1.2–1.2)"
expect "  QEMU, dynamic: 1 runs, median 0.6 (0.6–0.6)"
expect "  1.5 x QEMU, dynamic (what the target asks of ours): 1 runs, median 0.9 (0.9–0.9)"
expect "  dynamic: 3 runs, median 0.95 (0.85–1.05), 2 at or above 0.9"
expect "  dynamic: 1 pairs, median 4 (4–4)"
expect "  QEMU, dynamic: 3 runs, median 10 (10–300)"

if "$summary" "$dir/missing.json" 2>"$dir/err"; then echo "a missing file was accepted"; exit 1; fi
grep -q "cannot read" "$dir/err" || { echo "no clear error for a missing file:"; cat "$dir/err"; exit 1; }
echo '{"modes": {}}' >"$dir/other.json"
if "$summary" "$dir/other.json" 2>"$dir/err"; then echo "a file without runs was accepted"; exit 1; fi
grep -q 'not a bench-rdma.sh result' "$dir/err" || { echo "no clear error for a non-result:"; cat "$dir/err"; exit 1; }
echo "ok"
