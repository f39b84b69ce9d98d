#!/usr/bin/env bash
# Stock virsh migrates a vmm domain with --tls between two vmmd on loopback (label libvirt, kvm):
# both started with --migrate-tls-dir (a test PKI in QEMU's layout, libvirt's
# migrate_tls_x509_cert_dir), every connection of the migration is TLS with both vmm
# authenticated, and a paused guest arrives with the same RAM digest. A destination vmmd without
# the credentials refuses --tls by name, and the guest stays where it was.
#   virsh_migrate_tls_test.sh BUILD_DIR
set -uo pipefail
build=$1
command -v certtool >/dev/null || { echo "SKIP: needs certtool (apt-get install gnutls-bin)"; exit 77; }
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
src=$(cd "$(dirname "$0")/../.." && pwd)
"$src/scripts/make-test-pki.sh" "$dir/pki" >/dev/null || fail "make-test-pki.sh"
"$build/bin/vmmd" --socket "$sock" --state-dir "$dir/state" --migrate-tls-dir "$dir/pki" >>"$dir/log" 2>&1 &
pid=$!
wait_until 60 answers "$uri" || fail "vmmd did not listen within 60 s"
start_destination "$build" --migrate-tls-dir "$dir/pki"
qmp() { domain_qmp "$build/bin/vmmctl" "$@"; }  # qmp STATE DOMAIN COMMAND
port=$((25400 + RANDOM % 400))  # this test's range (lib.sh lists the others)

pattern_domain "$dir/demo.xml"
out=$(v define "$dir/demo.xml") || fail "define: $out"
out=$(v start demo) || fail "start: $out"

# A destination without credentials refuses --tls by name; the guest runs on at the source.
"$build/bin/vmmd" --socket "$dir/esock" --state-dir "$dir/estate" >>"$dir/elog" 2>&1 &
also_kill+=($!)
euri="vmm+unix:///system?socket=$dir/esock"
wait_until 60 answers "$euri" || fail "the third vmmd did not listen"
out=$(v migrate --live --tls demo "$euri" --migrateuri "tcp://127.0.0.1:$port" 2>&1) && fail "--tls to a vmmd without credentials: $out"
expect "--tls refused by a destination without --migrate-tls-dir" "$out" "--migrate-tls-dir"
expect "the guest stays at the source" "$(v domstate demo)" "running"

out=$(v suspend demo) || fail "suspend: $out"
before=$(qmp state demo query-ramhash) || fail "query-ramhash: $before"
out=$(v migrate --live --tls demo "$duri" --migrateuri "tcp://127.0.0.1:$((port + 1))") || fail "migrate --tls: $out"
echo "ok: virsh migrate --live --tls"
after=$(qmp dstate demo query-ramhash) || fail "query-ramhash at the destination: $after"
[ "$before" = "$after" ] || fail "RAM digests differ: $before vs $after"
echo "ok: RAM digests equal ($after)"
expect "the destination vmm took it over TLS" "$(cat "$dir"/dstate/log/*.log)" "incoming migration from the migration source over TLS 1.3"
expect "the source vmm sent it over TLS" "$(cat "$dir"/state/log/*.log)" "migrating to destination tcp:127.0.0.1:$((port + 1)) over TLS 1.3"

# --p2p --tls: the destination's vmmd drives it now and reaches a third one as its client over
# libvirt's TLS (vmm+tls://, libvirt's client certificates in pkipath), and the migration's own
# connections are TLS too; the guest arrives with the same RAM.
out=$(d resume demo) || fail "resume at the destination: $out"
"$build/bin/vmmd" --socket "$dir/tsock" --state-dir "$dir/tstate" --migrate-tls-dir "$dir/pki" \
    --listen-tls "127.0.0.1:$((port + 2))" --pki-dir "$dir/pki" >>"$dir/tlog" 2>&1 &
also_kill+=($!)
turi="vmm+unix:///system?socket=$dir/tsock"
wait_until 60 answers "$turi" || fail "the third vmmd did not listen"
out=$(d suspend demo) || fail "suspend at the destination: $out"
before=$(qmp dstate demo query-ramhash) || fail "query-ramhash: $before"
out=$(d migrate --live --p2p --tls demo "vmm+tls://127.0.0.1:$((port + 2))/system?pkipath=$dir/pki" \
      --migrateuri "tcp://127.0.0.1:$((port + 3))" 2>&1) || fail "migrate --p2p --tls: $out"
echo "ok: virsh migrate --live --p2p --tls over vmm+tls://"
after=$(qmp tstate demo query-ramhash) || fail "query-ramhash at the third host: $after"
[ "$before" = "$after" ] || fail "--p2p --tls: RAM digests differ: $before vs $after"
expect "--p2p --tls: the migration's connection was TLS" "$(cat "$dir"/tstate/log/*.log)" "over TLS 1.3"
echo "PASS"
