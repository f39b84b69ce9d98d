#!/usr/bin/env bash
# What a broken link costs a precopy, side by side in one run: a host-filled guest of --size
# migrated over tcp through a forwarder (tests/tools/cut_forwarder.cc) at --bandwidth, once
# unbroken and once for each cut in --cuts (seconds): the link cut a third of the way through
# the bulk round, then mended. For each: the migration's time, the bytes it sent and their
# ratio to the unbroken run's, the pages sent again, the time both sides spent in
# precopy-paused, and from the link's return until 256 KiB of the migration had gone forward
# again (the retry interval, the new connection, the destination's report of what it holds:
# what the reconnection costs); and whether both RAM digests are the same.
#
#   scripts/bench-flap.sh [--size 1G] [--bandwidth 256m] [--cuts 1,10] [--guest idle|stress]
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

size=1G bandwidth=256m cuts=1,10 guest=idle
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size=$2; shift 2 ;;
        --bandwidth) bandwidth=$2; shift 2 ;;
        --cuts) cuts=$2; shift 2 ;;
        --guest) guest=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
kvm_usable || die "$(why_no_kvm); this benchmark runs guests"
build_only VMM_PACKAGES vmm vmmctl guest_payloads cut_forwarder
VMM="$BUILD/bin/vmm" CTL="$BUILD/bin/vmmctl" FWD="$BUILD/tests/cut_forwarder"
work=$(mktemp -d /tmp/vmm-flap.XXXXXX)
pids=()
cleanup() { exec 7>&- 2>/dev/null || true; for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

field() { awk -v k="$1: " 'index($0, k) == 1 && !done { s = substr($0, length(k) + 1); sub(/ .*/, "", s); print s; done = 1 }'; }
info() { "$CTL" "unix:$work/$1.sock" "info migrate"; }
guest_args=(--guest idle --prefill "$size")
[ "$guest" = stress ] && guest_args=(--guest stress --prefill "$size" --append bytes=8M)

# one_run NAME CUT_SECONDS: sets T_MS SENT_KIB RESENT PAUSED FLOW SAME (or fails the script).
one_run() {
    local name=$1 cut=$2 port=$(( 22000 + RANDOM % 300 ))
    "$VMM" -m "$size" --smp 1 -S --incoming "tcp:127.0.0.1:$port" --monitor "unix:$work/$name-d.sock" --serial none \
        >"$work/$name-d.log" 2>&1 & pids+=($!)
    "$VMM" -m "$size" --smp 1 "${guest_args[@]}" --monitor "unix:$work/$name-s.sock" --serial none \
        >"$work/$name-s.log" 2>&1 & pids+=($!)
    "$CTL" --wait 30 "unix:$work/$name-s.sock" "info status" >/dev/null
    "$CTL" --wait 30 "unix:$work/$name-d.sock" "info status" >/dev/null
    mkfifo "$work/$name.fw"
    "$FWD" "$port" <"$work/$name.fw" >"$work/$name.fw.out" & pids+=($!)
    exec 7>"$work/$name.fw"
    local fport=""
    for _ in $(seq 1 100); do fport=$(head -1 "$work/$name.fw.out" 2>/dev/null); [ -n "$fport" ] && break; sleep 0.05; done
    "$CTL" "unix:$work/$name-s.sock" "migrate_set_parameter max-bandwidth $bandwidth" >/dev/null
    "$CTL" "unix:$work/$name-s.sock" "migrate -d tcp:127.0.0.1:$fport" >/dev/null
    FLOW=-
    if [ "$cut" != 0 ]; then
        local third=$(( $(numfmt --from=iec "$size") / 1024 / 3 ))
        until [ "$(info "$name-s" | field "transferred ram")" -ge "$third" ] 2>/dev/null; do sleep 0.02; done
        echo cut >&7
        sleep "$cut"
        echo mend >&7
        echo "flow 262144" >&7
        for _ in $(seq 1 1300); do FLOW=$(sed -n 2p "$work/$name.fw.out"); [ -n "$FLOW" ] && break; sleep 0.05; done
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
    echo quit >&7; exec 7>&-
    "$CTL" "unix:$work/$name-s.sock" quit >/dev/null || true
    "$CTL" "unix:$work/$name-d.sock" quit >/dev/null || true
    wait 2>/dev/null || true
}

printf '\n\033[1mvmm: a broken link in precopy\033[0m  %s  %s, %s cores\n' "$(date -u +%FT%TZ)" \
    "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" "$(nproc)"
printf 'host-filled %s guest (%s), tcp through a forwarder at max-bandwidth %s; cut a third of the way through the bulk round\n\n' \
    "$size" "$guest" "$bandwidth"
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
