#!/usr/bin/env bash
# Wireshark's libvirt dissector (Debian's libvirt-wireshark, libvirt's own, through tshark) reads
# what vmmd says (label libvirt): a virsh session with the calls of every room (connect, node and
# domain statistics, definitions, metadata, lifecycle, events) and a live migration between two
# vmmd, all over TCP on loopback, captured and decoded: every message is libvirt's, none is
# malformed, and the dissector names the procedures vmmd answered.
#   tshark_dissector_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
command -v tshark >/dev/null || { echo "SKIP: needs tshark (apt-get install tshark libvirt-wireshark)"; exit 77; }
tshark -G protocols 2>/dev/null | grep -q "^Libvirt" || { echo "SKIP: needs libvirt's Wireshark dissector (apt-get install libvirt-wireshark)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to capture on the loopback interface"; exit 77; }

sport=$((17400 + RANDOM % 400)) dport=$((17800 + RANDOM % 400)) mport=$((26600 + RANDOM % 400))
start_vmmd "$build" --listen-tcp "127.0.0.1:$sport" --listen-tcp-insecure
start_destination "$build" --listen-tcp "127.0.0.1:$dport" --listen-tcp-insecure
suri="vmm+tcp://127.0.0.1:$sport/system" turi="vmm+tcp://127.0.0.1:$dport/system"
t() { virsh -c "$suri" "$@" 2>&1; }

tshark -i lo -f "tcp port $sport or tcp port $dport" -w "$dir/capture.pcapng" >"$dir/tshark.log" 2>&1 &
capture=$!
also_kill+=("$capture")
capturing() { grep -q "Capturing on" "$dir/tshark.log"; }
wait_until 30 capturing || fail "tshark did not start capturing: $(cat "$dir/tshark.log")"

pattern_domain "$dir/demo.xml"
for cmd in "version --daemon" "capabilities" "nodeinfo" "nodecpustats" "nodememstats" "freecell" "define $dir/demo.xml" \
           "autostart demo" "desc demo --config --title captured" "start demo" "dominfo demo" "vcpuinfo demo" "dommemstat demo" \
           "domstats demo" "list --all" "dumpxml demo" "desc demo --title" "sysinfo" "lookup-of-nothing"; do
    # shellcheck disable=SC2086  # each command's words
    t $cmd >>"$dir/session.log"
done
out=$(t migrate --live demo "$turi" --migrateuri "tcp://127.0.0.1:$mport") || fail "virsh migrate over TCP: $out"
out=$(virsh -c "$turi" domstate demo 2>&1) || fail "domstate at the destination: $out"
expect "the guest runs at the destination" "$out" "running"
out=$(virsh -c "$turi" destroy demo 2>&1) || fail "destroy at the destination: $out"

# Let the last segments be written, then end the capture.
sleep 1
kill -INT "$capture"
wait "$capture" 2>/dev/null

decode() { tshark -r "$dir/capture.pcapng" -d "tcp.port==$sport,libvirt" -d "tcp.port==$dport,libvirt" "$@" 2>/dev/null; }
messages=$(decode -Y libvirt -T fields -e libvirt.procedure | tr ',' '\n' | grep -c .)
[ "$messages" -gt 100 ] || fail "only $messages libvirt messages decoded: $(decode -Y libvirt | head -20)"
echo "ok: $messages libvirt messages decoded"
# The libvirt dissector's findings, not TCP's: a reset after a session's last call (a client's
# packet meeting a socket vmmd had closed, seen once under load) is no malformed message.
malformed=$(decode -Y "_ws.malformed || (libvirt && _ws.expert.severity >= warning)" | head -20)
[ -z "$malformed" ] || fail "the dissector found malformed or suspect messages: $malformed"
echo "ok: none malformed, none with a warning"
# The procedures seen, by the dissector's own names for them (its table, tshark -G values; numbers
# 1 to 7 name QEMU's and LXC's programs' calls too, which only adds names that are not looked for).
numbers=$(decode -Y "libvirt.program == 0x20008086" -T fields -e libvirt.procedure | tr ',' '\n' | sort -un)
names=$(tshark -G values 2>/dev/null | awk -F'\t' -v seen="$(tr '\n' ' ' <<<"$numbers")" '
    BEGIN { n = split(seen, s, " "); for (i = 1; i <= n; i++) want[s[i]] = 1 }
    $2 == "libvirt.procedure" && ($3 in want) { print $4 }')
for proc in CONNECT_OPEN NODE_GET_CPU_STATS NODE_GET_MEMORY_STATS DOMAIN_SET_AUTOSTART DOMAIN_SET_METADATA \
            DOMAIN_GET_VCPUS CONNECT_GET_ALL_DOMAIN_STATS DOMAIN_MIGRATE_PREPARE3_PARAMS DOMAIN_MIGRATE_PERFORM3_PARAMS \
            DOMAIN_MIGRATE_FINISH3_PARAMS DOMAIN_MIGRATE_CONFIRM3_PARAMS CONNECT_GET_SYSINFO; do
    grep -qx "$proc" <<<"$names" || fail "the dissector saw no $proc: $(tr '\n' ' ' <<<"$names")"
done
echo "ok: the dissector names the procedures of the session and the migration"
