#!/usr/bin/env bash
# Evacuating a host (label libvirt): four domains migrated at once to one destination and back,
# twice in a row, each arriving with the RAM digest it left with; then eight at once with --p2p.
# No migration names a port: concurrent Prepares each get their own (reserved until Finish, not
# probed: without that, one of four failed with "Address already in use"), and every incoming vmm
# listens on the migration address it was given, not on every address.
#   virsh_evacuate_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build" --migration-address 127.0.0.1
tport=$((17000 + RANDOM % 400))
start_destination "$build" --migration-address 127.0.0.1 --listen-tcp "127.0.0.1:$tport" --listen-tcp-insecure
p2p_uri="vmm+tcp://127.0.0.1:$tport/system"
qmp() { domain_qmp "$build/bin/vmmctl" "$@"; }  # qmp STATE DOMAIN COMMAND
declare -A digest
# The pattern guest has filled its memory once it counts steps.
filled() { qmp state "$1" query-guest | grep -qE '"steps":[1-9]'; }

for i in $(seq 1 8); do
    demo_domain "$dir/m$i.xml" 32 pattern "bytes=4M seed=$i $pattern_rest"
    sed -i "s/>demo</>m$i</" "$dir/m$i.xml"
    out=$(v define "$dir/m$i.xml") || fail "define m$i: $out"
    out=$(v start m$i) || fail "start m$i: $out"
done
for i in $(seq 1 8); do
    wait_until 60 filled "m$i" || fail "m$i's guest did not fill its memory: $(qmp state m$i query-guest)"
    out=$(v suspend m$i) || fail "suspend m$i: $out"
    digest[m$i]=$(qmp state m$i query-ramhash) || fail "query-ramhash m$i: ${digest[m$i]}"
done

# round FROM-URI TO-URI TO-STATE COUNT [FLAGS...]: COUNT domains migrated at once, each checked.
round() {
    local from=$1 to=$2 at=$3 count=$4 pids=() i after
    shift 4
    for i in $(seq 1 "$count"); do
        virsh -c "$from" migrate --live "$@" "m$i" "$to" >"$dir/mig$i.out" 2>&1 &
        pids+=($!)
    done
    for i in $(seq 1 "$count"); do
        wait "${pids[$((i - 1))]}" || fail "migrate m$i ($count at once, $*): $(cat "$dir/mig$i.out")"
    done
    for i in $(seq 1 "$count"); do
        after=$(qmp "$at" "m$i" query-ramhash) || fail "query-ramhash m$i in $at: $after"
        [ "$after" = "${digest[m$i]}" ] || fail "m$i arrived with RAM digest $after, not ${digest[m$i]}"
    done
}
# The incoming vmm of each domain: its --incoming argument (distinct ports, the address asked for).
incoming_args() { pgrep -af -- "--qmp unix:$dir/$1/run/" | grep -o -- "--incoming [^ ]*" | sort; }

for pass in 1 2; do
    round "$uri" "$duri" dstate 4
    # A port goes back at Finish (the vmm has its connection by then), so a later Prepare may
    # reuse one: what matters is that none failed, and that each listened where it was told.
    args=$(incoming_args dstate)
    [ "$(wc -l <<<"$args")" = 4 ] || fail "pass $pass: not four incoming vmm: $args"
    grep -v -- "--incoming tcp:127.0.0.1:49[0-9]*$" <<<"$args" && fail "pass $pass: an incoming vmm listens elsewhere: $args"
    echo "ok: pass $pass: four at once there, each on a port of 127.0.0.1 from libvirt's range"
    round "$duri" "$uri" state 4
    echo "ok: pass $pass: four at once back"
done
round "$uri" "$p2p_uri" dstate 8 --p2p
echo "ok: eight at once with --p2p, every digest equal"
