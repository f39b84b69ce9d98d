#!/usr/bin/env bash
# vmmctl --qmp against our vmm: commands answer JSON lines, an error answer exits 1, a watch
# follows a migration to its end, a socket that does not exist is an error at once, one behind a
# directory the user may not enter is said to be so. Usage: vmmctl_qmp_test.sh BUILD_DIR
set -euo pipefail
bin=$1/bin
[ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
dir=$(mktemp -d /tmp/vmmctl-qmp.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$dir"' EXIT
port=$(( 18200 + RANDOM % 400 ))  # below the ephemeral ports (tests/vmmd/lib.sh lists the ranges)
"$bin/vmm" -m 64M --incoming "tcp:127.0.0.1:$port" --serial none >"$dir/d.log" 2>&1 & pids+=($!)
"$bin/vmm" -m 64M --guest idle --qmp "unix:$dir/q.sock" --serial none >"$dir/s.log" 2>&1 & pids+=($!)

# A socket that does not exist is said at once (a vmm that is starting is waited for with --wait).
rc=0; timeout 3 "$bin/vmmctl" --qmp "unix:$dir/none.sock" query-status 2>"$dir/err" || rc=$?
[ "$rc" = 1 ] || { echo "vmmctl on a missing socket: exit $rc (124: it waited)"; exit 1; }
grep -q "none.sock does not exist" "$dir/err" || { echo "the error does not say so:"; cat "$dir/err"; exit 1; }
# A socket behind a directory this user may not enter is not called missing (run as nobody, where
# this test runs as root: mktemp's directory is 0700).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$bin/vmmctl"; then
    rc=0; timeout 3 setpriv --reuid=65534 --regid=65534 --clear-groups "$bin/vmmctl" "unix:$dir/q.sock" "info status" 2>"$dir/err" || rc=$?
    [ "$rc" = 1 ] || { echo "vmmctl as nobody behind a closed directory: exit $rc"; cat "$dir/err"; exit 1; }
    grep -q "cannot enter a directory on the way to $dir/q.sock" "$dir/err" || { echo "the error does not say so:"; cat "$dir/err"; exit 1; }
fi
out=$("$bin/vmmctl" --qmp --wait 30 "unix:$dir/q.sock" query-status)
[ "$out" = '{"running":true,"status":"running"}' ] || { echo "query-status answered: $out"; exit 1; }
if "$bin/vmmctl" --qmp "unix:$dir/q.sock" 'no-such-command' 2>"$dir/err"; then echo "an unknown command succeeded"; exit 1; fi
grep -q "no-such-command" "$dir/err" || { echo "the error does not name the command:"; cat "$dir/err"; exit 1; }
"$bin/vmmctl" --qmp "unix:$dir/q.sock" "migrate {\"uri\": \"tcp:127.0.0.1:$port\"}" --watch-migration 50 >"$dir/watch"
tail -1 "$dir/watch" | grep -q '"status":"completed"' || { echo "the watch did not end with completed:"; cat "$dir/watch"; exit 1; }
tail -1 "$dir/watch" | grep -Eq '"total-time":[1-9]' || { echo "the completed record has no total time:"; tail -1 "$dir/watch"; exit 1; }
head -1 "$dir/watch" | grep -q '^{}$' || { echo "the migrate command's answer is missing:"; cat "$dir/watch"; exit 1; }
grep -q '"t":' "$dir/watch" || { echo "watch lines carry no time"; exit 1; }
tail -1 "$dir/watch" | grep -Eq '"x-command-seconds":[0-9]+(\.[0-9]+)?(e-?[0-9]+)?[,}]' ||
    { echo "watch lines do not say how long the migrate command took:"; tail -1 "$dir/watch"; exit 1; }

# The text monitor: a foreground migrate that fails exits 1 and says why on its last line.
"$bin/vmm" -m 64M --guest idle --monitor "unix:$dir/h.sock" --serial none >"$dir/h.log" 2>&1 & pids+=($!)
if "$bin/vmmctl" --wait 30 "unix:$dir/h.sock" "migrate unix:$dir/nobody-listens.sock" >"$dir/hmp-out" 2>&1; then
    echo "vmmctl exited 0 after a failed migration:"; cat "$dir/hmp-out"; exit 1
fi
grep -q '^Error: migration failed: ' "$dir/hmp-out" || { echo "no error line after the failed migration:"; cat "$dir/hmp-out"; exit 1; }
"$bin/vmmctl" "unix:$dir/h.sock" "info status" | grep -q running || { echo "the source does not run on"; exit 1; }
echo "ok: $(wc -l <"$dir/watch") lines watched; a failed foreground migrate exits 1"
