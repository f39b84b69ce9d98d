#!/usr/bin/env bash
# Clones pulling a served saved guest over RDMA (x-pull-serve, --incoming rdma-pull:), measured
# in one run on this machine's RDMA device or, without one, inside the SoftRoCE nested VM. For
# each --sizes guest (a pattern guest whose first half of RAM the VMM filled with random bytes,
# saved while it ran into /dev/shm): a vmm serves the save, and a clone started under -S pulls it:
#   ready     from the migrate_incoming command sent to the clone's guest being runnable (its
#             'lazy restore ready', and the command's own round trip), whatever the size
#   whole     until every page is in (completed), and the rate
#   server    the serving vmm's CPU time (utime + stime) during the pull, per GiB pulled
#   digest    the clone's RAM against a restore of the same file read whole on this host
#   ib_read_bw  1 MiB READs on the same device, before the first size and after the last: the
#             fabric's own rate, beside the clones' pull rate
# then --clones clones (4) of the smallest size at once: each one's time, their digests, the
# server's CPU. Writes bench-pull.json to --out (default build/bench).
#   scripts/bench-pull.sh [--sizes 256M,2G] [--clones 4] [--out DIR]
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

sizes=256M,2G clones=4 out=
while [ $# -gt 0 ]; do
    case "$1" in
        --sizes) sizes=$2; shift 2 ;;
        --clones) clones=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
out=${out:-$BUILD/bench}
if [ -z "${VMM_BENCH_INSIDE:-}" ] && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
    ensure_packages jq qemu-system-x86 perftest
    build
    log "no RDMA device here: the benchmark runs inside the SoftRoCE nested VM (10 GiB of memory)"
    SOFTROCE_MEM=${SOFTROCE_MEM:-10G} exec "$ROOT/scripts/softroce-run.sh" env VMM_BENCH_INSIDE=1 \
        "$ROOT/scripts/bench-pull.sh" --sizes "$sizes" --clones "$clones" --out "$out"
fi
[ -n "${VMM_RDMA_ADDR:-}" ] || die "set VMM_RDMA_ADDR to an IPv4 address of this machine's RDMA device"
[ -n "${VMM_BENCH_INSIDE:-}" ] || build
command -v jq >/dev/null || die "jq is missing: apt-get install jq"
VMM="$BUILD/bin/vmm" CTL="$BUILD/bin/vmmctl"
work=$(mktemp -d /tmp/vmm-bench-pull.XXXXXX)
shm=$(mktemp -d /dev/shm/vmm-bench-pull.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$work" "$shm"
}
trap cleanup EXIT

q() { "$CTL" --qmp "unix:$work/$1.qmp" "${@:2}"; }
h() { "$CTL" "unix:$work/$1.hmp" "$2"; }
start_vm() {  # start_vm NAME MEM ARGS...
    local name=$1 mem=$2; shift 2
    "$VMM" -m "$mem" --smp 1 --qmp "unix:$work/$name.qmp" --monitor "unix:$work/$name.hmp" "$@" >"$work/$name.log" 2>&1 &
    pids+=($!)
    eval "pid_$name=$!"
    for _ in $(seq 1 300); do [ -S "$work/$name.qmp" ] && [ -S "$work/$name.hmp" ] && return 0; sleep 0.1; done
    die "vmm $name did not start: $(tail -3 "$work/$name.log")"
}
stop_vm() { h "$1" quit >/dev/null 2>&1 || true; }
wait_for() {  # wait_for SECONDS COMMAND...: until COMMAND succeeds
    local end=$((SECONDS + $1)); shift
    until "$@"; do [ "$SECONDS" -lt "$end" ] || return 1; sleep 0.05; done
}
status_is() { [ "$(q "$1" query-migrate | jq -r .status)" = "$2" ]; }
cpu_ms() { awk '{ print ($14 + $15) * 1000 / '"$(getconf CLK_TCK)"' }' "/proc/$1/stat"; }
now_ms() { date +%s%3N; }
field() { h "$1" "info migrate" | sed -n "s/^$2: //p" | head -1; }
digest() { h "$1" "info ramhash" | awk '{ print $2 }'; }

# save SIZE FILE: a pattern guest over SIZE, its first half filled by the VMM, saved running.
save() {
    local half=$(( $(numfmt --from=iec "$1") / 2 ))
    start_vm saver "$1" --guest pattern --append "bytes=8M check=64" --prefill "$half"
    wait_for 300 bash -c "[ \"\$('$CTL' --qmp unix:$work/saver.qmp query-guest | jq -r .results)\" -ge 1 ]" ||
        die "the pattern guest did not check its memory"
    h saver "migrate -d file:$2" >/dev/null
    wait_for 1200 status_is saver completed || die "the save failed: $(tail -3 "$work/saver.log")"
    stop_vm saver
}
# local_lazy SIZE FILE: a lazy restore of the same file from this host's memory, under -S (the
# yardstick for 'ready': what a restore costs here without any network); prints its ready ms.
local_lazy() {
    start_vm lazy "$1" -S --incoming defer
    h lazy "migrate_incoming file:$2" >/dev/null
    wait_for 600 status_is lazy completed || die "the local lazy restore did not complete: $(tail -3 "$work/lazy.log")"
    field lazy "lazy restore ready" | awk '{ print $1 }'
    stop_vm lazy
}
# reference SIZE FILE: the save's RAM digest, read whole from the file on this host.
reference() {
    start_vm ref "$1" -S --incoming defer
    h ref "migrate_set_capability x-restore-lazy off" >/dev/null
    h ref "migrate_incoming file:$2" >/dev/null
    wait_for 600 status_is ref completed || die "the reference restore did not complete: $(tail -3 "$work/ref.log")"
    digest ref
    stop_vm ref
}
# clone NAME SIZE: a clone under -S pulling from the server; prints "ready_ms cmd_ms whole_ms".
clone() {
    start_vm "$1" "$2" -S --incoming defer
    local t0 t1 t2
    t0=$(now_ms)
    h "$1" "migrate_incoming rdma-pull:$uri" >/dev/null
    t1=$(now_ms)
    wait_for 60 status_is "$1" postcopy-active || wait_for 1 status_is "$1" completed || die "clone $1 did not start: $(tail -3 "$work/$1.log")"
    wait_for 1200 status_is "$1" completed || die "clone $1 did not pull everything: $(tail -3 "$work/$1.log")"
    t2=$(now_ms)
    local connect
    connect=$(sed -n 's/.*checked, in \([0-9.]*\) ms.*/\1/p' "$work/$1.log" | tail -1)
    echo "$(field "$1" "lazy restore ready" | awk '{ print $1 }') ${connect:-null} $((t1 - t0)) $((t2 - t0))"
}

# ib_read_bw with 1 MiB READs (the clone's), MB/s.
read_bw() {
    local p=$(( 20000 + RANDOM % 20000 )) dev
    dev=$(ls /sys/class/infiniband | head -1)
    ib_read_bw -d "$dev" -s 1048576 -n 64 -F -p "$p" >"$work/ibr-server.log" 2>&1 &
    local server=$!
    sleep 1
    for _ in 1 2 3 4 5; do
        ib_read_bw -d "$dev" -s 1048576 -n 64 -F -p "$p" "$VMM_RDMA_ADDR" >"$work/ibr-client.log" 2>&1 || true
        grep -q "Couldn't connect" "$work/ibr-client.log" || break
        sleep 2
    done
    kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true
    awk '$1 == 1048576 && $2 > 0 && NF >= 5 { printf "%.2f\n", $4 * 1.048576 }' "$work/ibr-client.log" | tail -1
}

mkdir -p "$out"
results=()
ib_before=$(read_bw)
log "ib_read_bw (1 MiB READs): ${ib_before:-?} MB/s"
first_size=${sizes%%,*}
uri="$VMM_RDMA_ADDR:$(( 30000 + RANDOM % 20000 ))"
start_vm server 64M --guest pattern -S
for size in ${sizes//,/ }; do
    file="$shm/save-$size"
    log "$size: saving a running pattern guest (half its RAM filled by the VMM)"
    save "$size" "$file"
    bytes=$(stat -c %s "$file")
    ref=$(reference "$size" "$file")
    local_ready=$(local_lazy "$size" "$file")
    h server "x_pull_serve $file rdma:$uri" | grep . && die "x_pull_serve failed"
    # The server's own CPU while nobody pulls (its threads' idle work), over 10 s: the yardstick.
    idle0=$(cpu_ms "$pid_server"); sleep 10; idle_rate=$(awk -v a="$idle0" -v b="$(cpu_ms "$pid_server")" 'BEGIN{print (b - a) / 10}')
    cpu0=$(cpu_ms "$pid_server")
    read -r ready connect cmd whole <<<"$(clone c1 "$size")"
    cpu1=$(cpu_ms "$pid_server")
    h c1 "info migrate" | grep -E "setup|ready|requests|fault latency|blocktime" | sed 's/^/    c1: /' >&2
    got=$(digest c1)
    h c1 cont >/dev/null
    wait_for 10 bash -c "[ \"\$('$CTL' --qmp unix:$work/c1.qmp query-status | jq -r .status)\" = running ]" || die "the clone did not run"
    stop_vm c1
    pulled=$(h server "info pull-clients" | awk '/ done /{ print $3, $4; exit }')
    log "$size: connected and checked in ${connect} ms, then ready in ${ready} ms (a local lazy restore: ${local_ready} ms); whole after ${whole} ms; digest $([ "$got" = "$ref" ] && echo same || echo DIFFERS)"
    data=$(h server "info pull-clients" | awk '/ done /{ u = $4 == "GiB" ? 2^30 : $4 == "MiB" ? 2^20 : $4 == "KiB" ? 2^10 : 1
                                                      printf "%d\n", $3 * u; exit }')
    results+=("$(jq -n --arg size "$size" --argjson bytes "$bytes" --argjson ready "${ready:-null}" --argjson cmd "$cmd" \
        --argjson connect "$connect" --argjson local "${local_ready:-null}" --argjson idle "$idle_rate" --argjson data "$data" \
        --argjson whole "$whole" --argjson cpu "$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN{print b - a}')" \
        --arg pulled "$pulled" --argjson same "$([ "$got" = "$ref" ] && echo true || echo false)" \
        '{size: $size, save_bytes: $bytes, connect_ms: $connect, ready_ms: $ready, local_lazy_ready_ms: $local,
          command_ms: $cmd, whole_ms: $whole, pulled_bytes: $data, mb_per_s: ($data / 1e6 / ($whole / 1000)),
          server_cpu_ms: $cpu, server_idle_cpu_ms: ($idle * $whole / 1000), server_says: $pulled, digest_same: $same}')")
    if [ "$size" = "$first_size" ] && [ "$clones" -gt 1 ]; then
        log "$size: $clones clones at once"
        cpu0=$(cpu_ms "$pid_server")
        t0=$(now_ms)
        for k in $(seq 1 "$clones"); do
            start_vm "m$k" "$size" -S --incoming defer
        done
        for k in $(seq 1 "$clones"); do h "m$k" "migrate_incoming rdma-pull:$uri" >/dev/null; done
        times=() same=0
        for k in $(seq 1 "$clones"); do
            wait_for 1200 status_is "m$k" completed || die "clone m$k did not pull everything: $(tail -3 "$work/m$k.log")"
            times+=($(( $(now_ms) - t0 )))
            [ "$(digest "m$k")" = "$ref" ] && same=$((same + 1))
            stop_vm "m$k"
        done
        cpu1=$(cpu_ms "$pid_server")
        log "$size: $clones clones whole after ${times[*]} ms; $same of $clones digests the save's"
        results+=("$(jq -n --arg size "$size" --argjson n "$clones" --argjson same "$same" \
            --argjson cpu "$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN{print b - a}')" \
            --argjson times "$(printf '%s\n' "${times[@]}" | jq -s .)" \
            '{size: $size, clones: $n, whole_ms: $times, digests_same: $same, server_cpu_ms: $cpu}')")
    fi
    h server "info pull-clients"
    h server x_pull_serve_stop >/dev/null
    rm -f "$file"
done
ib_after=$(read_bw)
log "ib_read_bw (1 MiB READs): ${ib_after:-?} MB/s"
printf '%s\n' "${results[@]}" | jq -s --arg before "${ib_before:-}" --arg after "${ib_after:-}" --arg when "$(date -u +%FT%TZ)" --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" \
    '{when: $when, cpu: $cpu, ib_read_bw_mb_s: [$before, $after], runs: .}' >"$out/bench-pull.json"
printf '\n\033[1mclones pulling a served save over rdma\033[0m  %s\n' "$(jq -r '.when + "  " + .cpu' "$out/bench-pull.json")"
printf '  ib_read_bw, 1 MiB READs, before and after: %s and %s MB/s\n' "${ib_before:-?}" "${ib_after:-?}"
jq -r '.runs[] | if .clones then "  \(.size) x\(.clones) at once: whole after \(.whole_ms | map(tostring + " ms") | join(", ")); digests the save'"'"'s: \(.digests_same) of \(.clones); server CPU \(.server_cpu_ms) ms"
       else "  \(.size) (save \(.save_bytes / 1048576 | floor) MiB, \(.pulled_bytes / 1048576 | floor) MiB of data): connected and checked in \(.connect_ms) ms, runnable \(.ready_ms) ms later (a local lazy restore of the file: \(.local_lazy_ready_ms) ms); whole after \(.whole_ms) ms (\(.mb_per_s * 10 | floor / 10) MB/s); server CPU \(.server_cpu_ms) ms (idle over as long: \(.server_idle_cpu_ms | floor) ms); digest \(if .digest_same then "the save'"'"'s" else "DIFFERS" end)" end' "$out/bench-pull.json"
echo "(written to $out/bench-pull.json)"
