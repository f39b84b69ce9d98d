#!/usr/bin/env bash
# A stalled migration through vmmd, as a libvirt client sees it (label libvirt): vmmd started with
# --migration-stall-timeout gives every migration vmm's x-stall-timeout; a guest rewriting more
# than the link moves keeps the data left on a plateau, and then the source's vmm says so as QMP's
# X_MIGRATION_STALLED, which stock virsh's qemu-monitor-event receives through vmmd (libvirt has
# no event of its own for a stall), and its strategy (cancel, the default) ends the migration:
# 'virsh migrate --live' fails saying why, and the domain runs on at the source, nothing left at
# the destination.
#   virsh_stall_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build" --migration-stall-timeout 3000
start_destination "$build"
port=$((18800 + RANDOM % 190))
no_dest_vmm() { [ -z "$(pgrep -f -- "--qmp unix:$dir/dstate/run/")" ]; }

# As tests/migration/deadline_test.cc's stall: a stress guest rewriting 16 MiB (4 MiB where it
# runs emulated) against a link of 2 MiB/s (128 KiB/s), set on its vmm through virsh.
hot=$([ -n "${VMM_NESTED_TCG:-}" ] && echo 4M || echo 16M)
link=$([ -n "${VMM_NESTED_TCG:-}" ] && echo 128k || echo 2m)
demo_domain "$dir/demo.xml" 128 stress "bytes=$hot"
out=$(v define "$dir/demo.xml") || fail "define: $out"
out=$(v start demo) || fail "start: $out"
out=$(v qemu-monitor-command demo --hmp "migrate_set_parameter max-bandwidth $link") || fail "max-bandwidth: $out"

v qemu-monitor-event --domain demo --event X_MIGRATION_STALLED --timeout 600 >"$dir/events.out" 2>&1 &
watching=$!
also_kill+=("$watching")
wait_until 30 grep -q "registered monitor event callback" "$dir/log" || fail "qemu-monitor-event did not register: $(cat "$dir/events.out")"
out=$(v migrate --live demo "$duri" --migrateuri "tcp://127.0.0.1:$port") && fail "virsh migrate succeeded: $out"
expect "virsh migrate says why it ended" "$out" "x-stall-timeout: no progress for "
wait "$watching"  # one event, then it returns
expect "qemu-monitor-event showed the stall" "$(cat "$dir/events.out")" \
    "^event X_MIGRATION_STALLED at [0-9]+\.[0-9]{6} for domain 'demo': \{.*\"action\":\"cancel\""
expect "the domain runs on at the source" "$(v domstate demo)" "^running"
wait_until 60 no_dest_vmm || fail "a destination vmm is left: $(d list --all)"
expect "the destination holds no domain" "$(d list --all --name)" "^$"
