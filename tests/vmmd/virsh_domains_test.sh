#!/usr/bin/env bash
# Stock virsh and libvirt's Python binding manage vmm domain definitions through vmmd (label
# libvirt): define, list, dominfo, domstate, dumpxml (which defines again to the same document),
# domuuid/domid/domname, a bad document refused with line and column, an element vmm cannot honour
# refused by name, a read-only connection refused an undefine, definitions kept across a restart
# of vmmd, undefine; under umask 000 nothing group- or world-writable, a planted definition refused.
#   virsh_domains_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
start_vmmd "$build"

cat >"$dir/demo.xml" <<XML
<domain type='vmm'>
  <name>demo</name>
  <memory unit='MiB'>64</memory>
  <vcpu>2</vcpu>
  <os><type>hvm</type><kernel>stress</kernel><cmdline>bytes=8M${stress_rest:+ $stress_rest}</cmdline></os>
  <metadata>
    <vmm:vmm xmlns:vmm='https://github.com/vmm/xmlns/domain/1'><vmm:dirty-tracking>ring</vmm:dirty-tracking></vmm:vmm>
  </metadata>
</domain>
XML
out=$(v define "$dir/demo.xml") || fail "define: $out"
expect "define" "$out" "Domain 'demo' defined"
out=$(v list --all) || fail "list: $out"
expect "list --all" "$out" "-[[:space:]]+demo[[:space:]]+shut off"
out=$(v dominfo demo) || fail "dominfo: $out"
expect "dominfo" "$out" "CPU\(s\): +2"
expect "dominfo memory" "$out" "Max memory: +65536 KiB"
expect "dominfo persistent" "$out" "Persistent: +yes"
out=$(v domstate demo --reason) || fail "domstate: $out"
expect "domstate --reason" "$out" "shut off \(unknown\)"
uuid=$(v domuuid demo) || fail "domuuid: $uuid"
uuid=$(echo "$uuid" | head -1)
expect "domuuid" "$uuid" "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
out=$(v domname "$uuid") || fail "domname: $out"
expect "domname" "$out" "^demo$"
out=$(v domid demo) || fail "domid: $out"
expect "domid of a domain that does not run" "$out" "^-$"
v dumpxml demo >"$dir/dumped.xml" || fail "dumpxml: $(cat "$dir/dumped.xml")"
expect "dumpxml keeps the vmm metadata" "$(cat "$dir/dumped.xml")" "<vmm:dirty-tracking>ring</vmm:dirty-tracking>"
expect "dumpxml normalizes units" "$(cat "$dir/dumped.xml")" "<memory unit='KiB'>65536</memory>"
out=$(v define "$dir/dumped.xml") || fail "define the dumped XML: $out"
v dumpxml demo >"$dir/redumped.xml"
out=$(diff "$dir/dumped.xml" "$dir/redumped.xml") || fail "defining the dumped XML changed it: $out"
echo "ok: dumpxml defines back to itself"

printf "<domain type='vmm'>\n  <name>bad</name>\n  <memory>4096</memory\n</domain>\n" >"$dir/bad.xml"
out=$(v define "$dir/bad.xml") && fail "a bad document was defined: $out"
expect "bad XML: line and column" "$out" "line 4, column 1"
printf "<domain type='vmm'><name>f</name><memory>4096</memory><os><kernel>idle</kernel></os><features/></domain>" >"$dir/f.xml"
out=$(v define "$dir/f.xml") && fail "<features> was accepted: $out"
expect "an element vmm cannot honour is refused by name" "$out" "<features> in <domain> \(line 1\) is not supported"
out=$(virsh -r -c "$uri" undefine demo 2>&1) && fail "a read-only connection undefined a domain: $out"
expect "read-only: no undefine" "$out" "read only|read-only"

stop_vmmd
start_vmmd "$build"
out=$(v list --all --name) || fail "list after restart: $out"
expect "the definition survives a restart of vmmd" "$out" "^demo$"

# libvirt's Python binding: Debian's python3 (python3-libvirt), whatever python3 is first in PATH.
if /usr/bin/python3 -c 'import libvirt' 2>/dev/null; then
    out=$(/usr/bin/python3 - "$uri" <<'PY' 2>&1
import sys, libvirt
c = libvirt.open(sys.argv[1])
d = c.lookupByName("demo")
assert d.UUIDString() == c.lookupByUUIDString(d.UUIDString()).UUIDString()
assert [x.name() for x in c.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_INACTIVE)] == ["demo"]
assert c.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE) == []
state, reason = d.state()
assert state == libvirt.VIR_DOMAIN_SHUTOFF, state
assert d.isPersistent() == 1 and d.isActive() == 0
assert "<kernel>stress</kernel>" in d.XMLDesc()
try:
    c.lookupByName("nothing")
    raise SystemExit("found a domain that does not exist")
except libvirt.libvirtError as e:
    assert e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN, e.get_error_code()
    assert e.get_error_domain() == libvirt.VIR_FROM_DOM, e.get_error_domain()
try:
    c.defineXML("<domain type='vmm'><name>x</name><memory>4096</memory><os><kernel>idle</kernel></os><features/></domain>")
    raise SystemExit("a definition with <features> was taken")
except libvirt.libvirtError as e:
    assert e.get_error_code() == libvirt.VIR_ERR_XML_ERROR, e.get_error_code()
    assert e.get_error_domain() == libvirt.VIR_FROM_DOMAIN, e.get_error_domain()
print("python ok", d.name(), d.info())
PY
) || fail "python: $out"
    expect "libvirt-python: lookups, lists, state, XML, errors with their code and domain" "$out" "python ok demo"
else
    echo "note: /usr/bin/python3 has no libvirt module (apt-get install python3-libvirt): the Python part is skipped"
fi

out=$(v undefine demo) || fail "undefine: $out"
expect "undefine" "$out" "Domain 'demo' has been undefined"
out=$(v list --all --name) || fail "list after undefine: $out"
[ -z "$(echo "$out" | tr -d '[:space:]')" ] || fail "a domain is left after undefine: $out"
echo "ok: nothing left"
[ -z "$(ls "$dir/state/domains")" ] || fail "files left in the state dir: $(ls "$dir/state/domains")"
echo "ok: the state dir is empty"

# Under umask 000 a fresh vmmd makes nothing of its own group- or world-writable; a definition
# another user planted in its state directory, or one anyone may change, is refused at start-up
# with a line (vmmd would run what it names, as root).
stop_vmmd
rm -rf "$dir/state"
umask 000
start_vmmd "$build"
out=$(v define "$dir/demo.xml") || fail "define under umask 000: $out"
umask 022
loose=$(find "$dir/state" -perm /022 ! -type s)
[ -z "$loose" ] || fail "under umask 000 vmmd made these group- or world-writable: $(ls -ld $loose)"
echo "ok: under umask 000 nothing in the state directory is group- or world-writable"
out=$(v undefine demo) || fail "undefine: $out"
if [ "$(id -u)" = 0 ]; then
    stop_vmmd
    sed -e 's/>demo</>planted</' "$dir/demo.xml" >"$dir/state/domains/planted.xml"
    chown nobody "$dir/state/domains/planted.xml"
    sed -e 's/>demo</>loose</' "$dir/demo.xml" >"$dir/state/domains/loose.xml"
    chmod 0666 "$dir/state/domains/loose.xml"
    start_vmmd "$build"
    out=$(v list --all --name) || fail "list: $out"
    grep -qE "planted|loose" <<<"$out" && fail "a planted or world-writable definition was loaded: $out"
    expect "the planted one is refused with a line" "$(cat "$dir/log")" "planted.xml belongs to uid [0-9]+, not to vmmd's user"
    expect "the world-writable one too" "$(cat "$dir/log")" "loose.xml can be written by anyone"
    rm -f "$dir/state/domains/planted.xml" "$dir/state/domains/loose.xml"
else
    echo "note: not root: the planted-definition part needs chown"
fi
