#!/usr/bin/env bash
# Stock virsh (Debian's libvirt-clients) against vmmd (label libvirt): the connection-level
# commands answer, a read-only connection connects through the -ro socket, a function vmmd does
# not serve is refused by name, and garbage on the socket closes that client only: vmmd runs on
# and serves the next one. 1,000 idle read-only clients starve nobody, 200 of one user lock no
# other user out of the read-only socket (at most 16 a user) and are closed unopened after 10 s,
# and a half-sent frame is closed within its deadline.
#   virsh_connect_test.sh BUILD_DIR
set -uo pipefail
build=$1
command -v python3 >/dev/null || { echo "SKIP: needs python3"; exit 77; }
. "$(dirname "$0")/lib.sh"
start_vmmd "$build"

out=$(virsh -c "$uri" version 2>&1) || fail "virsh version: $out"
expect "version" "$out" "Running hypervisor: vmm [0-9]+\.[0-9]+\.[0-9]+"
library=$(sed -n 's/^Using library: libvirt //p' <<<"$out")
out=$(virsh -c "$uri" version --daemon 2>&1) || fail "virsh version --daemon: $out"
expect "the daemon's library is libvirt's whose protocol it speaks" "$out" "Running against daemon: $library"
out=$(virsh -c "$uri" capabilities 2>&1) || fail "virsh capabilities: $out"
expect "capabilities name the guest type" "$out" "<domain type='vmm'/>"
expect "capabilities name the host's CPUs" "$out" "<cpus num='$(nproc)'>"
if /usr/bin/python3 -c 'import libvirt' 2>/dev/null; then
    out=$(/usr/bin/python3 - "$uri" <<'PY' 2>&1
import sys, libvirt, xml.etree.ElementTree as ET
caps = ET.fromstring(libvirt.open(sys.argv[1]).getCapabilities())
dom = ET.fromstring(libvirt.open(sys.argv[1]).getDomainCapabilities())
print(caps.find("host/cpu/arch").text, caps.find("guest/arch/domain").get("type"), caps.find("guest/arch/emulator").text,
      dom.find("domain").text, dom.find("vcpu").get("max"))
PY
) || fail "python getCapabilities: $out"
    expect "libvirt-python parses them and the domain capabilities" "$out" "^x86_64 vmm /.*vmm vmm 255\$"
fi
out=$(virsh -c "$uri" domcapabilities 2>&1) || fail "virsh domcapabilities: $out"
expect "domcapabilities: the driver's domain type" "$out" "<domain>vmm</domain>"
expect "domcapabilities: the host's CPU passed through" "$out" "<mode name='host-passthrough' supported='yes'>"
expect "domcapabilities: no disks" "$out" "<disk supported='no'/>"
expect "domcapabilities: its vmm" "$out" "<path>$build/bin/vmm</path>"
out=$(virsh -c "$uri" domcapabilities --virttype kvm 2>&1) && fail "domcapabilities --virttype kvm: $out"
expect "another virttype is refused" "$out" "virttype 'kvm': the vmm driver has 'vmm' only"
# libvirt reads "no models" as "any model accepted": vmm, which has none, says so in a refusal.
out=$(virsh -c "$uri" cpu-models x86_64 2>&1) && fail "virsh cpu-models: $out"
expect "cpu-models: none, said as a refusal naming host-passthrough" "$out" "no named CPU models.*host-passthrough"
out=$(virsh -c "$uri" cpu-models aarch64 2>&1) && fail "cpu-models aarch64: $out"
expect "another arch is refused" "$out" "x86_64 guests"
# What a guest CPU may be: the host's, passed through; no named model (nothing to baseline with).
echo "<cpu mode='host-passthrough'/>" >"$dir/passthrough.xml"
printf "<cpu mode='custom' match='exact'><model>Skylake-Client</model><feature policy='require' name='vmx'/></cpu>" >"$dir/model.xml"
out=$(virsh -c "$uri" hypervisor-cpu-compare "$dir/passthrough.xml" 2>&1) || fail "hypervisor-cpu-compare passthrough: $out"
expect "host-passthrough is what vmm gives" "$out" "identical to the CPU provided by hypervisor"
out=$(virsh -c "$uri" hypervisor-cpu-compare "$dir/model.xml" 2>&1)  # virsh's status says incompatible too
expect "a named model is not" "$out" "incompatible with the CPU provided by hypervisor"
out=$(virsh -c "$uri" hypervisor-cpu-compare --error "$dir/model.xml" 2>&1) && fail "hypervisor-cpu-compare --error: $out"
expect "and with --error says why" "$out" "host's CPU only \(host-passthrough\), not model Skylake-Client"
out=$(virsh -c "$uri" hypervisor-cpu-baseline "$dir/model.xml" 2>&1) && fail "hypervisor-cpu-baseline: $out"
expect "there is no baseline model, said why" "$out" "no CPU models to baseline with"
out=$(virsh -c "$uri" hostname 2>&1) || fail "virsh hostname: $out"
expect "hostname" "$out" "^$(hostname)\$"
out=$(virsh -c "$uri" nodeinfo 2>&1) || fail "virsh nodeinfo: $out"
expect "nodeinfo" "$out" "CPU\(s\): +$(nproc)"
mem_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)
expect "nodeinfo memory" "$out" "Memory size: +$mem_kib KiB"
out=$(virsh -r -c "$uri" version 2>&1) || fail "virsh -r version: $out"
expect "read-only connection" "$out" "Running hypervisor: vmm"
out=$(virsh -c "$uri" domjobinfo nothing 2>&1) && fail "domjobinfo of no domain: $out"
out=$(virsh -c "$uri" sysinfo 2>&1) && fail "sysinfo should not be served: $out"
expect "an unserved function is refused by name" "$out" "not supported by the vmm driver: CONNECT_GET_SYSINFO"

# Garbage: a length past libvirt's maximum, then a valid length with a header that is not one.
python3 - "$sock" <<'PY' || fail "garbage client"
import socket, struct, sys
for payload in (struct.pack(">I", 0xffffffff) + b"x" * 64,
                struct.pack(">I", 32) + b"\xff" * 28):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    s.sendall(payload)
    s.settimeout(10)
    try:
        left = s.recv(1)  # vmmd closes the connection: b"" (or a reset)
    except ConnectionResetError:
        left = b""
    assert left == b"", left
    s.close()
PY
echo "ok: garbage closes that client"

# A call that passes descriptors (which vmmd does not take) is answered with an error, not left
# waiting: status 1 (error) with the call's serial.
python3 - "$sock" <<'PY' || fail "a call with descriptors was not answered"
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.settimeout(10)
s.sendall(struct.pack(">IIIiIII", 28, 0x20008086, 1, 3, 4, 77, 0))
head = b""
while len(head) < 28:
    chunk = s.recv(28 - len(head))
    assert chunk, "closed without an answer"
    head += chunk
length, prog, vers, proc, typ, serial, status = struct.unpack(">IIIiIII", head)
assert (typ, serial, status) == (1, 77, 1), (typ, serial, status)
PY
echo "ok: a call with descriptors is refused, not left waiting"
kill -0 "$pid" || fail "vmmd died on garbage"
out=$(virsh -c "$uri" hostname 2>&1) || fail "virsh after garbage: $out"
expect "serves the next client" "$out" "^$(hostname)\$"
grep -q "a message of 4294967295 bytes, more than libvirt's maximum" "$dir/log" || fail "the log does not say why"
echo "ok: the log says why"

# 1,000 idle clients on the read-only socket (any user may open it): root's virsh on the
# read-write one still answers, vmmd runs a bounded number of threads, and the log says why the
# rest were closed. Then a frame begun and never finished is closed within its deadline.
python3 - "$sock-ro" "$uri" "$pid" <<'PY' || fail "a thousand idle clients"
import socket, subprocess, sys, time
held = []
for _ in range(1000):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    held.append(s)
start = time.monotonic()
out = subprocess.run(["virsh", "-c", sys.argv[2], "list", "--all"], capture_output=True, text=True, timeout=60)
took = time.monotonic() - start
assert out.returncode == 0, out.stderr
threads = int([l for l in open(f"/proc/{sys.argv[3]}/status") if l.startswith("Threads:")][0].split()[1])
assert threads < 200, f"vmmd runs {threads} threads with 1000 idle clients"
print(f"virsh list answered in {took:.2f} s beside 1000 idle read-only clients; vmmd has {threads} threads")
PY
expect "the log says the read-only socket was full for this user" "$(cat "$dir/log")" \
    "sock-ro serves 16 clients of user 0, the most one user may have"

# 200 idle read-only clients of one user (nobody) lock no other user out: root's and another
# user's (daemon's) 'virsh -r list' answer within 2 s; and the idle ones, which never open their
# connection, are closed after 10 s.
if command -v setpriv >/dev/null && id nobody >/dev/null 2>&1 && id daemon >/dev/null 2>&1; then
    chmod 755 "$dir"  # the read-only socket is every user's, as under /run/libvirt
    ro_uri="vmm+unix:///system?socket=$sock-ro"
    setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups /usr/bin/python3 - "$sock-ro" >"$dir/hog.out" 2>&1 <<'PY' &
import socket, sys, time
held = []
for _ in range(200):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    held.append(s)
print("held", flush=True)
time.sleep(120)
PY
    hog=$!
    also_kill+=("$hog")
    wait_until 60 grep -q held "$dir/hog.out" || fail "nobody's 200 clients: $(cat "$dir/hog.out")"
    mkdir -p "$dir/daemon-home" && chown daemon "$dir/daemon-home"
    for who in root daemon; do
        start=$(date +%s%N)
        if [ "$who" = root ]; then
            out=$(virsh -r -c "$ro_uri" list --all 2>&1) || fail "root's virsh -r list beside nobody's 200: $out"
        else
            out=$(setpriv --reuid=daemon --regid="$(id -g daemon)" --clear-groups env HOME="$dir/daemon-home" \
                virsh -r -c "$ro_uri" list --all 2>&1) || fail "daemon's virsh -r list beside nobody's 200: $out"
        fi
        took=$(( ($(date +%s%N) - start) / 1000000 ))
        echo "$who's virsh -r list answered in $took ms beside 200 idle read-only clients of nobody"
        [ -n "${VMM_NESTED_TCG:-}" ] || [ "$took" -lt 2000 ] || fail "$who's virsh -r list took $took ms"
    done
    expect "the log says nobody's were too many" "$(cat "$dir/log")" "serves 16 clients of user $(id -u nobody),"
    wait_until 30 grep -q "did not open its connection for 10 s: closed" "$dir/log" || fail "idle clients were not closed"
    echo "ok: a client that never opens its connection is closed after 10 s"
    kill "$hog" 2>/dev/null
else
    echo "SKIP part: needs setpriv and the users nobody and daemon"
fi
python3 - "$sock-ro" <<'PY' || fail "a half-sent frame was held"
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"\x00\x00")  # half a length word, and nothing more
s.settimeout(60)
start = time.monotonic()
assert s.recv(1) == b"", "vmmd answered a half-sent frame"
took = time.monotonic() - start
assert took < 30, f"held for {took:.0f} s"
print(f"a half-sent frame was closed after {took:.1f} s")
PY
expect "the log says why" "$(cat "$dir/log")" "sent 2 of 4 bytes and no more within 10 s"
