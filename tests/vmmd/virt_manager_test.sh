#!/usr/bin/env bash
# virt-manager 4.1 (Debian's, a libvirt client nobody here wrote) under Xvfb against vmmd (label
# libvirt): it connects, and its window, read through the accessibility tree as a screen reader
# reads it, lists the running domain with its state, and follows it to Paused and back as virsh
# suspends and resumes it (lifecycle events), and to Shutoff as virsh migrates it away beside it
# (its Migrate dialog is not driven); it polls the domain's CPU time with
# getAllDomainStats without an error, the figures its CPU graph draws, which grow as the guest runs.
#   virt_manager_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
for tool in /usr/bin/virt-manager xvfb-run dbus-run-session /usr/libexec/at-spi-bus-launcher; do
    command -v "$tool" >/dev/null ||
        { echo "SKIP: needs $tool (apt-get install virt-manager xvfb xauth dbus at-spi2-core python3-pyatspi)"; exit 77; }
done
/usr/bin/python3 -c 'import pyatspi' 2>/dev/null || { echo "SKIP: needs python3-pyatspi"; exit 77; }
start_vmmd "$build"
start_destination "$build"
mport=$((27000 + RANDOM % 400))  # this test's range (lib.sh lists the others)
pattern_domain "$dir/demo.xml"
out=$(v define "$dir/demo.xml") || fail "define: $out"
out=$(v start demo) || fail "start: $out"

export HOME=$dir/home  # virt-manager's settings and log, this test's own
mkdir -p "$HOME"
cat >"$dir/session.sh" <<SESSION
/usr/libexec/at-spi-bus-launcher --launch-immediately &
export GTK_A11Y=atspi
xvfb-run -a /usr/bin/virt-manager --connect '$uri' --no-fork --debug >'$dir/virt-manager.log' 2>&1 &
a11y() { /usr/bin/python3 '$(dirname "$0")/virt_manager_a11y.py' demo "\$1" 60; }
a11y Running || exit 11
# The CPU time its graph draws (getAllDomainStats' cpu.time) grows while the guest runs here.
cpu() { virsh -c '$uri' domstats demo --cpu-total | awk -F= '/cpu.time/ {print \$2}'; }
first=\$(cpu)
for i in \$(seq 300); do [ "\$(cpu)" -gt "\$first" ] && break; sleep 0.1; done
[ "\$(cpu)" -gt "\$first" ] || exit 16
virsh -c '$uri' suspend demo >/dev/null && a11y Paused || exit 12
virsh -c '$uri' resume demo >/dev/null && a11y Running || exit 13
virsh -c '$uri' migrate --live demo '$duri' --migrateuri tcp://127.0.0.1:$mport >'$dir/migrate.out' 2>&1 || exit 14
a11y Shutoff || exit 15
SESSION
out=$(timeout 240 dbus-run-session -- bash "$dir/session.sh" 2>&1)
rc=$?
pkill -f -- "virt-manager --connect $uri" 2>/dev/null
case $rc in
    0) ;;
    11) fail "virt-manager did not list demo as Running: $out; its log: $(tail -20 "$dir/virt-manager.log")" ;;
    12) fail "virt-manager did not follow demo to Paused: $out" ;;
    13) fail "virt-manager did not follow demo back to Running: $out" ;;
    14) fail "virsh migrate beside virt-manager failed: $(cat "$dir/migrate.out")" ;;
    15) fail "virt-manager did not show demo shut off once it migrated away: $out" ;;
    16) fail "the CPU time virt-manager's graph draws did not grow in 30 s" ;;
    *) fail "the X session ended with $rc: $out; virt-manager's log: $(tail -20 "$dir/virt-manager.log")" ;;
esac
echo "ok: virt-manager lists demo Running, follows it to Paused, back, and to Shutoff as it migrates away ($(tail -1 <<<"$out"))"
expect "the guest runs at the destination" "$(d domstate demo)" "^running"
log=$(cat "$dir/virt-manager.log")
expect "virt-manager's connection is active" "$log" "changed to state=Active"
expect "it added the domain as running" "$log" "domain=demo status=Running added"
grep -qE "getAllDomainStats" <<<"$log" && fail "virt-manager's stats polling failed: $(grep getAllDomainStats <<<"$log")"
echo "ok: its getAllDomainStats polling raised nothing"
echo "ok: the CPU time its graph draws grew while the guest ran here"
