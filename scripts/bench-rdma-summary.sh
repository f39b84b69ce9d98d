#!/usr/bin/env bash
# The RDMA benchmark's figures over many runs: reads the JSON files scripts/bench-rdma.sh wrote
# (build/bench/rdma-*.json, and those kept in docs/history/bench/) and prints, over every run of every
# file, what docs/performance.md reports against issue 4's and issue 46's targets:
#   - end to end: QEMU's total time over ours, per run (both count from their migrate command),
#     and each VMM's setup (QEMU's with its migrate command, where it connects); ours also as
#     QEMU's clock counts, from its migration thread's start
#   - ours / QEMU, paired: in each run that has both, our migration's ratio to the ib_write_bw
#     measured around it divided by QEMU's (so the machine's speed of the moment cancels out);
#     median, range, and how many pairs reach 1.5; then the same by guest RAM moved (a VMM that
#     writes zero chunks sends more bytes for the same guest)
#   - each migration / ib_write_bw beside one busy process (the file's contended ceiling), and
#     what 1.5 x QEMU's figure would ask of ours against that same ceiling
#   - the bulk round of the -idle modes / ib_write_bw around it; median, range, how many reach 0.9
#   - QEMU's CPU per GB sent / ours, per run
#   - the downtime each VMM measured
# Every figure comes from the files given: nothing is typed in by hand.
#
# usage: scripts/bench-rdma-summary.sh FILE.json|ARCHIVE.tar.xz...
# (an archive: its rdma-*.json, as docs/history/bench/json-reports.tar.xz keeps the older reports)
set -euo pipefail

die() { printf 'error: %s\n' "$*" >&2; exit 1; }
[ $# -gt 0 ] || die "usage: $0 FILE.json|ARCHIVE.tar.xz... (the files scripts/bench-rdma.sh wrote, e.g. build/bench/rdma-*.json)"
command -v jq >/dev/null || die "needs jq (apt-get install jq)"
files=()
for f in "$@"; do
    case "$f" in
        *.tar.xz)
            [ -n "${unpacked:-}" ] || { unpacked=$(mktemp -d); trap 'rm -rf "$unpacked"' EXIT; }
            mkdir -p "$unpacked/$(basename "$f")"
            tar -xJf "$f" -C "$unpacked/$(basename "$f")" --wildcards 'rdma-*.json' || die "cannot unpack the rdma-*.json of $f"
            files+=("$unpacked/$(basename "$f")"/rdma-*.json) ;;
        *) files+=("$f") ;;
    esac
done
set -- "${files[@]}"
for f in "$@"; do
    [ -r "$f" ] || die "cannot read $f"
    jq -e '.runs | type == "array"' "$f" >/dev/null 2>&1 ||
        die "$f is not a bench-rdma.sh result (no \"runs\" array)"
done

jq -rs '
    def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
                       else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    def r2: if type == "number" then (. * 100 | round) / 100 else . end;
    # The runs of every file, each tagged with its file and run index. A run without a total
    # time (QEMU once recorded 0 for a completed migration) has no figures to trust: left out.
    [ to_entries[] | .key as $f | .value.ceiling_ib_write_bw_busy_core_mbs as $busy
      | .value.runs[] | . + {file: $f, busy: $busy} ] as $every |
    ($every | map(select((.total_ms // 0) > 0))) as $all |
    # One value per (file, run) where both modes have figure k: a over b.
    def per_run(a; b; k): [ $all | group_by([.file, .run])[]
        | (map(select(.mode == a))[0][k]) as $x | (map(select(.mode == b))[0][k]) as $y
        | select($x != null and $y != null and $y > 0) | $x / $y ];
    def figures(k; m): [ $all[] | select(.mode == m) | .[k] | select(. != null) ];
    # QEMU connects inside its migrate command, before its setup-time clock starts.
    def qemu_setup(m): [ $all[] | select(.mode == m and .setup_ms != null)
        | .setup_ms + ((.command_s // 0) * 1000 | round) ];
    # QEMU 7.2 starts its setup-time clock inside its migration thread (setup_start is a local of
    # migration_thread): the wait for that thread to run is in neither of its figures. Ours less
    # its "start" part (from the migrate command until our migration thread runs) is counted so.
    def from_thread(m): [ $all[] | select(.mode == m and .setup_ms != null)
        | .setup_ms - ((.setup_parts_detail // []) | map(select(.name == "start") | .ms) | add // 0) | round ];
    # Throughput over the busy-core ceiling of its own file, times f.
    def contended(m; f): [ $all[] | select(.mode == m and .throughput_mbs != null and (.busy // 0) > 0)
        | .throughput_mbs / .busy * f ];
    def line(name; xs; target; unit):
        if (xs | length) == 0 then "  \(name): no runs"
        else "  \(name): \(xs | length) \(unit), median \(xs | median | r2) (\(xs | min | r2)–\(xs | max | r2))"
             + (if target then ", \(xs | map(select(. >= target)) | length) at or above \(target)" else "" end)
        end;
    "\(length) file(s), \($all | map([.file, .run]) | unique | length) run(s)"
      + (($every | length) - ($all | length) | if . > 0 then ", \(.) migration(s) without a total time left out" else "" end),
    "end to end, from the migrate command to completion: QEMU'"'"'s total time / ours, paired per run; target >= 1.5:",
    line("dynamic"; per_run("qemu-rdma-dynamic"; "vmm-rdma-dynamic"; "total_ms"); 1.5; "pairs"),
    line("pin-all"; per_run("qemu-rdma-pin-all"; "vmm-rdma-pin-all"; "total_ms"); 1.5; "pairs"),
    "setup in ms (QEMU'"'"'s: its setup time plus its migrate command, inside which it connects):",
    line("ours, dynamic"; figures("setup_ms"; "vmm-rdma-dynamic"); null; "runs"),
    line("QEMU, dynamic"; qemu_setup("qemu-rdma-dynamic"); null; "runs"),
    line("ours, pin-all"; figures("setup_ms"; "vmm-rdma-pin-all"); null; "runs"),
    line("QEMU, pin-all"; qemu_setup("qemu-rdma-pin-all"); null; "runs"),
    "ours counted as QEMU counts its setup-time, from its migration thread'"'"'s start (less our \"start\" part, the command until that thread runs; a run that recorded no parts: unchanged):",
    line("ours, dynamic"; from_thread("vmm-rdma-dynamic"); null; "runs"),
    line("ours, pin-all"; from_thread("vmm-rdma-pin-all"); null; "runs"),
    "transfer window (total less setup), ours / QEMU, paired (each divided by ib_write_bw around it first), pattern guest running:",
    line("dynamic"; per_run("vmm-rdma-dynamic"; "qemu-rdma-dynamic"; "ratio_to_ceiling_around"); 1.5; "pairs"),
    line("pin-all"; per_run("vmm-rdma-pin-all"; "qemu-rdma-pin-all"; "ratio_to_ceiling_around"); 1.5; "pairs"),
    "the same by guest RAM moved (its RAM over the transfer time, whatever each VMM sent):",
    line("dynamic"; per_run("vmm-rdma-dynamic"; "qemu-rdma-dynamic"; "ram_ratio_to_ceiling_around"); 1.5; "pairs"),
    line("pin-all"; per_run("vmm-rdma-pin-all"; "qemu-rdma-pin-all"; "ram_ratio_to_ceiling_around"); 1.5; "pairs"),
    "each migration / ib_write_bw beside one busy process (the contended ceiling of its file):",
    line("ours, dynamic"; contended("vmm-rdma-dynamic"; 1); null; "runs"),
    line("ours, pin-all"; contended("vmm-rdma-pin-all"; 1); null; "runs"),
    line("QEMU, dynamic"; contended("qemu-rdma-dynamic"; 1); null; "runs"),
    line("QEMU, pin-all"; contended("qemu-rdma-pin-all"; 1); null; "runs"),
    line("1.5 x QEMU, dynamic (what the target asks of ours)"; contended("qemu-rdma-dynamic"; 1.5); null; "runs"),
    line("1.5 x QEMU, pin-all (what the target asks of ours)"; contended("qemu-rdma-pin-all"; 1.5); null; "runs"),
    "bulk round / ib_write_bw around it, idle guest with its RAM filled; target >= 0.9:",
    line("dynamic"; figures("bulk_ratio_to_ceiling_around"; "vmm-rdma-dynamic-idle"); 0.9; "runs"),
    line("pin-all"; figures("bulk_ratio_to_ceiling_around"; "vmm-rdma-pin-all-idle"); 0.9; "runs"),
    line("dynamic, --mem-prealloc destination";
         figures("bulk_ratio_to_ceiling_around"; "vmm-rdma-dynamic-prealloc-idle"); 0.9; "runs"),
    "QEMU CPU per GB sent / ours (beyond the vCPUs, source and destination):",
    line("dynamic"; per_run("qemu-rdma-dynamic"; "vmm-rdma-dynamic"; "cpu_s_per_gb"); null; "pairs"),
    line("pin-all"; per_run("qemu-rdma-pin-all"; "vmm-rdma-pin-all"; "cpu_s_per_gb"); null; "pairs"),
    "downtime in ms, as each VMM measured it:",
    line("ours, dynamic"; figures("downtime_ms"; "vmm-rdma-dynamic"); null; "runs"),
    line("ours, pin-all"; figures("downtime_ms"; "vmm-rdma-pin-all"); null; "runs"),
    line("QEMU, dynamic"; figures("downtime_ms"; "qemu-rdma-dynamic"); null; "runs"),
    line("QEMU, pin-all"; figures("downtime_ms"; "qemu-rdma-pin-all"); null; "runs")
' "$@"
