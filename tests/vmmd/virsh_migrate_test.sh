#!/usr/bin/env bash
# Stock virsh live-migrates a vmm domain between two vmmd on loopback over TCP (label libvirt):
# the client library drives Begin3/Prepare3/Perform3/Finish3/Confirm3 across both daemons, and
# with --p2p the source's vmmd drives them itself, as the destination's client (over TCP, and
# over a unix socket).
# Shown: migrate-setspeed and migrate-setmaxdowntime land in the vmm's own parameters; a paused
# guest arrives with the same RAM digest (query-ramhash on both vmm); domjobinfo --completed on
# both sides; --persistent and --undefinesource; domjobabort mid-migration and a destination vmm
# killed mid-migration both leave the source running and nothing behind on the destination; the
# RDMA hard-limit refusal.
#   virsh_migrate_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build"
tport=$((16600 + RANDOM % 400))
start_destination "$build" --listen-tcp "127.0.0.1:$tport" --listen-tcp-insecure
# What a --p2p source reaches the destination by: TCP here (a unix socket works too: below).
p2p_uri="vmm+tcp://127.0.0.1:$tport/system"
qmp() { domain_qmp "$build/bin/vmmctl" "$@"; }  # qmp STATE DOMAIN COMMAND
port=$((22400 + RANDOM % 400))
next_uri() { port=$((port + 1)); mig="$1://127.0.0.1:$port"; }  # sets mig
dest_vmms() { pgrep -f -- "--qmp unix:$dir/dstate/run/"; }
no_dest_vmm() { [ -z "$(dest_vmms)" ]; }

pattern_domain "$dir/demo.xml"
out=$(v define "$dir/demo.xml") || fail "define: $out"
out=$(v start demo) || fail "start: $out"

out=$(v migrate-setspeed demo 7) || fail "migrate-setspeed: $out"
out=$(v migrate-setmaxdowntime demo 250) || fail "migrate-setmaxdowntime: $out"
params=$(qmp state demo query-migrate-parameters) || fail "query-migrate-parameters: $params"
expect "migrate-setspeed reaches the vmm" "$params" '"max-bandwidth":"7340032"'
expect "migrate-setmaxdowntime reaches the vmm" "$params" '"downtime-limit":"250"'
expect "migrate-getspeed" "$(v migrate-getspeed demo)" "^7$"
expect "migrate-getmaxdowntime" "$(v migrate-getmaxdowntime demo)" "^250$"
out=$(v migrate-setspeed demo 1000) || fail "migrate-setspeed 1000: $out"

# A paused guest: its RAM cannot change, so the digests must match.
out=$(v suspend demo) || fail "suspend: $out"
before=$(qmp state demo query-ramhash) || fail "query-ramhash: $before"
next_uri tcp
out=$(v migrate --live --persistent demo "$duri" --migrateuri "$mig") || fail "migrate: $out"
echo "ok: virsh migrate --live --persistent"
expect "the source is shut off (migrated)" "$(v domstate demo --reason)" "shut off \(migrated\)"
expect "the destination keeps a paused guest paused" "$(d domstate demo --reason)" "paused"
after=$(qmp dstate demo query-ramhash) || fail "query-ramhash at the destination: $after"
[ "$before" = "$after" ] || fail "RAM digests differ: $before vs $after"
echo "ok: RAM digests equal ($after)"
expect "domjobinfo --completed on the source" "$(v domjobinfo demo --completed)" "Operation: +Outgoing migration"
jobd=$(d domjobinfo demo --completed)
expect "domjobinfo --completed on the destination" "$jobd" "Operation: +Incoming migration"
expect "with the memory it moved" "$jobd" "Memory total: +64.000 MiB"
expect "--persistent defines it at the destination" "$(d dominfo demo)" "Persistent: +yes"
out=$(d resume demo) || fail "resume at the destination: $out"

# Back, live, while it runs; the destination (now the source) forgets it. virsh event listens on
# both sides (registered once a redefinition reaches it) for the migration's lifecycle events
# and its job-completed event.
listen() {  # listen CONNECT-URI FILE
    stdbuf -oL virsh -c "$1" event --domain demo --all --loop --timeout 120 >"$2" 2>&1 &
    also_kill+=($!)
    wait_until 20 redefined "$1" "$2" || fail "virsh event never heard a definition: $(cat "$2")"
}
redefined() { virsh -c "$1" dumpxml demo >"$dir/redefine.xml" && virsh -c "$1" define "$dir/redefine.xml" >/dev/null &&
              grep -q "Defined Updated" "$2"; }
listen "$uri" "$dir/home-events"
listen "$duri" "$dir/away-events"
next_uri tcp
out=$(d migrate --live --persistent --undefinesource demo "$uri" --migrateuri "$mig") || fail "migrate back: $out"
heard() { grep -q "for domain 'demo': $2" "$1"; }
for e in "Started Migrated" "Resumed Migrated"; do
    wait_until 10 heard "$dir/home-events" "$e" || fail "virsh event on the destination missed '$e': $(cat "$dir/home-events")"
done
for e in "Suspended Migrated" "Stopped Migrated" "Undefined Removed"; do
    wait_until 10 heard "$dir/away-events" "$e" || fail "virsh event on the source missed '$e': $(cat "$dir/away-events")"
done
echo "ok: virsh event: Started/Resumed Migrated where it arrives, Suspended/Stopped Migrated and Undefined where it left"
# job-completed on both sides, with the job's statistics: operation 4 (incoming) where it arrived,
# 5 (outgoing) where it left.
job_heard() { grep -A3 "event 'job-completed' for domain '\?demo'\?" "$1" | grep -q "operation: $2"; }
wait_until 10 job_heard "$dir/home-events" 4 || fail "no job-completed where it arrived: $(cat "$dir/home-events")"
wait_until 10 job_heard "$dir/away-events" 5 || fail "no job-completed where it left: $(cat "$dir/away-events")"
expect "job-completed carries the job's statistics" "$(cat "$dir/home-events")" "memory_total: 67108864"
echo "ok: virsh event: job-completed on both sides"
expect "back home it runs" "$(v domstate demo --reason)" "running \(migrated\)"
out=$(d list --all --name)
grep -q demo <<<"$out" && fail "--undefinesource left the domain: $out"
echo "ok: --undefinesource"
[ -z "$(dest_vmms)" ] || fail "a vmm is left on the destination"

# --p2p: the source's vmmd is the destination's client; the same checks.
out=$(v suspend demo) || fail "suspend: $out"
before=$(qmp state demo query-ramhash) || fail "query-ramhash: $before"
next_uri tcp
out=$(v migrate --live --p2p --persistent demo "$p2p_uri" --migrateuri "$mig") || fail "migrate --p2p: $out"
echo "ok: virsh migrate --live --p2p --persistent"
expect "--p2p: the source is shut off (migrated)" "$(v domstate demo --reason)" "shut off \(migrated\)"
after=$(qmp dstate demo query-ramhash) || fail "query-ramhash at the destination: $after"
[ "$before" = "$after" ] || fail "--p2p: RAM digests differ: $before vs $after"
echo "ok: --p2p: RAM digests equal ($after)"
expect "--p2p: domjobinfo --completed on the source" "$(v domjobinfo demo --completed)" "Operation: +Outgoing migration"
expect "--p2p: domjobinfo --completed on the destination" "$(d domjobinfo demo --completed)" "Operation: +Incoming migration"
out=$(d resume demo) || fail "resume at the destination: $out"
# Back by --p2p to a unix socket URI: libvirt's client takes one without a host.
next_uri tcp
out=$(d migrate --live --p2p --undefinesource demo "$uri" --migrateuri "$mig") || fail "migrate back by --p2p to $uri: $out"
expect "back home after --p2p it runs" "$(v domstate demo --reason)" "running \(migrated\)"
[ -z "$(dest_vmms)" ] || fail "a vmm is left on the destination"

# A long call must not silence its connection: with a keepalive ping every second and two missed
# allowed, a migration of several seconds completes, and virsh --timeout suspends the domain on
# the connection its Perform3 holds (the source's job then finishes with the guest paused).
out=$(v migrate-setspeed demo 2) || fail "migrate-setspeed 2: $out"
next_uri tcp
out=$(virsh -k 1 -K 2 -c "$uri" migrate --live --timeout 1 demo "$duri" --migrateuri "$mig" 2>&1) ||
    fail "a migration longer than the keepalive timeout: $out"
expect "--timeout 1 with keepalive 1 s x 2: the migration completes and the guest runs at the destination" \
    "$(d domstate demo --reason)" "running \(migrated\)"
expect "it took longer than the keepalive allows" "$(v domjobinfo demo --completed)" "Time elapsed: +([3-9][0-9]{3}|[0-9]{5,}) +ms"
# Back with the rest of virsh's options: --parallel is vmm's multifd (the incoming vmm says how
# many lanes the RAM came over), --suspend leaves the guest paused where it arrives.
next_uri tcp
out=$(d migrate --live --undefinesource --parallel --parallel-connections 3 --auto-converge --bandwidth 500 \
      --abort-on-error --suspend demo "$uri" --migrateuri "$mig") || fail "migrate back with every option: $out"
expect "--parallel --parallel-connections 3 is multifd with 3 lanes" "$(cat "$dir/state/log/demo.log")" "RAM over 3 multifd lanes"
expect "--suspend leaves it paused at the destination" "$(v domstate demo)" "^paused"
out=$(v resume demo) || fail "resume: $out"
out=$(v migrate-setspeed demo 1000) || fail "migrate-setspeed: $out"

# domjobabort mid-migration, then a destination vmm killed mid-migration: the source runs on.
# Each ends the destination's domain as libvirt's does: Stopped Failed (an incoming migration
# that failed), not Crashed or Destroyed.
running_job() { v domjobinfo demo | grep -q "Unbounded"; }
stdbuf -oL virsh -c "$duri" event --all --loop --timeout 300 >"$dir/failed-events" 2>&1 &
also_kill+=($!)
n_failed=1
for how in abort kill p2p-abort; do
    out=$(v migrate-setspeed demo 1) || fail "migrate-setspeed 1: $out"
    # Slower still than virsh's least (1 MiB/s), straight to the vmm: the 16 MiB the pattern guest
    # wrote take a minute, so the job still runs when domjobabort comes, however slow virsh is
    # (in the nested VM a virsh call takes seconds).
    out=$(qmp state demo 'migrate-set-parameters {"max-bandwidth":262144}') || fail "max-bandwidth: $out"
    next_uri tcp
    if [ "$how" = p2p-abort ]; then
        v migrate --live --p2p demo "$p2p_uri" --migrateuri "$mig" >"$dir/migrate.out" 2>&1 &
    else
        v migrate --live demo "$duri" --migrateuri "$mig" >"$dir/migrate.out" 2>&1 &
    fi
    m=$!
    wait_until 30 running_job || fail "$how: no migration job appeared: $(cat "$dir/migrate.out")"
    # The time left as vmm predicts it, in libvirt's time_remaining (virsh prints it only for a
    # bounded job; a migration is unbounded, as under QEMU: read through libvirt-python).
    if [ "$how" = abort ]; then
        time_left() {
            /usr/bin/python3 - "$uri" <<'PY'
import sys, libvirt
stats = libvirt.open(sys.argv[1]).lookupByName("demo").jobStats()
sys.exit(0 if stats.get("time_remaining", 0) > 0 else 1)
PY
        }
        wait_until 40 time_left || fail "jobStats has no time_remaining: $(qmp state demo query-migrate)"
        echo "ok: jobStats carries the time remaining vmm predicts"
    fi
    # libvirt's client asks for change protection (vmmd offers it): the definition holds still.
    # Not before the kill: in the nested VM each virsh call takes seconds the slow job may not have.
    if [ "$how" != kill ]; then
        out=$(v desc demo --config --title during) && fail "$how: the definition changed during the migration: $out"
        expect "$how: a change during the migration is refused" "$out" "migrating with change protection"
        v dumpxml --inactive demo >"$dir/same.xml"
        out=$(v define "$dir/same.xml") && fail "$how: a define during the migration was taken: $out"
        expect "$how: a define during the migration is refused" "$out" "migrating with change protection"
    fi
    if [ "$how" != kill ]; then
        out=$(v domjobabort demo) || fail "domjobabort: $out (the job it missed: $(v domjobinfo demo --completed | tr -s ' \n' ' '))"
    else
        kill -KILL "$(dest_vmms)" || fail "no destination vmm to kill"
    fi
    wait "$m" && fail "$how: the migration succeeded: $(cat "$dir/migrate.out")"
    echo "ok: $how: virsh migrate failed: $(grep -m1 error "$dir/migrate.out")"
    expect "$how: the source runs on" "$(v domstate demo)" "^running"
    wait_until 10 no_dest_vmm || fail "$how: a vmm is left on the destination"
    expect "$how: nothing left on the destination" "$(d list --all --name | tr -d '[:space:]')" "^$"
    failed_stops() { [ "$(grep -c "Stopped Failed" "$dir/failed-events")" -ge "$1" ]; }
    wait_until 10 failed_stops "$n_failed" || fail "$how: the destination's domain did not stop as failed: $(cat "$dir/failed-events")"
    echo "ok: $how: the destination's domain stopped as failed, as libvirt's"
    n_failed=$((n_failed + 1))
done
grep -qE "Stopped (Crashed|Destroyed)" "$dir/failed-events" && fail "a failed incoming migration read as crashed or destroyed: $(cat "$dir/failed-events")"
out=$(v migrate-setspeed demo 1000) || fail "migrate-setspeed: $out"

next_uri rdma
out=$(v migrate --live --rdma-pin-all demo "$duri" --migrateuri "$mig") && fail "RDMA without a hard limit: $out"
expect "RDMA without <hard_limit> is refused as libvirt refuses it" "$out" "cannot start RDMA migration with no memory hard limit set"
expect "and the source runs on" "$(v domstate demo)" "^running"
