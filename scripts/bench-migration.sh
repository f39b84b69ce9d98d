#!/usr/bin/env bash
# Migration benchmark: every figure is measured side by side in this one run, never compared
# with numbers from elsewhere. Three parts:
#   1. throughput: a host-filled (incompressible) guest of --size, migrated --runs times, beside
#      this machine's raw loopback TCP (hot 4 MiB buffers, as iperf measures, and memory to
#      memory over the same size, as a migration moves RAM); medians and ratios; variants side
#      by side: the default (one connection; to this host it copies RAM), multifd on, a
#      --mem-prealloc destination, splicing to this host too (x-zero-copy-local: what the
#      zero-copy default is decided by), and verify-ram on beside the default and beside
#      multifd: what end-to-end RAM verification costs, the median of each run's paired ratio;
#      and TLS (tls-creds, a test PKI) beside the default and beside multifd: what TLS costs,
#      paired likewise, and the handshake (setup time with TLS minus without); kernel TLS
#      (x-tls-kernel: the kernel encrypts what the source sends) beside TLS in GnuTLS, copying
#      and splicing RAM (only where the kernel has TLS: modprobe tls); the setup time
#      and its parts beside a raw loopback connect with one 64-byte exchange (its floor)
#   2. idle scaling: idle guests of 1 GiB and 16 GiB that touched little: time must follow what
#      was touched, not the RAM size
#   3. downtime: the stress guest with downtime-limit 300 ms (QEMU's default) and 50 ms;
#      VMM-measured downtime and the pause the pattern guest observed itself
# Also: each vmm's memory beyond guest RAM, sampled during every migration, and the CPU time
# both vmm spent on it (user + system, every thread, from the migrate command to its end) per GB
# moved: what a variant costs in cores, and so how fast the cores here could run it at best.
#
#   scripts/bench-migration.sh [--size 1G] [--runs 3] [--transport tcp|unix] [--quick]
#                              [--variants mig,tls,ktls,...]   (part 1 only, these variants)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

size=1G runs=3 transport=tcp quick=0 only=
while [ $# -gt 0 ]; do
    case "$1" in
        --variants) only=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --transport) transport=$2; shift 2 ;;
        --quick) quick=1; runs=1; size=256M; shift ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;  # the comment block above
        *) die "unknown option $1 (see --help)" ;;
    esac
done
build
VMM="$BUILD/bin/vmm" CTL="$BUILD/bin/vmmctl"
work=$(mktemp -d /tmp/vmm-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

uri_for() {  # uri_for NAME
    if [ "$transport" = unix ]; then echo "unix:$work/$1.mig"; else echo "tcp:127.0.0.1:$(( 20000 + RANDOM % 20000 ))"; fi
}

# field LABEL < info-migrate text: the first word after "LABEL: " (reads all its input, so the
# writer never meets a closed pipe).
field() { awk -v k="$1: " 'index($0, k) == 1 && !done { s = substr($0, length(k) + 1); sub(/ .*/, "", s); print s; done = 1 }'; }

# cpu_ticks PID...: user + system clock ticks of these processes, all their threads.
cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo "$t"; }

# migrate_once NAME SIZE SMP SRC_ARGS...: runs one migration and sets R_TOTAL R_MBPS R_DOWN
# R_PAUSE R_SRC_KIB R_DST_KIB R_SENT_KIB R_SETUP R_SETUP_PARTS R_CPU_S (both vmm's CPU seconds
# over the migration), and R_OK=1. One that fails sets
# R_OK=0 and every figure to "-", says why in $work/failed and keeps its logs in
# build/bench/failed-STAMP-NAME/: the other figures are reported, and the script fails at the end.
migrate_once() {
    R_OK=1
    if ! migration_run "$@"; then
        R_OK=0 R_TOTAL=- R_MBPS=- R_DOWN=- R_PAUSE=- R_SENT_KIB=- R_SETUP=- R_SETUP_PARTS= R_SRC_KIB=0 R_DST_KIB=0 R_CPU_S=-
        local keep="$BUILD/bench/failed-$stamp-$1"
        mkdir -p "$keep" && cp "$work/$1"-* "$keep/" 2>/dev/null || true
        echo "$1: ${R_FAILED:-failed} (logs: $keep)" >>"$work/failed"
        echo "   FAILED: $(tail -1 "$work/failed")" >&2
        for p in "${run_pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    fi
}
stamp=$(date -u +%Y%m%d-%H%M%S)
: >"$work/failed"

# migration_run: migrate_once's work; returns 1 with R_FAILED set when the migration fails.
migration_run() {
    local name=$1 mem=$2 smp=$3; shift 3
    local uri; uri=$(uri_for "$name")
    local ram_kib=$(( $(numfmt --from=iec "$mem") / 1024 ))
    "$VMM" -m "$mem" --smp "$smp" --incoming "$uri" --monitor "unix:$work/$name-d.sock" --serial none "${DST_ARGS[@]}" \
        >"$work/$name-d.log" 2>&1 &
    local dpid=$!; pids+=("$dpid")
    "$VMM" -m "$mem" --smp "$smp" --monitor "unix:$work/$name-s.sock" --serial none "$@" >"$work/$name-s.log" 2>&1 &
    local spid=$!; pids+=("$spid")
    run_pids=("$spid" "$dpid")
    R_FAILED="a vmm did not start: $(tail -1 "$work/$name-s.log" "$work/$name-d.log" 2>/dev/null | grep -v '^==>' | grep . | tail -1)"
    "$CTL" --wait 30 "unix:$work/$name-s.sock" "info status" >/dev/null || return 1
    # Let the payload start (and the pattern guest fill its region) before migrating.
    for _ in $(seq 1 300); do
        [ "$("$CTL" "unix:$work/$name-s.sock" "info guest" | field steps)" -ge 1 ] 2>/dev/null && break
        sleep 0.1
    done
    "$CTL" --wait 30 "unix:$work/$name-d.sock" "info status" >/dev/null || return 1
    # The longest gap the guest saw before migrating: its own step time, the resolution of the
    # guest-observed pause below.
    R_BASELINE=$("$CTL" "unix:$work/$name-s.sock" "info guest" | field "longest pause observed")
    sample_overhead "$spid" "$ram_kib" "$work/$name-s.rss" >/dev/null & local s1=$!
    sample_overhead "$dpid" "$ram_kib" "$work/$name-d.rss" >/dev/null & local s2=$!
    pids+=("$s1" "$s2") run_pids+=("$s1" "$s2")
    [ "${VMM_BENCH_FAIL:-}" != "$name" ] || uri="${uri%:*}:$(( 20000 + RANDOM % 20000 ))"  # on purpose: nobody there
    local ticks; ticks=$(cpu_ticks "$spid" "$dpid")
    local out; out=$("$CTL" "unix:$work/$name-s.sock" "migrate $uri" | tr '\r' '\n' || true)
    R_CPU_S=$(awk -v a="$ticks" -v b="$(cpu_ticks "$spid" "$dpid")" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", (b - a) / hz}')
    if ! echo "$out" | grep -q "Migration status: completed"; then
        R_FAILED=$(echo "$out" | sed -n 's/^error: //p' | tail -1)
        R_FAILED="the migration did not complete${R_FAILED:+: $R_FAILED}"
        return 1
    fi
    sleep 1.5  # the destination guest runs on and reports the pause it lived through
    local pause; pause=$("$CTL" "unix:$work/$name-d.sock" "info migrate" | field "guest-observed pause" || true)
    kill "$s1" "$s2" 2>/dev/null || true; wait "$s1" "$s2" 2>/dev/null || true
    "$CTL" "unix:$work/$name-s.sock" quit >/dev/null || true
    "$CTL" "unix:$work/$name-d.sock" quit >/dev/null || true
    wait "$spid" "$dpid" 2>/dev/null || true
    R_TOTAL=$(echo "$out" | field "total time") R_MBPS=$(echo "$out" | field throughput)
    R_DOWN=$(echo "$out" | field downtime) R_PAUSE=${pause:--} R_SENT_KIB=$(echo "$out" | field "transferred ram")
    R_SETUP=$(echo "$out" | field setup)
    R_SETUP_PARTS=$(echo "$out" | sed -n 's/^setup parts: //p')
    R_SRC_KIB=$(cat "$work/$name-s.rss" 2>/dev/null || echo 0) R_DST_KIB=$(cat "$work/$name-d.rss" 2>/dev/null || echo 0)
}
DST_ARGS=()


printf '\n\033[1mvmm migration benchmark\033[0m  %s  %s, %s cores  transport %s\n' "$(date -u +%FT%TZ)" \
    "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" "$(nproc)" "$transport"

# filled_run FILE NAME SRC_ARGS...: one migration of a host-filled guest of $size; its MB/s is
# set in R_FILLED and appended to $work/FILE.
filled_run() {
    local file=$1 name=$2; shift 2
    migrate_once "$name" "$size" 1 --guest idle --prefill "$size" "$@"
    R_FILLED=-
    [ "$R_OK" = 1 ] || { echo - >>"$work/$file"; return 0; }  # keeps each run's line beside its pair's
    R_FILLED=$(awk -v b="$bytes" -v t="$R_TOTAL" 'BEGIN{printf "%.1f", b/(t/1000)/1e6}')
    echo "$R_FILLED" >>"$work/$file"
    awk -v c="$R_CPU_S" -v b="$bytes" 'BEGIN{printf "%.3f\n", c / (b / 1e9)}' >>"$work/$file.cpu"
}

log "1. throughput: host-filled $size guest, $runs run(s), each migration right after raw loopback TCP"
bytes=$(numfmt --from=iec "$size")
all_variants=(mig ver mfd mfdver pre splice tls mfdtls ktls ktlssp)
variants=("${all_variants[@]}")
[ -z "$only" ] || IFS=, read -r -a variants <<<"$only"
for v in "${variants[@]}"; do
    [[ " ${all_variants[*]} " == *" $v "* ]] || die "--variants: no variant '$v' (there are: ${all_variants[*]})"
done
for v in "${all_variants[@]}" hot cold connect; do
    : >"$work/$v"; : >"$work/$v.ratio"; : >"$work/$v.setup"; : >"$work/$v.cpu"
done
max_src=0 max_dst=0
printf '[migration.capabilities]\nx-zero-copy-local = true\n' >"$work/splice.toml"
printf '[migration.capabilities]\nmultifd = true\n' >"$work/multifd.toml"  # 2 lanes
printf '[migration.capabilities]\nverify-ram = true\n' >"$work/ver.toml"
printf '[migration.capabilities]\nmultifd = true\nverify-ram = true\n' >"$work/mfdver.toml"
"$ROOT/scripts/make-test-pki.sh" "$work/pki" >/dev/null
printf '[migration.parameters]\ntls-creds = "%s"\ntls-hostname = "localhost"\n' "$work/pki" >"$work/tls.toml"
printf '[migration.capabilities]\nmultifd = true\n[migration.parameters]\ntls-creds = "%s"\ntls-hostname = "localhost"\n' \
    "$work/pki" >"$work/mfdtls.toml"
printf '[migration.capabilities]\nx-tls-kernel = true\n[migration.parameters]\ntls-creds = "%s"\ntls-hostname = "localhost"\n' \
    "$work/pki" >"$work/ktls.toml"
printf '[migration.capabilities]\nx-tls-kernel = true\nx-zero-copy-local = true\n[migration.parameters]\ntls-creds = "%s"\ntls-hostname = "localhost"\n' \
    "$work/pki" >"$work/ktlssp.toml"

# paired_run VARIANT NAME: raw hot TCP measured just before the migration it is compared
# with, so that the ratio of each pair holds while this shared machine's speed drifts.
paired_run() {
    local v=$1 name=$2 hot args=()
    hot=$("$BUILD/bin/vmm-tcpbench" "$size" | sed 's/.*MBps=//')
    echo "$hot" >>"$work/hot"
    DST_ARGS=()
    case "$v" in
        mfd) args=(--config "$work/multifd.toml") ;;
        ver) args=(--config "$work/ver.toml") ;;
        mfdver) args=(--config "$work/mfdver.toml") ;;
        pre) DST_ARGS=(--mem-prealloc) ;;
        splice) args=(--config "$work/splice.toml") ;;
        tls|mfdtls) args=(--config "$work/$v.toml") DST_ARGS=(--config "$work/$v.toml") ;;
        ktls|ktlssp) args=(--config "$work/$v.toml") DST_ARGS=(--config "$work/tls.toml") ;;
    esac
    filled_run "$v" "$v$name" "${args[@]}"
    DST_ARGS=()
    if [ "$R_OK" != 1 ]; then printf '   %-4s FAILED\n' "$v"; return 0; fi
    echo "$R_SETUP" >>"$work/$v.setup"
    [ "$v" != mig ] || echo "$R_SETUP_PARTS" >"$work/mig.parts"
    awk -v a="$R_FILLED" -v b="$hot" 'BEGIN{printf "%.3f\n", a/b}' >>"$work/$v.ratio"
    if [ "$R_SRC_KIB" -gt "$max_src" ]; then max_src=$R_SRC_KIB; fi
    if [ "$R_DST_KIB" -gt "$max_dst" ]; then max_dst=$R_DST_KIB; fi
    printf '   %-4s %8s MB/s beside raw TCP hot %8s MB/s: %s; both vmm %s CPU-s (%s s/GB)\n' "$v" "$R_FILLED" "$hot" \
        "$(tail -1 "$work/$v.ratio")" "$R_CPU_S" "$(tail -1 "$work/$v.cpu")"
}
for i in $(seq 1 "$runs"); do
    "$BUILD/bin/vmm-tcpbench" "$size" --cold | sed 's/.*MBps=//' >>"$work/cold"
    # The least a TCP migration's setup can cost here: a loopback connect and one exchange.
    "$BUILD/bin/vmm-tcpbench" --connect 50 | sed 's/.*median_us=\([0-9]*\).*/\1/' >>"$work/connect"
    echo "   run $i: raw TCP memory to memory $(tail -1 "$work/cold") MB/s; a raw connect and 64-byte exchange $(tail -1 "$work/connect") us"
    for v in "${variants[@]}"; do paired_run "$v" "$i"; done
done
declare -A mbs ratio
for v in "${all_variants[@]}"; do
    mbs[$v]=$({ grep -vx -- - "$work/$v" || true; } | median); ratio[$v]=$(median <"$work/$v.ratio")
done
hot=$(median <"$work/hot") cold=$(median <"$work/cold")

declare -A dt gp dt_mfd
t1=- k1=- t16=- k16=- dt[300]=- dt[50]=- gp[300]=- gp[50]=- dt_mfd[300]=- dt_mfd[50]=-
if [ -z "$only" ]; then  # --variants: part 1 alone
    log "2. idle scaling: 1 GiB and 16 GiB idle guests that touched little"
    migrate_once idle1 1G 1 --guest idle
    t1=$R_TOTAL k1=$R_SENT_KIB
    if [ "$quick" = 1 ]; then t16=- k16=-; else migrate_once idle16 16G 1 --guest idle; t16=$R_TOTAL k16=$R_SENT_KIB; fi

    log "3. downtime under the stress guest (64 MiB rewritten over and over, 2 vCPUs)"
    for limit in 300 50; do
        printf '[migration]\ndowntime_limit_ms = %s\n' "$limit" >"$work/limit$limit.toml"
        printf '[migration]\ndowntime_limit_ms = %s\n[migration.capabilities]\nmultifd = true\n' "$limit" \
            >"$work/limit$limit-mfd.toml"
        migrate_once "stress$limit" 512M 2 --guest stress --append bytes=64M --config "$work/limit$limit.toml"
        down=$R_DOWN
        migrate_once "stress$limit-mfd" 512M 2 --guest stress --append bytes=64M --config "$work/limit$limit-mfd.toml"
        dt_mfd[$limit]=$R_DOWN
        migrate_once "pattern$limit" 512M 1 --guest pattern --append "bytes=64M check=8" --config "$work/limit$limit.toml"
        dt[$limit]="$down / $R_DOWN" gp[$limit]="$R_PAUSE (its step time before migrating: $R_BASELINE)"
    done
fi

printf '\n\033[1m%-58s %s\033[0m\n' "measure" "value"
row() { printf '%-58s %s\n' "$1" "$2"; }
row "raw loopback TCP, hot 4 MiB buffers (median)" "$hot MB/s"
row "raw loopback TCP, memory to memory $size (median)" "$cold MB/s"
row "host-filled $size guest, MB/s (median) and, in brackets," ""
row "  the median of each migration's ratio to raw TCP hot just before it (target >= 0.8):" ""
variant_row() {  # variant_row VARIANT LABEL
    row "  $2" "${mbs[$1]} MB/s  [${ratio[$1]}]  (÷ memory to memory: $(awk -v a="${mbs[$1]}" -v c="$cold" 'BEGIN{if (a == "-") print "-"; else printf "%.2f", a/c}'); CPU $(median <"$work/$1.cpu") s/GB)"
}
variant_row mig "default (one connection; copies RAM to this host)"
variant_row ver "  verify-ram on"
variant_row mfd "multifd on (2 lanes)"
variant_row mfdver "  verify-ram on"
variant_row pre "destination started with --mem-prealloc"
variant_row splice "splicing RAM to this host too (x-zero-copy-local)"
variant_row tls "TLS on (tls-creds; one connection)"
variant_row mfdtls "multifd on (2 lanes), TLS on every lane"
variant_row ktls "kernel TLS (x-tls-kernel; copies RAM to this host)"
variant_row ktlssp "kernel TLS, RAM spliced (x-tls-kernel, x-zero-copy-local)"
# What verification costs: each run's verified MB/s over the unverified one measured beside it.
paste "$work/ver" "$work/mig" | awk 'NF == 2 && $1 != "-" && $2 != "-" {printf "%.3f\n", $1/$2}' >"$work/cost1"
paste "$work/mfdver" "$work/mfd" | awk 'NF == 2 && $1 != "-" && $2 != "-" {printf "%.3f\n", $1/$2}' >"$work/cost2"
paste "$work/splice" "$work/mig" | awk 'NF == 2 && $1 != "-" && $2 != "-" {printf "%.3f\n", $1/$2}' >"$work/splice.vs"
row "verify-ram: verified / unverified MB/s, median of paired runs" ""
row "  one connection (verify-ram is on by default if >= 0.95)" "$(median <"$work/cost1")  (runs: $(tr '\n' ' ' <"$work/cost1"))"
row "  multifd, 2 lanes" "$(median <"$work/cost2")  (runs: $(tr '\n' ' ' <"$work/cost2"))"
paste "$work/tls" "$work/mig" | awk 'NF == 2 && $1 != "-" && $2 != "-" {printf "%.3f\n", $1/$2}' >"$work/tls.vs"
paste "$work/mfdtls" "$work/mfd" | awk 'NF == 2 && $1 != "-" && $2 != "-" {printf "%.3f\n", $1/$2}' >"$work/mfdtls.vs"
row "TLS: with / without MB/s, median of paired runs" ""
row "  one connection (target >= 0.8)" "$(median <"$work/tls.vs")  (runs: $(tr '\n' ' ' <"$work/tls.vs"))"
row "  multifd, 2 lanes (target >= 0.95)" "$(median <"$work/mfdtls.vs")  (runs: $(tr '\n' ' ' <"$work/mfdtls.vs"))"
# The most these cores could move with TLS on every lane: all of them busy on nothing else, at
# the CPU time per GB that TLS multifd took; over multifd plaintext's MB/s, the best ratio here.
ceiling=$(awk -v c="$(median <"$work/mfdtls.cpu")" -v n="$(nproc)" 'BEGIN{if (c == "-" || c <= 0) print "-"; else printf "%.0f", n / c * 1000}')
row "  multifd with TLS at most, $(nproc) cores / its CPU-s per GB" "$ceiling MB/s ($(awk -v a="$ceiling" -v b="${mbs[mfd]}" 'BEGIN{if (a == "-" || b == "-" || b <= 0) print "-"; else printf "%.2f", a/b}') of multifd plaintext)"
paste "$work/ktls" "$work/tls" | awk 'NF == 2 && $1 != "-" && $2 != "-" {printf "%.3f\n", $1/$2}' >"$work/ktls.vs"
paste "$work/ktlssp" "$work/tls" | awk 'NF == 2 && $1 != "-" && $2 != "-" {printf "%.3f\n", $1/$2}' >"$work/ktlssp.vs"
row "  kernel TLS / TLS in GnuTLS, copying (above 1: the kernel's is faster)" "$(median <"$work/ktls.vs")  (runs: $(tr '\n' ' ' <"$work/ktls.vs"))"
row "  kernel TLS splicing RAM / TLS in GnuTLS" "$(median <"$work/ktlssp.vs")  (runs: $(tr '\n' ' ' <"$work/ktlssp.vs"))"
row "  setup time with / without TLS (median; the handshake's share)" "$(median <"$work/tls.setup") / $(median <"$work/mig.setup") ms"
row "setup time, default (median), and its parts in the last run" "$(median <"$work/mig.setup") ms: $(cat "$work/mig.parts" 2>/dev/null)"
# info migrate's setup is whole milliseconds; its parts (tenths) say more on loopback.
parts_sum=$(sed 's/([^)]*)//g' "$work/mig.parts" 2>/dev/null | grep -oE '[0-9]+(\.[0-9]+)?' | awk '{s += $1; n++} END {if (n) printf "%.1f", s; else print "-"}')
raw_ms=$(median <"$work/connect" | awk '{if ($1 == "-") print "-"; else printf "%.2f", $1 / 1000}')
row "  its parts' sum in the last run, against raw loopback TCP: a connect and one 64-byte exchange (median)" \
    "$parts_sum ms / $raw_ms ms"
row "spliced / copied to this host, median of paired runs" "$(median <"$work/splice.vs")  (runs: $(tr '\n' ' ' <"$work/splice.vs"))"
row "idle 1 GiB: total time / data sent" "$t1 ms / $k1 KiB"
row "idle 16 GiB: total time / data sent" "$t16 ms / $k16 KiB"
row "  time ratio 16 GiB : 1 GiB (RAM ratio 16)" "$(awk -v a="$t16" -v b="$t1" 'BEGIN{if (a=="-" || b=="-") print "-"; else printf "%.2f", a/b}')"
row "downtime, limit 300 ms: stress / pattern guest (VMM)" "${dt[300]} ms"
row "  stress guest with multifd on" "${dt_mfd[300]} ms"
row "  pause the pattern guest observed across the switchover" "${gp[300]} ms"
row "downtime, limit 50 ms: stress / pattern guest (VMM)" "${dt[50]} ms"
row "  stress guest with multifd on" "${dt_mfd[50]} ms"
row "  pause the pattern guest observed across the switchover" "${gp[50]} ms"
row "memory beyond guest RAM, max during migration: source" "$(( max_src / 1024 )) MiB (target < 64)"
row "memory beyond guest RAM, max during migration: destination" "$(( max_dst / 1024 )) MiB (target < 64)"
if [ -s "$work/failed" ]; then
    sed 's/^/FAILED: /' "$work/failed"
    die "$(wc -l <"$work/failed") migration(s) failed (above); every other figure stands"
fi
