#!/usr/bin/env bash
# Stock virsh live-migrates a vmm domain over RDMA with a tcp fallback, and the fabric fails for
# good mid-migration (label rdma: scripts/test.sh runs it in the SoftRoCE nested VM): the
# migration URI names two ways, --migrateuri rdma://A:P?fallback=tcp://B:Q, which vmmd gives both vmm as
# their x-fallback-uri; the RDMA device's network goes down in the bulk round, and the rest of the
# guest goes over tcp with no client action. Shown: virsh migrate completes, the destination
# runs the guest without errors, and the source's vmm says how much went each way.
#   virsh_fallback_test.sh BUILD_DIR
set -uo pipefail
build=$1
[ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] && [ -n "${VMM_RDMA_HOTPLUG:-}" ] || {
    echo "SKIP: needs an RDMA device of its own to take down (VMM_RDMA_HOTPLUG=1: scripts/test.sh runs this in the SoftRoCE nested VM)"
    exit 77
}
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
# A SoftRoCE device of this test's own, rxe6 on dummy6 at 10.99.6.1, whose network it takes down
# for good (a fabric that stays down: scripts/lib/scratch-wire.sh says why a flap cannot be made so).
ip link add dummy6 type dummy && ip addr add 10.99.6.1/24 dev dummy6 && ip link set dummy6 up &&
    rdma link add rxe6 type rxe netdev dummy6 || fail "could not make rxe6 on dummy6"
# The device goes once no process holds it (SoftRoCE waits for every user): the vmm first.
trap 'cleanup; rdma link delete rxe6 2>/dev/null; ip link del dummy6 2>/dev/null' EXIT
start_vmmd "$build"
start_destination "$build"
qmp() { domain_qmp "$build/bin/vmmctl" "$@"; }  # qmp STATE DOMAIN COMMAND
status_is() { qmp "$1" demo query-migrate 2>/dev/null | grep -q "\"status\":\"$2\""; }
transferred_over() {  # transferred_over STATE KIB: the source's vmm has sent more than KIB
    local t; t=$(qmp "$1" demo query-migrate 2>/dev/null | grep -o '"transferred":[0-9]*' | head -1 | cut -d: -f2)
    [ "${t:-0}" -gt $(($2 * 1024)) ]
}
port=$((27800 + RANDOM % 190))

pattern_domain "$dir/demo.xml"
sed -i "s|<vcpu>|<memtune><hard_limit unit='MiB'>512</hard_limit></memtune><vcpu>|" "$dir/demo.xml"
out=$(v define "$dir/demo.xml") || fail "define: $out"
out=$(v start demo) || fail "start: $out"

muri="rdma://10.99.6.1:$port?fallback=tcp://127.0.0.1:$((port + 1))"
v migrate --live --bandwidth 2 demo "$duri" --migrateuri "$muri" >"$dir/migrate.out" 2>&1 &
migrating=$!
bulk_or_ended() { transferred_over state 8192 || ! kill -0 "$migrating" 2>/dev/null; }
wait_until 60 bulk_or_ended && kill -0 "$migrating" 2>/dev/null ||
    fail "the migration did not reach its bulk round: $(qmp state demo query-migrate); virsh: $(cat "$dir/migrate.out")"
ip link set dummy6 down || fail "could not take dummy6 down"
echo "ok: the fabric went down in the bulk round"
out=$(qmp state demo 'migrate-set-parameters {"max-bandwidth":0}') || fail "max-bandwidth: $out"  # the rest at full speed
wait "$migrating" || fail "virsh migrate with a tcp fallback: $(cat "$dir/migrate.out")"
echo "ok: virsh migrate --live --migrateuri $muri completed over the fallback"
expect "the source is shut off (migrated)" "$(v domstate demo --reason)" "shut off \(migrated\)"
expect "the destination runs it" "$(d domstate demo)" "^running"
guest_runs_clean "$build/bin/vmmctl" dstate
echo "ok: the guest runs on at the destination without errors"
expect "the destination's vmm listened on the fallback too" "$(cat "$dir/dstate/log/demo.log" 2>&1)" \
    "taken on tcp:127.0.0.1:$((port + 1)) too \(x-fallback-uri\)"
expect "the source's vmm resumed over it" "$(cat "$dir/state/log/demo.log" 2>&1)" \
    "precopy to .*127.0.0.1:$((port + 1)).* resumed"
