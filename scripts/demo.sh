#!/usr/bin/env bash
# The main job, for now: boot a stress guest (2 vCPUs, 256 MiB, rewriting 64 MiB) and drive it
# from its monitor: status, dirty pages growing while it runs and frozen while it is stopped,
# the guest's own reports, RAM digests, then quit. (Live migration joins with the next issue.)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build

sock="$(mktemp -u /tmp/vmm-demo.XXXXXX.sock)"
serial="$(mktemp /tmp/vmm-demo-serial.XXXXXX)"
cleanup() { [ -n "${vmm_pid:-}" ] && kill "$vmm_pid" 2>/dev/null; rm -f "$serial"; }
trap cleanup EXIT

log "starting: vmm --guest stress -m 256M --smp 2 --monitor unix:$sock --append bytes=64M"
"$BUILD/bin/vmm" --guest stress -m 256M --smp 2 --monitor "unix:$sock" --append "bytes=64M" \
    --serial "file:$serial" &
vmm_pid=$!

ctl() {
    printf '\033[36m(vmm) %s\033[0m\n' "$*"
    "$BUILD/bin/vmmctl" "unix:$sock" "$*"
}

sleep 2
log "guest serial output so far:"
sed 's/^/    | /' "$serial"
ctl info status
ctl info ramblocks
sleep 2
log "two seconds later the guest has dirtied more pages:"
ctl info ramblocks
ctl info dirty-rate
ctl stop
ctl info status
ctl info ramblocks
sleep 2
log "stopped for two seconds: nothing was dirtied"
ctl info ramblocks
ctl cont
ctl info status
ctl info guest
ctl info ramhash
ctl quit
wait "$vmm_pid"
status=$?
vmm_pid=""
log "guest serial output (last lines):"
tail -n 3 "$serial" | sed 's/^/    | /'
log "vmm exited with status $status"
