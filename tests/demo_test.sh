#!/usr/bin/env bash
# The README's main command keeps working: scripts/demo.sh (with the build under test) migrates
# the running stress guest, finds both RAM digests identical and sees the guest run on.
# Usage: demo_test.sh SOURCE_DIR BUILD_DIR [rdma | virsh]
#   with virsh: scripts/demo.sh --virsh, the same through stock virsh and two vmmd
#   without rdma: over TCP on loopback (the README's main command)
#   with rdma: scripts/demo.sh --rdma on this machine's RDMA device ($VMM_RDMA_ADDR); in the
#   SoftRoCE nested VM, where scripts/test.sh runs the rdma tests, with the demo's small guest
set -euo pipefail
[ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
# Inside the nested VM (softroce-inside.sh sets VMM_NESTED_TCG) the demo sizes its guest for
# KVM nested under TCG, as it does when it boots that VM itself.
[ -z "${VMM_NESTED_TCG:-}" ] || export VMM_DEMO_INSIDE=1
args=() want_uri="migrate tcp:"
if [ "${3:-}" = virsh ]; then
    command -v virsh >/dev/null && [ -x "$2/bin/vmmd" ] || { echo "SKIP: needs virsh and vmmd (libvirt-clients, libvirt-dev)"; exit 77; }
    out=$(VMM_DEMO_NO_BUILD=1 VMM_BUILD_DIR="$2" bash "$1/scripts/demo.sh" --virsh 2>&1) ||
        { echo "$out"; echo "the demo failed"; exit 1; }
    for want in "migrate --live" "Migration: [100 %]" "shut off (migrated)" "Operation:        Outgoing migration" \
                "Operation:        Incoming migration" "==> done"; do
        grep -qF -- "$want" <<<"$out" || { echo "$out"; echo "the demo never said: $want"; exit 1; }
    done
    echo "ok: $(echo "$out" | grep -m1 'guest steps')"
    exit 0
fi
if [ "${3:-}" = rdma ]; then
    [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] && [ -n "${VMM_RDMA_ADDR:-}" ] || {
        echo "SKIP: needs an RDMA device and its IPv4 address in VMM_RDMA_ADDR (scripts/test.sh runs this in the SoftRoCE nested VM)"
        exit 77
    }
    args=(--rdma) want_uri="migrate rdma:$VMM_RDMA_ADDR:"
fi
out=$(VMM_DEMO_NO_BUILD=1 VMM_BUILD_DIR="$2" bash "$1/scripts/demo.sh" "${args[@]}" 2>&1) ||
    { echo "$out"; echo "the demo failed"; exit 1; }
for want in "$want_uri" "Migration status: completed" "==> identical" "==> done"; do
    grep -qF -- "$want" <<<"$out" || { echo "$out"; echo "the demo never said: $want"; exit 1; }
done
grep -qE '^(steps|results): [1-9]' <<<"$out" || { echo "$out"; echo "no guest progress shown at the destination"; exit 1; }
echo "ok: $(echo "$out" | grep -m1 '^total time')"
