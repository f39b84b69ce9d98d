#!/usr/bin/env bash
# scripts/lib/common.sh's package installs, against a stand-in apt-get and dpkg-query (nothing is
# installed): two callers at once install a missing package once, the second finding it there;
# apt's lock held by another process is waited for, within the limit and not past it; any other
# apt failure is returned at once with its message.
#   apt_waiting_test.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
: >"$work/installed"
# dpkg-query -W -f=... PKG: "install ok installed" for what $work/installed lists.
cat >"$work/bin/dpkg-query" <<EOF
#!/bin/sh
for p; do :; done
grep -qx "\$p" "$work/installed" && printf 'install ok installed'
exit 0
EOF
# apt-get: each call logged; update succeeds; install takes a second, then marks its packages.
# \$FAKE_APT_LOCKED calls first fail as when another process holds apt's lock.
cat >"$work/bin/apt-get" <<EOF
#!/bin/bash
echo "\$*" >>"$work/calls"
n=\$(wc -l <"$work/calls")
if [ "\$n" -le "\${FAKE_APT_LOCKED:-0}" ]; then
    echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2; exit 100
fi
[ "\${FAKE_APT_FAIL:-}" = 1 ] && { echo "E: Unable to locate package vmm-no-such-package" >&2; exit 100; }
[ "\$1" = update ] && exit 0
sleep 1
for a; do case "\$a" in -*|install|-o|DPkg::*) ;; *) echo "\$a" >>"$work/installed" ;; esac; done
EOF
chmod +x "$work/bin/"*
export PATH="$work/bin:$PATH" VMM_APT_LOCK="$work/lock" VMM_APT_RETRY_S=0.2
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (ensure_packages runs apt-get without sudo only as root)"; exit 77; }
source "$src/scripts/lib/common.sh"
fail() { echo "FAIL: $*"; exit 1; }

# Two callers at once, one missing package: installed once, both succeed.
( ensure_packages vmm-fake-pkg ) 2>"$work/a.err" & a=$!
( ensure_packages vmm-fake-pkg ) 2>"$work/b.err" & b=$!
wait "$a" || fail "the first caller failed: $(cat "$work/a.err")"
wait "$b" || fail "the second caller failed: $(cat "$work/b.err")"
installs=$(grep -c '^install' "$work/calls" || true)
[ "$installs" = 1 ] || fail "two callers ran $installs installs (want 1): $(cat "$work/calls")"
grep -qx vmm-fake-pkg "$work/installed" || fail "the package was not installed"

# apt's lock held by another process for two tries: waited for, then the install goes through.
: >"$work/calls"
out=$(FAKE_APT_LOCKED=2 ensure_packages vmm-other-pkg 2>&1) || fail "a held lock was not waited for: $out"
grep -q "another process holds apt's lock: waiting for it (held by process 4242" <<<"$out" ||
    fail "the wait was not said: $out"
[ "$(wc -l <"$work/calls")" = 4 ] || fail "want 2 refused and 2 done apt calls: $(cat "$work/calls")"

# Held past the limit: fails, naming apt's own line.
: >"$work/calls"
if out=$(FAKE_APT_LOCKED=1000 apt_waiting 1 apt-get update 2>&1); then fail "a lock held past the limit passed"; fi
grep -q "Could not get lock" <<<"$out" || fail "apt's reason was not shown: $out"

# Any other failure: at once, with apt's message.
: >"$work/calls"
if out=$(FAKE_APT_FAIL=1 apt_waiting 60 apt-get install -y vmm-no-such-package 2>&1); then fail "a failed install passed"; fi
[ "$(wc -l <"$work/calls")" = 1 ] || fail "a failure that is not the lock was retried: $(cat "$work/calls")"
grep -q "Unable to locate package vmm-no-such-package" <<<"$out" || fail "apt's message was not shown: $out"
echo "ok: one install for two callers; a held lock waited for within the limit and not past it; other failures at once"
