#!/usr/bin/env bash
# VMM_NO_KVM=1 takes the path of a machine without KVM on one that has it: scripts/lib/common.sh hides
# /dev/kvm in a private mount namespace (the demo and the test command then go to the nested
# VM). There a vmm says in its own line why it cannot start, and the demo's wait_for_monitor
# shows that line, not a client's "no such socket"; outside, /dev/kvm is untouched.
#   no_kvm_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] && unshare -m --propagation private true 2>/dev/null ||
    { echo "SKIP: hiding a device needs root and unshare -m"; exit 77; }
[ -e /dev/kvm ] || { echo "SKIP: nothing to hide: this machine itself takes that path"; exit 77; }
work=$(mktemp -d /tmp/vmm-no-kvm-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat >"$work/inner.sh" <<'INNER'
source "$SRC/scripts/lib/common.sh"
hide_kvm_if_asked "$0" "$@"
! kvm_usable || { echo "FAIL: kvm_usable says yes"; exit 1; }
! [ -w /dev/kvm ] || { echo "FAIL: /dev/kvm is still writable in here"; exit 1; }
echo "why: $(why_no_kvm)"
"$BUILD/bin/vmm" --guest idle -m 64M --monitor "unix:$WORK/m.sock" 2>"$WORK/vmm.log" &
pid=$!
wait_for_monitor $pid "$WORK/m.sock" "$WORK/vmm.log"
kill $pid
echo "FAIL: a vmm started without KVM"
INNER
out=$(VMM_NO_KVM=1 SRC="$src" VMM_BUILD_DIR="$build" WORK="$work" bash "$work/inner.sh" 2>&1)
grep -q "^why: VMM_NO_KVM=1 hides /dev/kvm$" <<<"$out" || fail "no reason given: $out"
grep -q "^error: vmm did not start: .*open /dev/kvm: " <<<"$out" || fail "the vmm's own error was not shown: $out"
! grep -q "^FAIL" <<<"$out" || fail "$out"
[ -w /dev/kvm ] || [ -n "${VMM_KVM_HIDDEN:-}" ] || fail "/dev/kvm is hidden outside the namespace too"
echo "ok: $(grep '^error:' <<<"$out")"
