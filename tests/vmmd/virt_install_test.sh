#!/usr/bin/env bash
# virt-install (Debian's virtinst 4.1, a libvirt client nobody here wrote) creates and starts a
# vmm domain through vmmd with its defaults (label libvirt): --import of an ELF guest with no disk
# and no network, the XML it writes by default taken (<clock offset='utc'/>, <emulator>, a pty
# <console>) and kept, the guest running; an <emulator> that is not vmmd's vmm refused in one
# line; a display (virt-install's default on x86) kept, named as not honoured, the guest running.
#   virt_install_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
[ -x /usr/bin/virt-install ] || { echo "SKIP: needs virt-install (apt-get install virtinst)"; exit 77; }
start_vmmd "$build"
# virt-install is a Python program on Debian's python3 (gi, libosinfo): never a pyenv one first in PATH.
vi() { timeout 120 /usr/bin/virt-install --connect "$uri" "$@" 2>&1; }
common=(--import --memory 32 --vcpus 2 --disk none --network none --graphics none --osinfo detect=on,require=off --noautoconsole)

out=$(vi --name vi "${common[@]}" --boot "kernel=$build/guest/idle.elf") || fail "virt-install --import: $out"
expect "virt-install says it created the domain" "$out" "Domain creation completed"
expect "the domain runs" "$(v domstate vi)" "^running"
xml=$(v dumpxml vi)
expect "its clock is kept" "$xml" "<clock offset='utc'/>"
expect "its emulator is vmmd's vmm" "$xml" "<emulator>.*/vmm</emulator>"
expect "two vCPUs as asked" "$(v dominfo vi)" "CPU\(s\): +2"
vmm=$(pgrep -f -- "--qmp unix:$dir/state/run/")
[ -n "$vmm" ] && grep -q "idle.elf" "/proc/$vmm/cmdline" || fail "no vmm runs the ELF: $(tr '\0' ' ' <"/proc/$vmm/cmdline" 2>/dev/null)"
echo "ok: the vmm runs the ELF virt-install named"
out=$(v destroy vi) || fail "destroy: $out"
out=$(v undefine vi) || fail "undefine: $out"

out=$(vi --name other "${common[@]}" --boot "kernel=$build/guest/idle.elf" --xml ./devices/emulator=/usr/bin/qemu-system-x86_64) &&
    fail "virt-install with another emulator: $out"
expect "another emulator is refused, naming vmmd's" "$out" "this vmmd runs .*/vmm"
expect "nothing defined by the refusal" "$(v list --all --name | tr -d '[:space:]')" "^$"

# With virt-install's own defaults (no --graphics): on x86 it adds a VNC display, a VGA video
# device and a USB tablet. vmm has no display: they are kept in the definition (dumpxml shows
# what was asked), named in vmmd's log as not honoured, and the guest runs.
out=$(vi --name vd --import --memory 32 --disk none --network none --osinfo detect=on,require=off --noautoconsole \
         --boot "kernel=$build/guest/idle.elf") || fail "virt-install with its default display: $out"
expect "virt-install with its defaults created the domain" "$out" "Domain creation completed"
expect "the domain with a display it cannot show runs" "$(v domstate vd)" "^running"
xml=$(v dumpxml vd)
expect "its display is kept in dumpxml" "$xml" "<graphics type=.vnc."
expect "its video is kept" "$xml" "<video>"
expect "its tablet is kept" "$xml" "<input type=.tablet."
expect "vmmd names what it does not honour" "$(cat "$dir/log")" "domain 'vd': <input type='tablet'>, <graphics type='vnc'>, <video> kept in its definition, not honoured: vmm has no display"
expect "domcapabilities says there is no display" "$(v domcapabilities)" "<graphics supported='no'/>"
out=$(v destroy vd) || fail "destroy: $out"
out=$(v undefine vd) || fail "undefine: $out"
