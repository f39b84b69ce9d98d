#!/usr/bin/env bash
# Stock virsh pauses a vmm domain's postcopy and resumes it, as with libvirt's QEMU driver
# (label libvirt): 'virsh domjobabort --postcopy' on the source cuts the link in postcopy (vmm's
# migrate_pause); both vmmd then keep the job, the source "paused (post-copy failed)" and the
# destination "running (post-copy failed)", and 'virsh migrate --postcopy --postcopy-resume'
# runs the five steps on it again (migrate_recover at the destination, migrate -r at the
# source) until the last page has arrived. The first resume goes with --p2p (the source's vmmd
# drives the steps) and is paused again; the second goes from virsh and completes.
# Shown: domjobabort --postcopy is refused where no outgoing postcopy runs; the paused source
# refuses 'virsh resume' (it would fork the guest) and a fresh migration; the destination's
# state and lifecycle event say the failure; after the resume the source ends shut off
# (migrated) and the guest runs on at the destination without errors.
#   virsh_postcopy_recover_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build"
tport=$((16200 + RANDOM % 400))
start_destination "$build" --listen-tcp "127.0.0.1:$tport" --listen-tcp-insecure
p2p_uri="vmm+tcp://127.0.0.1:$tport/system"  # libvirt wants a host in a --p2p destination's URI
qmp() { domain_qmp "$build/bin/vmmctl" "$@"; }  # qmp STATE DOMAIN COMMAND
port=$((23400 + RANDOM % 400))
status_is() { qmp "$1" demo query-migrate 2>/dev/null | grep -q "\"status\":\"$2\""; }  # status_is STATE STATUS

# The guest rewrites 96 MiB (not stress_domain's 32): what is left to move after a pause must
# outlast a virsh call, and the pause can land late (CI, loaded: 6,600 of 8,192 pages had come
# over before it did, and the resumed postcopy then ended before anything could pause it again).
demo_domain "$dir/demo.xml" 128 stress bytes=96M
out=$(v define "$dir/demo.xml") || fail "define: $out"
out=$(v start demo) || fail "start: $out"
# Precopy must not converge before the switch: where the guest runs emulated (the nested VM) it
# dirties too little to stop it, so there no pause is short enough (1 ms).
if [ -n "${VMM_NESTED_TCG:-}" ]; then out=$(v migrate-setmaxdowntime demo 1) || fail "migrate-setmaxdowntime: $out"; fi
# No readahead (vmm's own x-postcopy-readahead): the guest's faults
# in order would bring its pages faster than the cap, and the postcopy could end before it is paused.
out=$(qmp state demo 'migrate-set-parameters {"x-postcopy-readahead":0}') || fail "x-postcopy-readahead: $out"
expect "domjobabort --postcopy without a migration is refused" "$(v domjobabort --postcopy demo)" "not outgoing migration in post-copy"

# Postcopy at 1 MiB/s: the 96 MiB the guest keeps rewriting take a minute and a half to follow
# (a bulk round at 24 MiB/s takes 4 s). In the nested VM the guest rewrites little, so there the
# switch comes early in a slow bulk round: what it had not sent yet follows after the switch instead.
bulk_bw=24
past_bulk_round() { [ "$(sed -n 's/.*"x-rounds":\([0-9]*\).*/\1/p' <<<"$(qmp state demo query-migrate)")" -ge 2 ] 2>/dev/null; }
[ -z "${VMM_NESTED_TCG:-}" ] || { bulk_bw=1; past_bulk_round() { true; }; }
v migrate --live --postcopy --postcopy-bandwidth 1 --bandwidth "$bulk_bw" demo "$duri" --migrateuri "tcp://127.0.0.1:$port" \
    >"$dir/migrate.out" 2>&1 &
migrating=$!
wait_until 60 status_is state active || fail "the migration did not start"
expect "domjobabort --postcopy before the switch is refused" "$(v domjobabort --postcopy demo)" "not outgoing migration in post-copy"
wait_until 60 past_bulk_round || fail "precopy did not get past its bulk round"  # the guest's 96 MiB are written
d event demo --event lifecycle --loop --timeout 120 >"$dir/events.out" 2>&1 &
events=$!
# Its callback registered before the switch: the pause below comes within a second of it.
wait_until 30 grep -q "registered event callback" "$dir/dlog" || fail "virsh event did not register on the destination"
out=$(v migrate-postcopy demo) || fail "migrate-postcopy: $out"
# The pause comes as soon as the source has switched: the guest faulting its pages in at the
# destination ends a postcopy in about a second here (every page it rewrites is asked for and
# answered at once, whatever the push's cap). So domjobabort --postcopy itself is what polls: it
# is refused until the switch (shown above) and succeeds from the first moment of postcopy-active;
# a QMP poll first and then the call lost this race (CI, loaded, and two tests beside it).
pause_it() { out=$(v domjobabort --postcopy demo); }
wait_until 60 pause_it || fail "domjobabort --postcopy: $out ($(qmp state demo query-migrate))"
echo "ok: virsh domjobabort --postcopy"
expect "domjobabort --postcopy on the destination is refused" "$(d domjobabort --postcopy demo)" "not outgoing migration"
wait "$migrating"
echo "virsh migrate after the pause: $(cat "$dir/migrate.out")"
wait_until 30 status_is state postcopy-paused || fail "the source did not pause: $(qmp state demo query-migrate)"
wait_until 30 status_is dstate postcopy-paused || fail "the destination did not pause: $(qmp dstate demo query-migrate)"
failed_here() { [[ "$($1 domstate demo --reason)" =~ $2 ]]; }  # failed_here v|d PATTERN
wait_until 30 failed_here v "paused \(post-copy failed\)" || fail "source state: $(v domstate demo --reason)"
echo "ok: the source is paused (post-copy failed)"
wait_until 30 failed_here d "running \(post-copy failed\)" || fail "destination state: $(d domstate demo --reason)"
echo "ok: the destination is running (post-copy failed)"
# ... and its vmm runs the guest, as vmmd says: a link cut before Finish sent 'cont' once left
# the -S destination stopped under a "running" domain (the guest then never stepped again).
expect "the destination's vmm runs the guest" "$(qmp dstate demo query-status)" '"running":true'
expect "the paused source refuses to run its copy" "$(v resume demo)" "fork"
expect "a fresh migration of the split guest is refused" \
    "$(v migrate --live demo "$duri" --migrateuri "tcp://127.0.0.1:$((port + 1))")" "postcopy-resume"
if /usr/bin/python3 -c 'import libvirt' 2>/dev/null; then  # virsh itself insists on --postcopy
    out=$(timeout 60 /usr/bin/python3 - "$uri" "$duri" "tcp://127.0.0.1:$((port + 1))" <<'PY' 2>&1
import sys, libvirt
src, dst = libvirt.open(sys.argv[1]), libvirt.open(sys.argv[2])
try:
    src.lookupByName("demo").migrate3(dst, {libvirt.VIR_MIGRATE_PARAM_URI: sys.argv[3]},
                                      libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_POSTCOPY_RESUME)
    print("resumed without VIR_MIGRATE_POSTCOPY")
except libvirt.libvirtError as e:
    print(e)
PY
)
    expect "libvirt-python: VIR_MIGRATE_POSTCOPY_RESUME needs VIR_MIGRATE_POSTCOPY" "$out" "requires post-copy"
fi

# A recovery with --p2p, as slow as before, and paused again: the source's vmmd drives it, and
# both sides end as after the first pause.
v migrate --live --p2p --postcopy --postcopy-resume --postcopy-bandwidth 1 demo "$p2p_uri" \
    --migrateuri "tcp://127.0.0.1:$((port + 2))" >"$dir/migrate.out" 2>&1 &
migrating=$!
# domjobabort --postcopy polls again (it succeeds only on a postcopy-active source, so its success
# says the resume started): the guest faults what is left in at once.
wait_until 60 pause_it || fail "--p2p: the resume was not paused: $out; source vmm: $(qmp state demo query-migrate 2>&1); virsh: $(cat "$dir/migrate.out")"
echo "ok: virsh migrate --p2p --postcopy --postcopy-resume resumed it, and domjobabort --postcopy paused it"
wait "$migrating"
echo "virsh migrate --p2p after the second pause: $(cat "$dir/migrate.out")"
wait_until 30 status_is state postcopy-paused || fail "the source did not pause again: $(qmp state demo query-migrate)"
wait_until 30 status_is dstate postcopy-paused || fail "the destination did not pause again: $(qmp dstate demo query-migrate)"
wait_until 30 failed_here v "paused \(post-copy failed\)" || fail "source state after the second pause: $(v domstate demo --reason)"
wait_until 30 failed_here d "running \(post-copy failed\)" || fail "destination state after the second pause: $(d domstate demo --reason)"
echo "ok: paused again: the source paused, the destination running (post-copy failed)"

# The recovery, faster than before.
out=$(timeout 240 virsh -c "$uri" migrate --live --postcopy --postcopy-resume --postcopy-bandwidth 64 demo "$duri" \
    --migrateuri "tcp://127.0.0.1:$((port + 3))" 2>&1) || fail "virsh migrate --postcopy-resume: $out"
echo "ok: virsh migrate --postcopy --postcopy-resume returned"
kill "$events" 2>/dev/null
cat "$dir/events.out"
expect "the destination announced the failure" "$(cat "$dir/events.out")" "[Rr]esumed [Pp]ost-copy [Ee]rror|[Rr]esumed.*[Ff]ailed"
expect "the source is shut off (migrated)" "$(v domstate demo --reason)" "shut off \(migrated\)"
expect "the destination runs the guest" "$(d domstate demo --reason)" "^running"
q=$(qmp dstate demo query-migrate)
expect "the destination's migration completed" "$q" '"status":"completed"'
guest_runs_clean "$build/bin/vmmctl" dstate
echo "ok: the guest runs on at the destination without errors"
echo "PASS"
