#!/usr/bin/env bash
# Stock virsh migrates a vmm domain between two vmmd over RDMA (label rdma: it needs an RDMA
# device, so scripts/test.sh runs it in the SoftRoCE nested VM): --rdma-pin-all to the
# destination, then back with dynamic registration, each from a paused guest whose RAM digest
# (query-ramhash on both vmm) must arrive unchanged. The domain has <memtune><hard_limit>, which
# libvirt's way of RDMA requires and which becomes both vmm processes' RLIMIT_MEMLOCK: a domain
# whose hard limit is below its RAM is refused --rdma-pin-all by the source's memlock preflight
# (and runs on), and migrates with dynamic registration, whose pinning stays under the limit.
#   virsh_rdma_test.sh BUILD_DIR
set -uo pipefail
build=$1
[ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] && [ -n "${VMM_RDMA_ADDR:-}" ] || {
    echo "SKIP: needs an RDMA device and its IPv4 address in VMM_RDMA_ADDR (scripts/test.sh runs this in the SoftRoCE nested VM)"
    exit 77
}
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build"
start_destination "$build"
ramhash() { domain_qmp "$build/bin/vmmctl" "$1" demo query-ramhash; }  # ramhash STATE: the demo domain's digest
memlock_of() {  # memlock_of STATE_DIR: the demo domain's vmm's locked-memory limit, in bytes
    local p
    p=$(pgrep -f -- "--qmp unix:$dir/$1/run/") || return 1
    awk '/Max locked memory/ {print $4}' "/proc/$p/limits"
}
port=$((23900 + RANDOM % 400))

cat >"$dir/demo.xml" <<'XML'
<domain type='vmm'>
  <name>demo</name>
  <memory unit='MiB'>64</memory>
  <memtune><hard_limit unit='MiB'>512</hard_limit></memtune>
  <vcpu>1</vcpu>
  <os><type>hvm</type><kernel>pattern</kernel></os>
</domain>
XML
out=$(v define "$dir/demo.xml") || fail "define: $out"
out=$(v start demo) || fail "start: $out"
out=$(v suspend demo) || fail "suspend: $out"  # a paused guest: its digest cannot change
expect "the source vmm's RLIMIT_MEMLOCK is the hard limit" "$(memlock_of state)" "^536870912$"

before=$(ramhash state) || fail "query-ramhash: $before"
port=$((port + 1))
out=$(v migrate --live --rdma-pin-all --persistent demo "$duri" --migrateuri "rdma://$VMM_RDMA_ADDR:$port") ||
    fail "migrate --rdma-pin-all: $out; destination: $(cat "$dir/dlog")"
echo "ok: virsh migrate --live --rdma-pin-all --migrateuri rdma://$VMM_RDMA_ADDR:$port"
expect "the destination vmm's RLIMIT_MEMLOCK is the hard limit" "$(memlock_of dstate)" "^536870912$"
# Told rdma-pin-all before it listened (libvirt sets it at both ends), the destination vmm
# pinned its RAM while it waited for the source, not inside the migration's setup.
expect "the destination vmm pinned its RAM while it waited" "$(cat "$dir/dstate/log/demo.log" 2>&1)" \
    "rdma-pin-all: this side's RAM was pinned while it waited for the source"
after=$(ramhash dstate) || fail "query-ramhash at the destination: $after"
[ "$before" = "$after" ] || fail "--rdma-pin-all: RAM digests differ: $before vs $after"
echo "ok: --rdma-pin-all: RAM digests equal ($after)"
expect "the source is shut off (migrated)" "$(v domstate demo --reason)" "shut off \(migrated\)"
job=$(d domjobinfo demo --completed)
expect "domjobinfo --completed at the destination" "$job" "Memory total: +64.000 MiB"
grep -E "Time elapsed|Memory bandwidth|Total downtime" <<<"$job" | sed 's/^/    pin-all: /'

# Back with dynamic registration: chunks registered as they are written.
port=$((port + 1))
out=$(d migrate --live --undefinesource demo "$uri" --migrateuri "rdma://$VMM_RDMA_ADDR:$port") ||
    fail "migrate back (dynamic registration): $out"
echo "ok: virsh migrate --live --migrateuri rdma://$VMM_RDMA_ADDR:$port (dynamic registration)"
back=$(ramhash state) || fail "query-ramhash back home: $back"
[ "$before" = "$back" ] || fail "dynamic registration: RAM digests differ: $before vs $back"
echo "ok: dynamic registration: RAM digests equal ($back)"
job=$(v domjobinfo demo --completed)
expect "domjobinfo --completed back home" "$job" "Operation: +Incoming migration"
grep -E "Time elapsed|Memory bandwidth|Total downtime" <<<"$job" | sed 's/^/    dynamic: /'
out=$(v destroy demo) || fail "destroy: $out"

# A hard limit below the RAM: pin-all cannot be, dynamic registration can.
sed -e 's/>demo</>tight</' -e 's/>512</>40</' "$dir/demo.xml" >"$dir/tight.xml"
out=$(v define "$dir/tight.xml") || fail "define tight: $out"
out=$(v start tight) || fail "start tight: $out"
port=$((port + 1))
out=$(v migrate --live --rdma-pin-all tight "$duri" --migrateuri "rdma://$VMM_RDMA_ADDR:$port") &&
    fail "--rdma-pin-all of 64 MiB under a 40 MiB hard limit succeeded: $out"
expect "--rdma-pin-all over the hard limit is refused by the memlock preflight" "$out" "locked-memory limit is"
expect "and the source runs on" "$(v domstate tight)" "^running"
port=$((port + 1))
out=$(v migrate --live tight "$duri" --migrateuri "rdma://$VMM_RDMA_ADDR:$port") ||
    fail "dynamic registration under a 40 MiB hard limit: $out"
expect "dynamic registration stays under the hard limit" "$(d domstate tight)" "^running"
