#!/usr/bin/env bash
# Save and restore through stock virsh and libvirt-python (label libvirt): virsh save leaves the
# domain "shut off (saved)" and a file (nothing else) where asked, save-image-dumpxml reads its
# definition, restore brings the guest back with the RAM it had (digests compared) and the
# pattern guest's own check clean, --paused / --running override how it was; managedsave, its
# image listed and kept through a refused undefine, restored by start and then gone;
# managedsave-remove and start --force-boot boot afresh; a transient domain saved disappears and
# comes back by restore; a damaged image is refused in one line with no domain left running; the
# lifecycle events say Saved and Restored; domjobinfo shows a save and domjobabort cancels it.
#   virsh_save_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build"
qmp() { domain_qmp "$build/bin/vmmctl" state demo "$1"; }
state_is() { [ "$(v domstate demo --reason 2>&1 | head -1)" = "$1" ]; }
no_stray_files() { [ -z "$(find "$dir" -maxdepth 1 -name '.*.vmmd-*' -o -maxdepth 1 -name '.*partial*')" ]; }

pattern_domain "$dir/demo.xml"
out=$(v define "$dir/demo.xml") || fail "define: $out"
stdbuf -oL virsh -c "$uri" event --domain demo --event lifecycle --loop --timeout 300 >"$dir/events" 2>&1 &
# Started only once vmmd has the listener's callback: a start before it is an event nobody hears.
wait_until 20 grep -q "registered event callback" "$dir/log" || fail "virsh event did not register: $(cat "$dir/events")"
out=$(v start demo) || fail "start: $out"
wait_until 30 grep -q "Started Booted" "$dir/events" || fail "virsh event heard no start: $(cat "$dir/events")"

# A paused guest saved and restored: the same RAM, still paused (as it was), then it runs clean.
out=$(v suspend demo) || fail "suspend: $out"
before=$(qmp query-ramhash)
out=$(v save demo "$dir/demo.save") || fail "save: $out"
expect "save says so" "$out" "Domain 'demo' saved to $dir/demo.save"
expect "the domain is shut off (saved)" "$(v domstate demo --reason)" "shut off \(saved\)"
no_stray_files || fail "a save left files beside its target: $(ls -a "$dir")"
expect "save-image-dumpxml reads the definition" "$(v save-image-dumpxml "$dir/demo.save")" "<name>demo</name>"
out=$(v restore "$dir/demo.save") || fail "restore: $out"
expect "restored as it was saved: paused" "$(v domstate demo --reason)" "paused"
[ "$(qmp query-ramhash)" = "$before" ] || fail "the restored RAM differs from the saved guest's: $(qmp query-ramhash) vs $before"
echo "ok: the restored guest's RAM equals the saver's at its pause"
out=$(v resume demo) || fail "resume: $out"
guest_runs_clean "$build/bin/vmmctl" state

# Running, saved with --paused: restored paused; saved running: restored running (restored).
out=$(v save demo "$dir/demo.save" --paused) || fail "save --paused: $out"
out=$(v restore "$dir/demo.save") || fail "restore: $out"
expect "--paused at the save keeps it paused at the restore" "$(v domstate demo --reason)" "paused"
out=$(v restore "$dir/demo.save") && fail "a second restore of an active domain was accepted: $out"
expect "restoring an active domain is refused" "$out" "already active"
out=$(v save demo "$dir/demo.save") || fail "save: $out"
out=$(v restore "$dir/demo.save" --running) || fail "restore --running: $out"
expect "--running at the restore runs it" "$(v domstate demo --reason)" "running \(restored\)"
guest_runs_clean "$build/bin/vmmctl" state

# Managed save: listed, kept through a refused undefine, restored by start, then gone.
out=$(v managedsave demo) || fail "managedsave: $out"
expect "dominfo says so" "$(v dominfo demo)" "Managed save: +yes"
expect "list --with-managed-save shows it" "$(v list --all --with-managed-save)" "demo"
[ -z "$(v list --all --without-managed-save | grep demo)" ] || fail "list --without-managed-save shows demo"
out=$(v undefine demo) && fail "undefine with a managed save image was accepted: $out"
expect "undefine is refused while the image is there" "$out" "managed save image exists"
out=$(v start demo) || fail "start of a managed-saved domain: $out"
expect "start restores it" "$(v domstate demo --reason)" "running \(restored\)"
expect "the image has served" "$(v dominfo demo)" "Managed save: +no"
guest_runs_clean "$build/bin/vmmctl" state
out=$(v managedsave demo) || fail "managedsave: $out"
out=$(v managedsave-remove demo) || fail "managedsave-remove: $out"
out=$(v start demo) || fail "start after managedsave-remove: $out"
expect "without its image the domain boots" "$(v domstate demo --reason)" "running \(booted\)"
out=$(v managedsave demo) || fail "managedsave: $out"
out=$(v start demo --force-boot) || fail "start --force-boot: $out"
expect "--force-boot boots and drops the image" "$(v domstate demo --reason)" "running \(booted\)"
expect "no image after --force-boot" "$(v dominfo demo)" "Managed save: +no"

# A save is the domain's job: domjobinfo shows it, domjobabort cancels it; the guest runs on, no file.
# The guest first fills its 16 MiB (steps come after): a save at 1 MiB/s then takes seconds. Of a
# guest just booted it took less than one poll of domjobinfo on a loaded CI (dce253e).
guest_runs_clean "$build/bin/vmmctl" state
out=$(v migrate-setspeed demo 1) || fail "migrate-setspeed: $out"
v save demo "$dir/slow.save" >"$dir/save.out" 2>&1 &
spid=$!
saving() { v domjobinfo demo | grep -q "Operation: *Save"; }
wait_until 30 saving || fail "domjobinfo never showed the save: $(v domjobinfo demo)"
out=$(v domjobabort demo) || fail "domjobabort: $out"
wait "$spid" && fail "an aborted save succeeded: $(cat "$dir/save.out")"
expect "the aborted save says so" "$(cat "$dir/save.out")" "aborted"
wait_until 10 state_is "running (unpaused)" || fail "after an aborted save the domain is $(v domstate demo --reason)"
[ ! -e "$dir/slow.save" ] || fail "an aborted save left its file"
no_stray_files || fail "an aborted save left files: $(ls -a "$dir")"
out=$(v migrate-setspeed demo 0) || fail "migrate-setspeed: $out"
guest_runs_clean "$build/bin/vmmctl" state

expected_events="Stopped Saved|Started Restored"
wait_until 20 grep -qE "$expected_events" "$dir/events" || fail "events: $(cat "$dir/events")"
expect "virsh event heard the save" "$(cat "$dir/events")" "Stopped Saved"
expect "virsh event heard the restore" "$(cat "$dir/events")" "Started Restored"

# A damaged image (one byte of a page flipped): refused in one line, nothing left running.
out=$(v save demo "$dir/demo.save") || fail "save: $out"
cp "$dir/demo.save" "$dir/bad.save"
printf '\xff' | dd of="$dir/bad.save" bs=1 seek=$((4096 + 8192 + 4096 * 300 + 5)) conv=notrunc status=none
out=$(v restore "$dir/bad.save") && fail "a damaged image was restored: $out"
expect "a damaged image is refused naming the page" "$out" "contents do not match the sum saved with it"
expect "and nothing runs" "$(v domstate demo --reason)" "shut off"
truncate -s 100000 "$dir/bad.save"
out=$(v restore "$dir/bad.save") && fail "a truncated image was restored: $out"
expect "a truncated image is refused" "$out" "truncated"
out=$(v restore "$dir/demo.save") || fail "the good image after the bad ones: $out"

# A transient domain: saved, it is gone; restored, it is back (still transient).
out=$(v destroy demo) || fail "destroy: $out"
sed 's/<name>demo</<name>brief</' "$dir/demo.xml" >"$dir/brief.xml"
out=$(v create "$dir/brief.xml") || fail "create: $out"
out=$(v save brief "$dir/brief.save") || fail "save of a transient domain: $out"
[ -z "$(v list --all | grep brief)" ] || fail "a saved transient domain is still listed: $(v list --all)"
out=$(v restore "$dir/brief.save") || fail "restore of a transient domain: $out"
expect "the transient domain is back, running" "$(v domstate brief --reason)" "running \(restored\)"
expect "and still transient" "$(v dominfo brief)" "Persistent: +no"
out=$(v destroy brief) || fail "destroy: $out"

if /usr/bin/python3 -c 'import libvirt' 2>/dev/null; then
    out=$(v start demo) || fail "start: $out"
    out=$(timeout 120 /usr/bin/python3 - "$uri" "$dir/py.save" <<'PY' 2>&1
import sys, libvirt
c = libvirt.open(sys.argv[1])
d = c.lookupByName("demo")
d.save(sys.argv[2])
assert d.state() == [libvirt.VIR_DOMAIN_SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_SAVED], d.state()
c.restore(sys.argv[2])
d = c.lookupByName("demo")
assert d.state() == [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_RESTORED], d.state()
d.managedSave(0)
assert d.hasManagedSaveImage(0) == 1
d.create()
assert d.hasManagedSaveImage(0) == 0 and d.isActive() == 1
print("python ok")
PY
) || fail "python: $out"
    expect "libvirt-python saves, restores and managed-saves" "$out" "python ok"
    guest_runs_clean "$build/bin/vmmctl" state
fi
v start demo >/dev/null 2>&1
out=$(v managedsave demo) || fail "managedsave: $out"
out=$(v undefine demo --managed-save) || fail "undefine --managed-save: $out"
[ ! -e "$dir/state/save/demo.save" ] || fail "undefine --managed-save kept the image"
echo "ok: undefine --managed-save removes the image with the definition"
no_stray_files || fail "files left beside the saves: $(ls -a "$dir")"
echo "PASS"
