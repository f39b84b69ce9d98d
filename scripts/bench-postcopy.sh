#!/usr/bin/env bash
# Postcopy benchmark over TCP on this host: every figure is measured side by side in this one
# run. The guest: --mem of RAM, its first --fill filled with random bytes by the VMM, and the
# stress payload (2 vCPUs) rewriting --hot of it as fast as it can. Its dirty rate is measured
# first, and max-bandwidth is set to a quarter of it: a guest dirtying 4 x the cap. Then:
#   once      the same guest paused: the time to send its RAM once at the cap (the yardstick)
#   postcopy  postcopy-ram, the switch after the bulk round (x-postcopy-after-rounds 1), the
#             background push at the same cap: total time, the switch's pause, requests, fault
#             latency (p50, p99, max), the guest's blocked time, and blocked ms per migrated GiB
#   postcopy-multifd  the same with multifd on (2 lanes) at the source, as QEMU 10.1 runs them
#             together: the bulk round over the lanes, postcopy on the main connection after
#   postcopy-now  the same, but migrate_start_postcopy right after migrate, as QEMU users do:
#             the bulk round stops there and nearly all of RAM comes in postcopy, once
#   postcopy-link, plain and with postcopy-preempt: postcopy after the bulk round over a link
#             slower than the push (a network namespace whose loopback is rate-limited,
#             scripts/lib/bench-postcopy-link.sh), nothing capped: the push fills the socket
#             buffers, and fault latency shows whether an answer waits behind them
#   precopy   precopy with auto-converge beside it (no postcopy): total time, downtime, the
#             throttle it needed; precopy without auto-converge never ends here, which is the
#             point of postcopy (Postcopy.AGuestPrecopyCannotFinishCompletesInPostcopy shows it)
# Writes bench-postcopy.json (with the postcopy run's arrivals: pages requested and answered vs
# pages placed from the background push, sampled every 10 ms at the destination) and
# bench-postcopy-arrivals.svg, a chart of both kinds of arrival over time, to --out.
#
# --rdma: the same on an RDMA device (the SoftRoCE nested VM when this machine has none; the
# guest then 128M, 32M filled, 16M hot, 1 vCPU), side by side in one run there: the time to
# send RAM once over rdma, postcopy over rdma and over tcp on the same address; QEMU 7.2's own
# postcopy over tcp beside ours of the very same guest (nothing prefilled: QEMU cannot, so
# the stress payload alone, which boots under both); and ib_write_lat
# (4 KiB, a page) + ib_send_lat (32 bytes, a request) on the same device: a fault over rdma is
# one SEND and one RDMA WRITE back, so their sum is its floor. Writes bench-postcopy-rdma.json
# and bench-postcopy-rdma-arrivals.svg (default --out: build/bench).
#
# --vs-qemu: in the nested VM, only the runs beside QEMU 7.2 (ours with and without readahead,
# QEMU's), a few minutes: writes bench-postcopy-vs-qemu.json.
#
# --read: in the nested VM, postcopy over rdma with faults asked for (a SEND, an RDMA WRITE back),
# with faults read (x-rdma-postcopy-read: one RDMA READ, the source's CPU not woken) and the push
# written, and with faults and the push read (x-rdma-postcopy-read-push: the destination reads
# the push itself at max-postcopy-bandwidth), and those two again with x-rdma-postcopy-read-wait 0
# at the destination (every READ left to the receiving thread, not awaited by the fault thread;
# the destination's log says how long the awaited READs took), in turn, --runs times (3), without
# the protocol trace, between ib_read_lat
# (4 KiB) and ib_write_lat + ib_send_lat measured before and after: fault latency p50 against
# each floor, the source's return-path CPU time per fault, blocked and total time side by side;
# writes bench-postcopy-rdma-read.json. With --tls
# both arms are authenticated (tls-creds at both ends: tagged writes against READs whose pages are
# checked against the tags the source made when it exposed them); writes
# bench-postcopy-rdma-read-tls.json.
#
# --auth: in the nested VM, postcopy over rdma plain, with verify-ram (every page summed), and
# authenticated (tls-creds at both ends: the pages summed as with verify-ram, and every request
# and write tagged, each write's tag checked on a private copy of its slot), in turn, --runs
# times (3): fault latency, blocked time, setup and total time side by side; writes
# bench-postcopy-rdma-auth.json.
#
#   scripts/bench-postcopy.sh [--mem 512M] [--fill 256M] [--hot 64M] [--out DIR] [--quick] [--rdma | --vs-qemu | --auth | --read [--tls] [--runs N]]
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

mem= fill= hot= out= rdma=0 vs_qemu=0 auth=0 read=0 tls=0 runs=3
ctl=1  # the stress guest uses the control device (ctl=0: as under QEMU, which has none)
while [ $# -gt 0 ]; do
    case "$1" in
        --mem) mem=$2; shift 2 ;;
        --fill) fill=$2; shift 2 ;;
        --hot) hot=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --quick) mem=256M fill=128M hot=32M; shift ;;
        --rdma) rdma=1; shift ;;
        --vs-qemu) rdma=1 vs_qemu=1; shift ;;
        --auth) rdma=1 auth=1; shift ;;
        --read) rdma=1 read=1; shift ;;
        --tls) tls=1; shift ;;
        --runs) runs=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
if [ "$rdma" = 1 ]; then
    mem=${mem:-128M} fill=${fill:-32M} hot=${hot:-16M} out=${out:-$BUILD/bench} smp=1
    if [ -z "${VMM_BENCH_INSIDE:-}" ] && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
        ensure_packages perftest jq qemu-system-x86
        build
        log "no RDMA device here: the benchmark runs inside the SoftRoCE nested VM"
        mode=--rdma
        [ "$vs_qemu" = 1 ] && mode=--vs-qemu
        [ "$auth" = 1 ] && mode=--auth
        [ "$read" = 1 ] && mode=--read
        [ "$tls" = 1 ] && mode="$mode --tls"
        # shellcheck disable=SC2086  # $mode: one option, or --read --tls
        exec "$ROOT/scripts/softroce-run.sh" env VMM_BENCH_INSIDE=1 "$ROOT/scripts/bench-postcopy.sh" \
            $mode --runs "$runs" --mem "$mem" --fill "$fill" --hot "$hot" --out "$out"
    fi
    [ -n "${VMM_RDMA_ADDR:-}" ] || die "set VMM_RDMA_ADDR to an IPv4 address of this machine's RDMA device"
    addr=$VMM_RDMA_ADDR dev=$(ls /sys/class/infiniband | head -1)
else
    mem=${mem:-512M} fill=${fill:-256M} hot=${hot:-64M} out=${out:-$PWD} addr=127.0.0.1 smp=2
fi
[ -n "${VMM_BENCH_INSIDE:-}" ] || build
VMM="$BUILD/bin/vmm" CTL="$BUILD/bin/vmmctl"
work=$(mktemp -d /tmp/vmm-bench-postcopy.XXXXXX)
pids=()
link_ns=  # bench-postcopy-link.sh's network namespace, while it exists
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$work"
    [ -z "$link_ns" ] || ip netns del "$link_ns" 2>/dev/null || true
}
trap cleanup EXIT

q() { "$CTL" --qmp "unix:$work/$1.qmp" "${@:2}"; }  # q VM COMMAND [ARGS-JSON]
h() { "$CTL" "unix:$work/$1.hmp" "$2" >/dev/null; }     # h VM HMP-LINE (must succeed)
wrap=()  # a command the VMs run under (ip netns exec NS for the link runs)
start_vm() {  # start_vm NAME ARGS...
    local name=$1; shift
    rm -f "$work/$name.ser"  # a name runs more than once: its guest's reports are this run's alone
    "${wrap[@]}" "$VMM" -m "$mem" --smp "$smp" --qmp "unix:$work/$name.qmp" --monitor "unix:$work/$name.hmp" --serial "file:$work/$name.ser" "$@" \
        >"$work/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do [ -S "$work/$name.qmp" ] && [ -S "$work/$name.hmp" ] && return 0; sleep 0.1; done
    die "vmm $name did not start: $(tail -3 "$work/$name.log")"
}
source_vm() {  # source_vm NAME: the stress guest over filled RAM, running for two seconds
    local prefill=()
    [ "$fill" = 0 ] || prefill=(--prefill "$fill")
    start_vm "$1" --guest stress --append "bytes=$hot stall_us=${stall_us:-50} ctl=$ctl" "${prefill[@]}"
    for _ in $(seq 1 300); do
        # Three reports: the stalled share of its time before migrate comes from the last two.
        [ "$(reports "$work/$1.ser")" -ge 3 ] && return 0
        sleep 0.1
    done
    die "the stress guest did not start"
}
status() { q "$1" query-migrate | jq -r .status; }
wait_status() {  # wait_status VM STATUS SECONDS
    local end=$((SECONDS + $3))
    while [ "$(status "$1")" != "$2" ]; do
        [ "$SECONDS" -lt "$end" ] || return 1
        case "$(status "$1")" in failed|cancelled|postcopy-paused) return 1 ;; esac
        sleep 0.1
    done
}
# The stress guest's own count of its stalls (guest/stress.c: gaps of stall_us or more between
# its TSC reads), the same under both VMMs, from its report lines in a serial file.
guest_report() {  # guest_report SERIAL-FILE [N]: the last complete report (N: the Nth), as
                  # {pass, stalls, stalled_us, longest_us, at_ms}, or null
    [ -s "$1" ] || { echo null; return; }
    local text
    text=$(cat "$1")
    [ "$(tail -c1 "$1" | od -An -c | tr -d ' ')" = '\n' ] || text=$(printf '%s\n' "$text" | sed '$d')  # a line being written
    printf '%s\n' "$text" | awk -v want="${2:-0}" '
        /^stress: pass [0-9]+ stalls [0-9]+ stalled-us [0-9]+ longest-us [0-9]+ at-ms [0-9]+$/ {
            n++; if (want == 0 || n == want) { p=$3; c=$5; u=$7; l=$9; t=$11 } }
        END { if (p == "") print "null"
              else printf "{\"pass\":%s,\"stalls\":%s,\"stalled_us\":%s,\"longest_us\":%s,\"at_ms\":%s}\n", p, c, u, l, t }'
}
reports() { local n; n=$(grep -ac '^stress: pass' "$1" 2>/dev/null) || true; echo "${n:-0}"; }
guest_after() {  # guest_after SERIAL-FILE: the report the guest prints next (at most 30 s on)
    local n
    n=$(reports "$1")
    for _ in $(seq 1 300); do [ "$(reports "$1")" -gt "$n" ] && break; sleep 0.1; done
    guest_report "$1"
}
guest_before() {  # guest_before SERIAL-FILE: {first, last}: the source's second report (the first
                  # after boot, whose stalls include the boot's) and its last, before migrate
    jq -n --argjson f "$(guest_report "$1" 2)" --argjson l "$(guest_report "$1")" '{first: $f, last: $l}'
}
# The stalls between the last report before migrate and the first after the end, and the same
# guest's stalled share of its time before migrate: a busy host stalls a guest too (in the
# nested VM every switch of its emulated CPUs is a stall), and `excess_ms` is what the
# migration added to that.
guest_window() {  # guest_window BEFORE-JSON AFTER-JSON
    jq -n --argjson b "$1" --argjson a "$2" --argjson floor "${stall_us:-50}" '
        def share: if .first == null or .last == null or .last.at_ms <= .first.at_ms then null
                   else (.last.stalled_us - .first.stalled_us) / 1000 / (.last.at_ms - .first.at_ms) end;
        ($b.last) as $l |
        if $l == null or $a == null then null else
        ($a.at_ms - $l.at_ms) as $ms | (($a.stalled_us - $l.stalled_us) / 1000) as $stalled | ($b | share) as $share |
        {stall_floor_us: $floor, window_ms: $ms, stalls: ($a.stalls - $l.stalls), stalled_ms: $stalled,
         stalled_share_before: $share,
         excess_ms: (if $share == null then null else ($stalled - $share * $ms) * 10 | round / 10 end),
         longest_since_boot_ms: ($a.longest_us / 1000), passes: ($a.pass - $l.pass), before: $b, after: $a} end'
}
stop_vms() { for vm in "$@"; do h "$vm" quit || true; done; wait "${pids[@]}" 2>/dev/null || true; pids=(); }

# The guest's dirty rate, then the cap: a quarter of it.
source_vm probe
sampled() { [ "$(q probe query-dirty-rate | jq '.samples')" -ge 4 ]; }  # a few one-second windows
for _ in $(seq 1 100); do sampled && break; sleep 0.1; done
rate_mib=$(q probe query-dirty-rate | jq '."dirty-rate"')
stop_vms probe
cap=$(jq -n --argjson r "$rate_mib" '[($r * 1048576 / 4) | floor, 1048576] | max')
log "the guest dirties $(printf %.1f "$rate_mib") MiB/s; max-bandwidth = a quarter: $((cap / 1048576)) MiB/s"
# A stall, to the guest: a gap between its TSC reads of 10 pages' worth of its own pace or more.
stall_us=$(jq -n --argjson r "$rate_mib" --argjson n "$smp" '[10 * 1e6 / ($r * 256 / $n) | ceil, 50] | max')
log "the guest counts a gap of $stall_us us or more between two pages as a stall"
bw=$cap pcbw=$cap preempt=1 readahead=  # run()'s max-bandwidth, max-postcopy-bandwidth, postcopy-preempt (the
                                        # default), x-postcopy-readahead (empty: the default)
creds= verify=  # run()'s tls-creds at both ends (empty: none); verify-ram at both ends (1: on)
reads=          # run()'s x-rdma-postcopy-read at both ends (1: on)
pull=           # run()'s x-rdma-postcopy-read-push at the source (1: on; with reads)
read_wait=      # run()'s x-rdma-postcopy-read-wait at the destination, us (empty: its default)

run() {  # run MODE [TRANSPORT [NAME]]: one migration; writes $work/NAME.json (the source's and
         # destination's last query-migrate), NAME being MODE, or MODE-TRANSPORT with --rdma
    local mode=$1 tp=${2:-tcp} port=$((20000 + RANDOM % 20000)) name=${3:-$1}
    [ "$rdma" = 1 ] && [ -z "${3:-}" ] && name=$mode-$tp
    local uri=$tp:$addr:$port
    local caps=("postcopy-ram on" "postcopy-preempt $([ "$preempt" = 1 ] && echo on || echo off)")
    [ -z "$reads" ] || caps+=("x-rdma-postcopy-read on")
    start_vm "$mode-d" --incoming defer
    case "$mode" in postcopy*) for c in "${caps[@]}"; do h "$mode-d" "migrate_set_capability $c"; done ;; esac
    [ -z "$creds" ] || h "$mode-d" "migrate_set_parameter tls-creds $creds"
    [ -z "$verify" ] || h "$mode-d" "migrate_set_capability verify-ram on"
    [ -z "$read_wait" ] || h "$mode-d" "migrate_set_parameter x-rdma-postcopy-read-wait $read_wait"
    h "$mode-d" "migrate_incoming $uri"
    source_vm "$mode-s"
    h "$mode-s" "migrate_set_parameter max-bandwidth $bw"
    [ -z "$creds" ] || h "$mode-s" "migrate_set_parameter tls-creds $creds"
    [ -z "$verify" ] || h "$mode-s" "migrate_set_capability verify-ram on"
    case "$mode" in
        once) h "$mode-s" stop ;;
        postcopy*)
            for c in "${caps[@]}"; do h "$mode-s" "migrate_set_capability $c"; done
            [ "$mode" != postcopy-now ] && h "$mode-s" "migrate_set_parameter x-postcopy-after-rounds 1"
            [ "$mode" != postcopy-multifd ] || h "$mode-s" "migrate_set_capability multifd on"
            h "$mode-s" "migrate_set_parameter max-postcopy-bandwidth $pcbw"
            [ -z "$readahead" ] || h "$mode-s" "migrate_set_parameter x-postcopy-readahead $readahead"
            [ -z "$pull" ] || h "$mode-s" "migrate_set_capability x-rdma-postcopy-read-push on" ;;
        precopy) h "$mode-s" "migrate_set_capability auto-converge on" ;;
    esac
    local before
    before=$(guest_before "$work/$mode-s.ser")
    [ "${VMM_BENCH_FAIL:-}" != "$name" ] || uri=$tp:$addr:$((20000 + RANDOM % 20000))  # on purpose: nobody there
    h "$mode-s" "migrate -d $uri"
    [ "$mode" = postcopy-now ] && h "$mode-s" migrate_start_postcopy  # as QEMU users do: the bulk round stops there
    local sampler=
    if [ "$mode" = postcopy ]; then  # the arrivals at the destination, every 10 ms of postcopy
        python3 "$ROOT/scripts/lib/qmp-sample.py" "$work/$mode-d.qmp" 10 postcopy-active >"$work/arrivals-$tp.raw" &
        sampler=$!
    fi
    why() { q "$1" query-migrate | jq -r '"\(.status)\(if ."error-desc" then ": " + ."error-desc" else "" end)"'; }
    if ! wait_status "$mode-s" completed 600; then
        # A source that failed leaves a destination that never reaches postcopy: the sampler
        # would watch it until its own deadline (10 minutes) if it were not stopped here.
        [ -z "$sampler" ] || { kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; }
        die "$mode did not complete: $(why "$mode-s")"
    fi
    if [ -n "$sampler" ]; then
        wait "$sampler"
        jq -c '{t, placed: ."x-postcopy".placed, requested: ."x-postcopy"."fault-latency".count}' \
            "$work/arrivals-$tp.raw" >"$work/arrivals-$tp.jsonl"
    fi
    wait_status "$mode-d" completed 60 || die "$mode: the destination did not complete: $(why "$mode-d")"
    local guest=null  # a guest migrated paused stays paused: it reports nothing more
    [ "$mode" = once ] || guest=$(guest_window "$before" "$(guest_after "$work/$mode-d.ser")")
    jq -n --argjson s "$(q "$mode-s" query-migrate)" --argjson d "$(q "$mode-d" query-migrate)" --argjson g "$guest" \
        '{source: $s, destination: $d, guest: $g}' >"$work/$name.json"
    stop_vms "$mode-s" "$mode-d"
    log "$name: $(jq -r '.source | "\(."total-time") ms, downtime \(.downtime) ms"' "$work/$name.json")"
}
# kept NAME LOGS CMD...: CMD in a subshell of its own, so that one that fails ends alone: its
# VMs are stopped, its logs ($work/LOGS*) kept in $out/failed-STAMP-NAME/, and $work/NAME.json
# says why ({"failed": ...}); the report shows every other run's figures and the script fails
# at the end (report_failures).
failed=()
kept() {
    local name=$1 logs=$2 err="$work/$1.err"
    shift 2
    if isolated "$err" "$@"; then
        cat "$err" >&2
        return 0
    fi
    tail -n 20 "$err" >&2
    local keep="$out/failed-$(date -u +%Y%m%d-%H%M%S)-$name"
    mkdir -p "$keep" && cp "$work/$logs"* "$keep/" 2>/dev/null || true
    jq -n --arg why "$(sed -n 's/^error: //p' "$err" | tail -1)" --arg logs "$keep" \
        '{failed: (if $why == "" then "failed" else $why end), logs: $logs}' >"$work/$name.json"
    failed+=("$name: $(jq -r .failed "$work/$name.json") (logs: $keep)")
}
# attempt MODE [TRANSPORT [NAME]]: run() kept as NAME (MODE, or MODE-TRANSPORT with --rdma).
# VMM_BENCH_FAIL=NAME makes that run's source migrate to a port nobody listens on.
attempt() {
    local name=${3:-$1}
    [ "$rdma" = 1 ] && [ -z "${3:-}" ] && name=$1-${2:-tcp}
    kept "$name" "$1-" run "$@"
}
report_failures() {
    [ ${#failed[@]} -gt 0 ] || return 0
    printf 'FAILED: %s\n' "${failed[@]}"
    die "${#failed[@]} run(s) failed (above); every other figure stands"
}
arrivals_or_none() {  # arrivals_or_none TRANSPORT: a series even if the sampler saw no postcopy
    [ -s "$work/arrivals-$1.jsonl" ] || echo '{"t":0,"placed":0,"requested":0}' >"$work/arrivals-$1.jsonl"
}
mkdir -p "$out"
if [ "$rdma" = 1 ]; then
    source "$ROOT/scripts/lib/bench-postcopy-rdma.sh"
    exit 0
fi
attempt once
attempt postcopy
attempt postcopy-multifd
attempt postcopy-now
attempt precopy
arrivals_or_none tcp
source "$ROOT/scripts/lib/bench-postcopy-link.sh"

jq -n --argjson cap "$cap" --argjson rate "$rate_mib" --arg mem "$mem" --arg fill "$fill" --arg hot "$hot" \
    --slurpfile once "$work/once.json" --slurpfile pc "$work/postcopy.json" --slurpfile now "$work/postcopy-now.json" \
    --slurpfile mfd "$work/postcopy-multifd.json" \
    --slurpfile pre "$work/precopy.json" --slurpfile plain "$work/postcopy-link-plain.json" \
    --slurpfile pmt "$work/postcopy-link-preempt.json" --arg link "$link_rate" \
    --slurpfile arr "$work/arrivals-tcp.jsonl" -f "$ROOT/scripts/lib/bench-postcopy.jq" >"$out/bench-postcopy.json"
python3 "$ROOT/scripts/lib/bench-postcopy-chart.py" "$out/bench-postcopy.json" "$out/bench-postcopy-arrivals.svg"
jq -r '.summary | to_entries[] | "\(.key): \(.value)"' "$out/bench-postcopy.json"
log "wrote $out/bench-postcopy.json and $out/bench-postcopy-arrivals.svg"
report_failures
