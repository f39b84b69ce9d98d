#!/usr/bin/env bash
# The README's main command keeps working: scripts/demo.sh (over TCP, with the build under test)
# migrates the running stress guest, finds both RAM digests identical and sees the guest run on.
# Usage: demo_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
[ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
out=$(VMM_DEMO_NO_BUILD=1 VMM_BUILD_DIR="$2" bash "$1/scripts/demo.sh" 2>&1) || { echo "$out"; echo "the demo failed"; exit 1; }
for want in "Migration status: completed" "==> identical" "==> done"; do
    echo "$out" | grep -qF "$want" || { echo "$out"; echo "the demo never said: $want"; exit 1; }
done
echo "$out" | grep -qE '^(steps|results): [1-9]' || { echo "$out"; echo "no guest progress shown at the destination"; exit 1; }
echo "ok: $(echo "$out" | grep -m1 '^total time')"
