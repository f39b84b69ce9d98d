#!/usr/bin/env bash
# Stock virsh migrates a vmm domain in postcopy between two vmmd on loopback (label libvirt):
# 'virsh migrate --postcopy' starts a precopy that cannot converge under its bandwidth cap,
# 'virsh migrate-postcopy' switches it, and the guest runs on at the destination while its
# missing pages arrive, as with libvirt's QEMU driver: Perform ends at the switch, Finish runs
# the guest (running, post-copy), Confirm waits for the last page.
# Then back with --postcopy-after-precopy and --parallel: virsh switches on vmmd's
# migration-iteration event, after a first pass over multifd lanes.
# Shown: --postcopy sets postcopy-ram on both vmm; --postcopy-bandwidth and migrate-setspeed
# --postcopy reach max-postcopy-bandwidth; migrate-postcopy without a job, or on a migration
# started without --postcopy, is refused; the destination's vmm pulled pages after the switch
# and its guest keeps running without errors; the source ends shut off (migrated), and its
# 'domjobinfo --completed' counts the postcopy's page requests; both vmmd send job-completed.
#   virsh_postcopy_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build"
start_destination "$build"
qmp() { domain_qmp "$build/bin/vmmctl" "$@"; }  # qmp STATE DOMAIN COMMAND
port=$((22900 + RANDOM % 400))
migrating() { qmp "$1" demo query-migrate 2>/dev/null | grep -q '"status":"active"'; }  # migrating STATE

stress_domain "$dir/demo.xml"
out=$(v define "$dir/demo.xml") || fail "define: $out"
out=$(v start demo) || fail "start: $out"
# Precopy must not converge before the switch: where the guest runs emulated (the nested VM) it
# dirties too little to stop it, so there no pause is short enough (1 ms).
if [ -n "${VMM_NESTED_TCG:-}" ]; then out=$(v migrate-setmaxdowntime demo 1) || fail "migrate-setmaxdowntime: $out"; fi
expect "migrate-postcopy without a migration is refused" "$(v migrate-postcopy demo)" "no job is active"
out=$(v migrate-setspeed demo --postcopy 3) || fail "migrate-setspeed --postcopy: $out"
expect "migrate-setspeed --postcopy reaches the vmm" "$(qmp state demo query-migrate-parameters)" '"max-postcopy-bandwidth":"3145728"'
expect "migrate-getspeed --postcopy" "$(v migrate-getspeed demo --postcopy)" "^3$"

# Both vmmd announce the job's end (virsh event --event job-completed): the source at Confirm,
# the destination once the last page has arrived.
v event demo --event job-completed --loop --timeout 120 >"$dir/src-job.out" 2>&1 &
src_job=$!
d event --event job-completed --loop --timeout 120 >"$dir/dst-job.out" 2>&1 &
dst_job=$!
# 8 MiB/s against a guest rewriting 32 MiB: precopy alone would go on for ever.
v migrate --live --postcopy --postcopy-bandwidth 2 --bandwidth 8 demo "$duri" --migrateuri "tcp://127.0.0.1:$port" \
    >"$dir/migrate.out" 2>&1 &
migrating=$!
wait_until 60 migrating state || fail "the migration did not start"
caps=$(qmp dstate demo query-migrate-capabilities)
expect "--postcopy turns postcopy-ram on at the destination" "$caps" '"capability":"postcopy-ram","state":true'
expect "and at the source" "$(qmp state demo query-migrate-capabilities)" '"capability":"postcopy-ram","state":true'
expect "--postcopy-bandwidth reaches the vmm" "$(qmp state demo query-migrate-parameters)" '"max-postcopy-bandwidth":"2097152"'
past_bulk_round() { [ "$(sed -n 's/.*"x-rounds":\([0-9]*\).*/\1/p' <<<"$(qmp state demo query-migrate)")" -ge 2 ] 2>/dev/null; }
wait_until 60 past_bulk_round || fail "precopy did not get past its bulk round"  # then it switches
out=$(v migrate-postcopy demo) || fail "migrate-postcopy: $out"
echo "ok: virsh migrate-postcopy"
wait "$migrating" || fail "virsh migrate --postcopy: $(cat "$dir/migrate.out")"
echo "ok: virsh migrate --postcopy returned"
expect "the source is shut off (migrated)" "$(v domstate demo --reason)" "shut off \(migrated\)"
expect "domjobinfo --completed counts the pages the guest asked for" "$(v domjobinfo demo --completed)" \
    "Postcopy requests: +[1-9]"
announced() { grep -q "memory_postcopy_requests: [1-9]" "$1"; }  # announced FILE: a postcopy's job-completed event
wait_until 30 announced "$dir/src-job.out" || fail "the source's job-completed event: $(cat "$dir/src-job.out")"
echo "ok: the source announced the job's end, with its postcopy requests"
wait_until 30 announced "$dir/dst-job.out" || fail "the destination's job-completed event: $(cat "$dir/dst-job.out")"
expect "the destination's is its incoming job" "$(cat "$dir/dst-job.out")" "operation: 4"  # VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN
echo "ok: the destination announced it once the last page arrived"
kill "$src_job" "$dst_job" 2>/dev/null
expect "the destination runs the guest" "$(d domstate demo --reason)" "running"
q=$(qmp dstate demo query-migrate)
expect "the destination's migration completed" "$q" '"status":"completed"'
missing=$(sed -n 's/.*"missing-pages":\([0-9]*\).*/\1/p' <<<"$q")
[ "${missing:-0}" -gt 0 ] || fail "no page was missing at the switch: $q"
echo "ok: $missing pages were missing at the switch and arrived after it"
guest_runs_clean "$build/bin/vmmctl" dstate
echo "ok: the guest runs on at the destination without errors"

# Back without --postcopy: migrate-postcopy is refused with libvirt's own words.
out=$(d migrate-setspeed demo 1) || fail "migrate-setspeed: $out"
d migrate --live demo "$uri" --migrateuri "tcp://127.0.0.1:$((port + 1))" >"$dir/back.out" 2>&1 &
back=$!
wait_until 60 migrating dstate || fail "the migration back did not start"
expect "migrate-postcopy on a migration without --postcopy is refused" "$(d migrate-postcopy demo)" \
    "requires migration to be started with VIR_MIGRATE_POSTCOPY"
out=$(d domjobabort demo) || fail "domjobabort: $out"
wait "$back" && fail "the aborted migration back succeeded"
expect "the aborted migration leaves the guest running where it is" "$(d domstate demo)" "running"

# Back again with --postcopy-after-precopy: virsh itself switches once the first pass has ended,
# on vmmd's migration-iteration events (precopy alone would never end at 8 MiB/s); 'virsh event'
# hears them too (it registers in well under the seconds the first pass takes at 8 MiB/s).
d event demo --event migration-iteration --loop --timeout 200 >"$dir/events.out" 2>&1 &
events=$!
# The source's vmm asked directly while it migrates: its domain goes at the end, and a virsh call
# per question (seconds each under TCG) once found it gone before the second question.
back_uuid=$(virsh -c "$duri" domuuid demo) || fail "virsh domuuid demo"
back_qmp() { "$build/bin/vmmctl" --qmp "unix:$dir/dstate/run/$back_uuid.qmp" "$1"; }
back_migrating() { back_qmp query-migrate 2>/dev/null | grep -q '"status":"active"'; }
# With --parallel too (QEMU 10.1's multifd with postcopy, as Nova and KubeVirt now ask): the
# first pass goes over the lanes, postcopy over the main connection after the switch.
timeout 240 virsh -c "$duri" migrate --live --postcopy --postcopy-after-precopy --postcopy-bandwidth 2 --bandwidth 8 \
    --parallel --parallel-connections 2 demo "$uri" --migrateuri "tcp://127.0.0.1:$((port + 2))" >"$dir/after.out" 2>&1 &
after=$!
wait_until 60 back_migrating || fail "the migration back with --parallel --postcopy did not start"
expect "--parallel turns multifd on beside postcopy-ram" "$(back_qmp query-migrate-capabilities)" \
    '"capability":"multifd","state":true'
expect "with two lanes" "$(back_qmp query-migrate-parameters)" '"multifd-channels":"2"'
wait "$after" || fail "virsh migrate --parallel --postcopy-after-precopy: $(cat "$dir/after.out")"
echo "ok: virsh migrate --parallel --postcopy --postcopy-after-precopy returned"
kill "$events" 2>/dev/null
cat "$dir/events.out"
expect "virsh event heard the first pass end" "$(cat "$dir/events.out")" "migration-iteration' for domain '?demo'?: iteration: '?2"
expect "the guest left, and its transient domain with it" "$(d domstate demo)" "failed to get domain"
expect "and runs back where it started" "$(v domstate demo)" "running"
q=$(qmp state demo query-migrate)
missing=$(sed -n 's/.*"missing-pages":\([0-9]*\).*/\1/p' <<<"$q")
[ "${missing:-0}" -gt 0 ] || fail "nothing was missing at the switch: virsh did not switch to postcopy: $q"
echo "ok: virsh switched to postcopy after the first pass; $missing pages came after it"
echo "PASS"
