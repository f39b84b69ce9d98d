#!/usr/bin/env bash
# A domain's definition changed in part (vmmd/daemon/config_procedures.cc) through stock virsh and
# libvirt-python (label libvirt): others' metadata kept in dumpxml as given (a Nova-like element),
# read and set by namespace (virsh metadata), title and description (virsh desc), memory
# (setmaxmem --config sets it, setmem can only say what is: no balloon), define --validate; then on
# a running domain: a live change, a config change that waits for the next start, a running
# guest's memory refused with why.
#   virsh_config_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build"

cat >"$dir/demo.xml" <<'XML'
<domain type='vmm' xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>
  <name>demo</name>
  <memory unit='MiB'>32</memory>
  <os><type>hvm</type><kernel>idle</kernel></os>
  <metadata>
    <nova:instance><nova:name>web-1</nova:name><nova:flavor name="m1.small"/></nova:instance>
  </metadata>
</domain>
XML
out=$(v define --validate "$dir/demo.xml") || fail "define --validate: $out"
out=$(v dumpxml demo) || fail "dumpxml: $out"
expect "dumpxml keeps others' metadata, its namespace on it" "$out" \
    "<nova:instance xmlns:nova=\"http://openstack.org/xmlns/libvirt/nova/1.1\"><nova:name>web-1</nova:name>"
out=$(v metadata demo http://openstack.org/xmlns/libvirt/nova/1.1) || fail "metadata (get): $out"
expect "virsh metadata reads it by namespace" "$out" "<nova:flavor name=\"m1.small\"/>"
out=$(v metadata demo http://example.org/none) && fail "metadata of an absent namespace: $out"
expect "an absent element is VIR_ERR_NO_DOMAIN_METADATA" "$out" "metadata not found"
out=$(v metadata demo http://example.org/app/1 --key app --set '<owner team="db">alice</owner>') || fail "metadata --set: $out"
out=$(v metadata demo http://example.org/app/1) || fail "metadata (get app): $out"
expect "metadata --set puts it in the namespace asked" "$out" "<app:owner xmlns:app=\"http://example.org/app/1\" team=\"db\">alice</app:owner>"
out=$(v metadata demo http://example.org/app/1 --key app --set '<owner><unclosed></owner>') && fail "a broken fragment: $out"
expect "a fragment that does not parse is refused" "$out" "does not parse"
out=$(v metadata demo http://example.org/app/1 --remove) || fail "metadata --remove: $out"
out=$(v metadata demo http://example.org/app/1) && fail "a removed element is still there: $out"
echo "ok: metadata --remove"
out=$(v desc demo --title "web server") || fail "desc --title: $out"
out=$(v desc demo "serves the shop") || fail "desc: $out"
expect "desc --title" "$(v desc demo --title)" "^web server"
expect "desc" "$(v desc demo)" "^serves the shop"
expect "the title is in dumpxml" "$(v dumpxml demo)" "<title>web server</title>"
out=$(v list --all --title) || fail "list --title: $out"
expect "list --title shows it" "$out" "demo +shut off +web server"

out=$(v setmaxmem demo 48M --config) || fail "setmaxmem --config: $out"
expect "setmaxmem --config sets the memory" "$(v dominfo demo)" "Max memory: +49152 KiB"
out=$(v setmem demo 16M --config) && fail "setmem --config below the maximum: $out"
expect "setmem below the maximum is refused with why" "$out" "no balloon"
out=$(v setmem demo 48M --config) || fail "setmem --config equal to the maximum: $out"
out=$(v setmaxmem demo 1001K --config) && fail "setmaxmem of part of a page: $out"
expect "memory that is not whole pages is refused" "$out" "whole 4 KiB pages"
expect "nothing changed by the refusals" "$(v dominfo demo)" "Max memory: +49152 KiB"
stop_vmmd
start_vmmd "$build"
expect "the changes are on disk: title" "$(v desc demo --title)" "^web server"
expect "the changes are on disk: memory" "$(v dominfo demo)" "Max memory: +49152 KiB"
expect "the changes are on disk: others' metadata" "$(v dumpxml demo)" "<nova:name>web-1</nova:name>"

# Running: live and config apart.
out=$(v start demo) || fail "start: $out"
out=$(v setmem demo 16M) && fail "setmem of a running guest: $out"
expect "a running guest's memory is refused, saying why and what works" "$out" "no balloon.*--config"
out=$(v desc demo --live --title "live title") || fail "desc --live: $out"
out=$(v desc demo --config --title "next title") || fail "desc --config: $out"
expect "the running domain has the live title" "$(v desc demo --title)" "^live title"
expect "the persistent definition has the other" "$(v dumpxml --inactive demo)" "<title>next title</title>"
out=$(v setmaxmem demo 64M --config) || fail "setmaxmem --config while running: $out"
expect "the running guest keeps its memory" "$(v dominfo demo)" "Max memory: +49152 KiB"
out=$(v destroy demo) || fail "destroy: $out"
expect "the next start's definition takes over: title" "$(v desc demo --title)" "^next title"
expect "the next start's definition takes over: memory" "$(v dominfo demo)" "Max memory: +65536 KiB"
out=$(v desc demo --live --title x) && fail "desc --live of a stopped domain: $out"
expect "a live change of a stopped domain is refused" "$out" "not running"

if /usr/bin/python3 -c 'import libvirt' 2>/dev/null; then
    out=$(/usr/bin/python3 - "$uri" <<'PY' 2>&1
import sys, libvirt
d = libvirt.open(sys.argv[1]).lookupByName("demo")
d.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, "<x>1</x>", "py", "http://example.org/py", libvirt.VIR_DOMAIN_AFFECT_CONFIG)
print(d.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, "http://example.org/py", 0))
d.setMetadata(libvirt.VIR_DOMAIN_METADATA_DESCRIPTION, None, None, None, 0)
try:
    d.metadata(libvirt.VIR_DOMAIN_METADATA_DESCRIPTION, None, 0)
except libvirt.libvirtError as e:
    print("gone", e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN_METADATA)
PY
) || fail "libvirt-python: $out"
    expect "libvirt-python setMetadata/metadata" "$out" "<py:x xmlns:py=\"http://example.org/py\">1</py:x>"
    expect "libvirt-python removes the description" "$out" "gone True"
fi
