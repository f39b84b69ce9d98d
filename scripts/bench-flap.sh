#!/usr/bin/env bash
# What a broken link costs a precopy, side by side in one run: a host-filled guest of --size
# migrated at --bandwidth, once unbroken and once for each cut in --cuts (seconds): the link cut
# a third of the way through the bulk round, then mended. For each: the migration's time, the
# bytes it sent and their ratio to the unbroken run's, the pages sent again, the time both sides
# spent in precopy-paused, and from the link's return until 256 KiB of the migration had gone
# forward again (the retry interval, the new connection, the destination's report of what it
# holds: what the reconnection costs); and whether both RAM digests are the same.
#
# --transport tcp (default): through a forwarder on this host (tests/tools/cut_forwarder.cc),
# whose cut resets the connections and refuses new ones. --transport rdma: over a wire of two
# SoftRoCE devices whose cut drops every packet both ways (scripts/lib/scratch-wire.sh), in the
# SoftRoCE nested VM (started for it when this machine has no RDMA device); there "flowing again"
# is measured by `transferred ram` (completed writes only), polled every 20 ms. An outage shorter
# than the queue pairs' retries and --io-timeout costs only time there: no pause, nothing resent.
#
#   scripts/bench-flap.sh [--transport tcp|rdma] [--size 1G] [--bandwidth 256m] [--cuts 1,10]
#                         [--guest idle|stress] [--io-timeout MS] [--pin-all]
#   --pin-all: rdma-pin-all on both sides (rdma: the whole RAM registered before the bulk round)
#   rdma's defaults: --size 256M --bandwidth 0 (unlimited)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

transport=tcp size="" bandwidth="" cuts=1,10 guest=idle io_timeout="" pin_all=0
args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --transport) transport=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --bandwidth) bandwidth=$2; shift 2 ;;
        --cuts) cuts=$2; shift 2 ;;
        --guest) guest=$2; shift 2 ;;
        --io-timeout) io_timeout=$2; shift 2 ;;
        --pin-all) pin_all=1; shift ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
case "$transport" in
    tcp) size=${size:-1G} bandwidth=${bandwidth:-256m} ;;
    rdma) size=${size:-256M} bandwidth=${bandwidth:-0} ;;
    *) die "--transport is tcp or rdma" ;;
esac
if [ "$transport" = rdma ] && [ -z "${VMM_BENCH_INSIDE:-}" ]; then
    pkgs=("${VMM_CORE_PACKAGES[@]}" "${VMM_RDMA_PACKAGES[@]}")
    build_only pkgs vmm vmmctl guest_payloads vmm-transport-rdma
    log "the rdma wire is made inside the SoftRoCE nested VM"
    exec "$ROOT/scripts/softroce-run.sh" env VMM_BENCH_INSIDE=1 "$ROOT/scripts/bench-flap.sh" "${args[@]}"
fi
kvm_usable || die "$(why_no_kvm); this benchmark runs guests"
if [ "$transport" = tcp ]; then
    build_only VMM_PACKAGES vmm vmmctl guest_payloads cut_forwarder
else
    [ -n "${VMM_RDMA_HOTPLUG:-}" ] || die "--transport rdma makes network and RDMA devices: only in the SoftRoCE nested VM"
fi
VMM="$BUILD/bin/vmm" CTL="$BUILD/bin/vmmctl" FWD="$BUILD/tests/cut_forwarder" WIRE="$ROOT/scripts/lib/scratch-wire.sh"
work=$(mktemp -d /tmp/vmm-flap.XXXXXX)
pids=()
cleanup() {
    exec 7>&- 2>/dev/null || true
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    [ "$transport" = rdma ] && "$WIRE" down
    rm -rf "$work"
}
trap cleanup EXIT
if [ "$transport" = rdma ]; then
    "$WIRE" down
    "$WIRE" up || die "could not make the wire (scripts/lib/scratch-wire.sh up)"
fi

field() { awk -v k="$1: " 'index($0, k) == 1 && !done { s = substr($0, length(k) + 1); sub(/ .*/, "", s); print s; done = 1 }'; }
info() { "$CTL" "unix:$work/$1.sock" "info migrate"; }
guest_args=(--guest idle --prefill "$size")
[ "$guest" = stress ] && guest_args=(--guest stress --prefill "$size" --append bytes=8M)

# The link, per transport. link_open NAME PORT: sets DEST (the destination's URI) and SRC_URI
# (what the source migrates to); link_cut NAME, link_mend NAME, link_flow NAME (sets FLOW: ms
# from the mend until 256 KiB more went forward), link_close NAME.
link_open() {
    if [ "$transport" = rdma ]; then DEST="rdma:10.99.7.2:$2" SRC_URI=$DEST; return; fi
    DEST="tcp:127.0.0.1:$2"
    mkfifo "$work/$1.fw"
    "$FWD" "$2" <"$work/$1.fw" >"$work/$1.fw.out" & pids+=($!)
    exec 7>"$work/$1.fw"
    local fport=""
    for _ in $(seq 1 100); do fport=$(head -1 "$work/$1.fw.out" 2>/dev/null); [ -n "$fport" ] && break; sleep 0.05; done
    SRC_URI="tcp:127.0.0.1:$fport"
}
link_cut() { if [ "$transport" = rdma ]; then "$WIRE" cut; else echo cut >&7; fi; }
link_mend() {
    if [ "$transport" = rdma ]; then
        MENDED_KIB=$(info "$1-s" | field "transferred ram")
        MENDED_NS=$(date +%s%N)
        "$WIRE" mend
    else
        echo mend >&7
    fi
}
link_flow() {
    FLOW=-
    if [ "$transport" = tcp ]; then
        echo "flow 262144" >&7
        for _ in $(seq 1 1300); do FLOW=$(sed -n 2p "$work/$1.fw.out"); [ -n "$FLOW" ] && break; sleep 0.05; done
        return
    fi
    for _ in $(seq 1 6000); do
        local now; now=$(info "$1-s" | field "transferred ram")
        if [ "${now:-0}" -ge $(( MENDED_KIB + 256 )) ] 2>/dev/null; then
            FLOW=$(( ($(date +%s%N) - MENDED_NS) / 1000000 )); return
        fi
        [ "$(info "$1-s" | field "Migration status")" = completed ] && return
        sleep 0.02
    done
}
link_close() { if [ "$transport" = tcp ]; then echo quit >&7; exec 7>&-; fi; }

# one_run NAME CUT_SECONDS: sets T_MS SENT_KIB RESENT PAUSED FLOW SAME (or fails the script).
one_run() {
    local name=$1 cut=$2 port=$(( 22000 + RANDOM % 300 ))
    link_open "$name" "$port"
    "$VMM" -m "$size" --smp 1 -S --incoming defer --monitor "unix:$work/$name-d.sock" --serial none \
        >"$work/$name-d.log" 2>&1 & pids+=($!)
    "$VMM" -m "$size" --smp 1 "${guest_args[@]}" --monitor "unix:$work/$name-s.sock" --serial none \
        >"$work/$name-s.log" 2>&1 & pids+=($!)
    "$CTL" --wait 30 "unix:$work/$name-s.sock" "info status" >/dev/null
    "$CTL" --wait 30 "unix:$work/$name-d.sock" "info status" >/dev/null
    "$CTL" "unix:$work/$name-s.sock" "migrate_set_parameter max-bandwidth $bandwidth" >/dev/null
    if [ -n "$io_timeout" ]; then  # the destination's before it listens (rdma takes it then)
        for side in s d; do "$CTL" "unix:$work/$name-$side.sock" "migrate_set_parameter x-io-timeout $io_timeout" >/dev/null; done
    fi
    if [ "$pin_all" = 1 ]; then
        for side in s d; do "$CTL" "unix:$work/$name-$side.sock" "migrate_set_capability rdma-pin-all on" >/dev/null; done
    fi
    "$CTL" "unix:$work/$name-d.sock" "migrate_incoming $DEST" >/dev/null
    "$CTL" "unix:$work/$name-s.sock" "migrate -d $SRC_URI" >/dev/null
    FLOW=-
    if [ "$cut" != 0 ]; then
        local third=$(( $(numfmt --from=iec "$size") / 1024 / 3 ))
        until [ "$(info "$name-s" | field "transferred ram")" -ge "$third" ] 2>/dev/null; do sleep 0.02; done
        link_cut "$name"
        sleep "$cut"
        link_mend "$name"
        link_flow "$name"
    fi
    local st=""
    for _ in $(seq 1 3000); do
        st=$(info "$name-s" | field "Migration status")
        [ "$st" = completed ] || [ "$st" = failed ] && break
        sleep 0.1
    done
    [ "$st" = completed ] || die "$name: the migration did not complete: $(info "$name-s" | sed -n 's/^error: //p')"
    local out; out=$(info "$name-s")
    T_MS=$(echo "$out" | field "total time") SENT_KIB=$(echo "$out" | field "transferred ram")
    local resumes; resumes=$(echo "$out" | sed -n 's/^precopy resumes: //p')
    RESENT=$(echo "$resumes" | sed -n 's/.*; \([0-9]*\) pages sent again.*/\1/p') PAUSED=$(echo "$resumes" | sed -n 's/.*(paused \([0-9]*\) ms.*/\1/p')
    for _ in $(seq 1 100); do [ "$(info "$name-d" | field "Migration status")" = completed ] && break; sleep 0.1; done
    SAME=differ
    [ "$("$CTL" "unix:$work/$name-s.sock" "info ramhash")" = "$("$CTL" "unix:$work/$name-d.sock" "info ramhash")" ] && SAME=same
    link_close "$name"
    "$CTL" "unix:$work/$name-s.sock" quit >/dev/null || true
    "$CTL" "unix:$work/$name-d.sock" quit >/dev/null || true
    wait 2>/dev/null || true
}

printf '\n\033[1mvmm: a broken link in precopy\033[0m  %s  %s, %s cores\n' "$(date -u +%FT%TZ)" \
    "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" "$(nproc)"
way="tcp through a forwarder"
[ "$transport" = rdma ] && way="rdma over a SoftRoCE wire (inside the nested VM: TCG)"
printf 'host-filled %s guest (%s), %s at max-bandwidth %s%s; cut a third of the way through the bulk round\n\n' \
    "$size" "$guest" "$way" "$bandwidth" "${io_timeout:+, x-io-timeout $io_timeout ms}$([ "$pin_all" = 1 ] && echo ", rdma-pin-all")"
printf '%-12s %9s %10s %11s %12s %10s %16s %6s\n' link "time s" "sent MiB" "× unbroken" "pages again" "paused ms" "flowing again ms" RAM
one_run unbroken 0
base=$SENT_KIB
printf '%-12s %9.2f %10.2f %11s %12s %10s %16s %6s\n' unbroken "$(awk -v t="$T_MS" 'BEGIN{print t/1000}')" \
    "$(awk -v k="$SENT_KIB" 'BEGIN{print k/1024}')" 1.00 - - - "$SAME"
for c in ${cuts//,/ }; do
    one_run "cut$c" "$c"
    printf '%-12s %9.2f %10.2f %11.4f %12s %10s %16s %6s\n' "cut ${c} s" "$(awk -v t="$T_MS" 'BEGIN{print t/1000}')" \
        "$(awk -v k="$SENT_KIB" 'BEGIN{print k/1024}')" "$(awk -v k="$SENT_KIB" -v b="$base" 'BEGIN{print k/b}')" \
        "${RESENT:--}" "${PAUSED:--}" "$(awk -v f="$FLOW" 'BEGIN{if (f == "-" || f < 0) print "-"; else printf "%.0f", f}')" "$SAME"
done
