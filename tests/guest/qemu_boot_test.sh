#!/usr/bin/env bash
# The payloads boot under QEMU too (multiboot, TCG), so one workload can run under both VMMs.
# usage: qemu_boot_test.sh GUEST_DIR PAYLOAD PARAMS EXPECTED_TEXT
set -euo pipefail
guest_dir=$1 payload=$2 params=$3 expected=$4
qemu=$(command -v qemu-system-x86_64 || true)
if [ -z "$qemu" ]; then
    echo "SKIP: needs qemu-system-x86_64 (Debian package qemu-system-x86)"
    exit 77
fi
serial=$(mktemp)
trap 'rm -f "$serial"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true' EXIT
timeout 120 "$qemu" -accel tcg -m 128M -display none -monitor none -nic none -no-reboot \
    -kernel "$guest_dir/$payload.elf" -append "$params" -serial "file:$serial" &
pid=$!
for _ in $(seq 1 600); do
    if grep -q "$expected" "$serial"; then
        echo "QEMU booted $payload: $(grep -m1 "$expected" "$serial")"
        exit 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
done
echo "FAIL: '$expected' never appeared on $payload's serial console under QEMU; it printed:"
cat "$serial"
exit 1
