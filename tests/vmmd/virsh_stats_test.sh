#!/usr/bin/env bash
# The host's and the domains' statistics (vmmd/daemon/stats_procedures.cc) through stock virsh and
# libvirt-python (label libvirt), each checked against what /proc says or the definition: the
# host's CPU times and memory (nodecpustats, nodememstats, freecell), a stopped domain's maximum
# memory (libvirt-python's maxMemory) and vCPU count, then a running two-vCPU domain's vCPU threads (vcpuinfo: each with its CPU
# time, growing, the CPU it last ran on and its affinity), its memory (dommemstat: the vmm's
# resident set), domstats in every group, a stopped domain's vCPU affinity (vcpuinfo, vcpupin) and with its filters, and the refusals: a stopped domain's
# live figures, a stat group vmm does not serve when enforced, a CPU or cell this host lacks; and
# the domain's vmm monitor through `virsh qemu-monitor-command` (libvirt's QEMU program).
#   virsh_stats_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build"

# The host.
out=$(v nodecpustats) || fail "nodecpustats: $out"
expect "nodecpustats" "$out" "^user: +[0-9]+"
expect "nodecpustats idle" "$out" "idle: +[0-9]+"
out=$(v nodecpustats --cpu 0) || fail "nodecpustats --cpu 0: $out"
expect "nodecpustats of CPU 0" "$out" "^user: +[0-9]+"
out=$(v nodecpustats --cpu "$(nproc)") && fail "nodecpustats of a CPU this host lacks: $out"
expect "a CPU this host lacks is refused" "$out" "Invalid cpuNum $(nproc)"
out=$(v nodememstats) || fail "nodememstats: $out"
expect "nodememstats total is MemTotal" "$out" "^total *: +$(awk '/^MemTotal:/ {print $2}' /proc/meminfo) KiB"
expect "nodememstats free" "$out" "free *: +[0-9]+ KiB"
out=$(v nodememstats --cell 1) && fail "nodememstats of cell 1: $out"
expect "a cell this host lacks is refused" "$out" "Invalid cell number 1"
out=$(v freecell) || fail "freecell: $out"
free_kib=$(awk '/^Total:/ {print $2}' <<<"$out")
meminfo_free=$(awk '/^MemFree:/ {print $2}' /proc/meminfo)
# MemFree moves between the two reads: within 64 MiB.
[ -n "$free_kib" ] && [ $((free_kib - meminfo_free)) -lt 65536 ] && [ $((meminfo_free - free_kib)) -lt 65536 ] ||
    fail "freecell says $out, /proc/meminfo MemFree $meminfo_free KiB"
echo "ok: freecell is MemFree"

cat >"$dir/demo.xml" <<XML
<domain type='vmm'>
  <name>demo</name>
  <memory unit='MiB'>64</memory>
  <vcpu>2</vcpu>
  <os><type>hvm</type><kernel>stress</kernel><cmdline>bytes=8M${stress_rest:+ $stress_rest}</cmdline></os>
</domain>
XML
out=$(v define "$dir/demo.xml") || fail "define: $out"

# Stopped: what the definition says, and no live figures.
out=$(v vcpucount demo --maximum --config) || fail "vcpucount --maximum --config: $out"
expect "vcpucount of a stopped domain" "$out" "^2"
out=$(v vcpucount demo --live) && fail "vcpucount --live of a stopped domain: $out"
expect "live vCPUs of a stopped domain are refused" "$out" "not running"
out=$(v dommemstat demo) && fail "dommemstat of a stopped domain: $out"
expect "dommemstat of a stopped domain is refused" "$out" "not running"
out=$(v domstats demo) || fail "domstats of a stopped domain: $out"
expect "domstats of a stopped domain: its state" "$out" "state.state=5"
expect "domstats of a stopped domain: its memory" "$out" "balloon.maximum=65536"
out=$(v domstats --list-inactive --state) || fail "domstats --list-inactive: $out"
expect "domstats --list-inactive lists it" "$out" "Domain: 'demo'"

out=$(v start demo) || fail "start: $out"
vmm=$(pgrep -f -- "--qmp unix:$dir/state/run/")
[ -n "$vmm" ] || fail "no vmm runs for demo"
vcpu_tids=$(for t in /proc/"$vmm"/task/*; do grep -qE '^vcpu[0-9]+$' "$t/comm" && basename "$t"; done)
[ "$(wc -w <<<"$vcpu_tids")" = 2 ] || fail "the vmm has vCPU threads '$vcpu_tids', not two"

out=$(v vcpuinfo demo) || fail "vcpuinfo: $out"
expect "vcpuinfo: vCPU 0" "$out" "^VCPU: +0"
expect "vcpuinfo: vCPU 1" "$out" "VCPU: +1"
expect "vcpuinfo: the CPU each last ran on" "$out" "CPU: +[0-9]+"
expect "vcpuinfo: each one's affinity (every host CPU)" "$out" "CPU Affinity: +$(printf 'y%.0s' $(seq "$(nproc)"))"
# CPU time grows as the stress guest runs.
first=$(awk '/^CPU time:/ {sub(/s$/, "", $3); print $3; exit}' <<<"$out")
grows() { local now; now=$(v vcpuinfo demo | awk '/^CPU time:/ {sub(/s$/, "", $3); print $3; exit}'); awk -v a="$first" -v b="$now" 'BEGIN {exit !(b > a)}'; }
wait_until 30 grows || fail "vCPU 0's CPU time stayed at $first s"
echo "ok: a vCPU's CPU time grows"
out=$(v vcpucount demo --live) || fail "vcpucount --live: $out"
expect "vcpucount --live" "$out" "^2"

out=$(v dommemstat demo) || fail "dommemstat: $out"
expect "dommemstat: the whole memory, no balloon" "$out" "^actual 65536"
rss=$(awk '/^rss/ {print $2}' <<<"$out")
vmrss=$(awk '/^VmRSS:/ {print $2}' "/proc/$vmm/status")
[ -n "$rss" ] && [ "$rss" -gt 0 ] && [ $((rss - vmrss)) -lt 16384 ] && [ $((vmrss - rss)) -lt 16384 ] ||
    fail "dommemstat rss $rss KiB, the vmm's VmRSS $vmrss KiB"
echo "ok: dommemstat rss is the vmm's resident set"

out=$(v domstats demo) || fail "domstats: $out"
expect "domstats: running" "$out" "state.state=1"
expect "domstats: CPU time" "$out" "cpu.time=[1-9][0-9]*"
expect "domstats: vCPUs" "$out" "vcpu.current=2"
expect "domstats: vCPU 1's time" "$out" "vcpu.1.time=[0-9]+"
expect "domstats: resident set" "$out" "balloon.rss=[1-9][0-9]*"
out=$(v domstats --list-running --vcpu) || fail "domstats --list-running --vcpu: $out"
expect "domstats --list-running lists it" "$out" "Domain: 'demo'"
[ "$(grep -c 'state.state' <<<"$out")" = 0 ] || fail "domstats --vcpu gave more than the vcpu group: $out"
echo "ok: domstats --vcpu gives that group only"
out=$(v domstats --list-shutoff) || fail "domstats --list-shutoff: $out"
grep -q "demo" <<<"$out" && fail "domstats --list-shutoff lists a running domain: $out"
echo "ok: domstats --list-shutoff leaves it out"
out=$(v domstats --block --enforce demo) && fail "domstats --block --enforce: $out"
expect "an unserved group, enforced, is refused by name" "$out" "not served by the vmm driver"

# vmm's own monitor through libvirt's QEMU program, as `virsh qemu-monitor-command` reaches QEMU's:
# a text line, a QMP request answered with the vmm's reply (an error as QEMU words one), the
# migration plan (which libvirt has no call for), and a read-only client refused.
out=$(v qemu-monitor-command demo --hmp 'info status') || fail "qemu-monitor-command --hmp: $out"
expect "qemu-monitor-command --hmp: a line of the text monitor" "$out" "^VM status: running"
out=$(v qemu-monitor-command demo '{"execute":"query-status","id":"t1"}') || fail "qemu-monitor-command: $out"
expect "qemu-monitor-command: the QMP reply" "$out" '"return": ?\{.*"status": ?"running"'
expect "qemu-monitor-command: the request's id echoed" "$out" '"id": ?"t1"'
out=$(v qemu-monitor-command demo --pretty '{"execute":"no-such-command"}') || fail "an unknown QMP command: $out"
expect "a command the vmm lacks: its QMP error" "$out" '"class": "GenericError"'
planned() { out=$(v qemu-monitor-command demo --hmp 'info migrate-plan 16m') && ! grep -q "no measurement yet" <<<"$out"; }
wait_until 30 planned || fail "info migrate-plan through virsh: $out"
expect "the migration plan through virsh" "$out" "over a link of 16 MiB/s \(given\)"
expect "the plan's lines" "$out" "postcopy"
out=$(virsh -r -c "$uri" qemu-monitor-command demo --hmp 'info status' 2>&1) && fail "a read-only client ran a monitor command: $out"
expect "a read-only connection may not" "$out" "read.only|forbidden"
grep -q "custom monitor command from a client (HMP): info status" "$dir/log" || fail "vmmd's log names no monitor command"
echo "ok: vmmd's log names each monitor command"

if /usr/bin/python3 -c 'import libvirt' 2>/dev/null; then
    out=$(/usr/bin/python3 - "$uri" <<'PY' 2>&1
import sys, libvirt
c = libvirt.open(sys.argv[1])
d = c.lookupByName("demo")
info, maps = d.vcpus()
print("vcpus", len(info), [len(m) for m in maps], d.maxVcpus(), d.maxMemory())
print("memory", sorted(d.memoryStats().keys()))
(dom, stats), = c.getAllDomainStats(libvirt.VIR_DOMAIN_STATS_BALLOON | libvirt.VIR_DOMAIN_STATS_STATE)
print("stats", dom.name(), stats["state.state"], stats["balloon.maximum"])
print("cells", len(c.getCellsFreeMemory(0, 1)), c.getFreeMemory() > 0)
PY
) || fail "libvirt-python: $out"
    expect "libvirt-python vcpus(): two, each with a map of every host CPU" "$out" "vcpus 2 \[$(nproc), $(nproc)\] 2 65536"
    expect "libvirt-python memoryStats()" "$out" "memory \['actual', 'rss'\]"
    expect "libvirt-python getAllDomainStats()" "$out" "stats demo 1 65536"
    expect "libvirt-python free memory" "$out" "cells 1 True"
fi

out=$(v destroy demo) || fail "destroy: $out"
out=$(v vcpuinfo demo) || fail "vcpuinfo of a stopped domain: $out"
expect "vcpuinfo of a stopped domain: no live figures" "$out" "CPU time +N/A"
expect "vcpuinfo of a stopped domain: its affinity, every host CPU" "$out" "CPU Affinity: +$(printf 'y%.0s' $(seq "$(nproc)"))"
out=$(v vcpupin demo) || fail "vcpupin (its query): $out"
expect "vcpupin lists both vCPUs' affinity" "$out" " 1 +0-$(($(nproc) - 1))"
