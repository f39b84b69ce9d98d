#!/usr/bin/env bash
# The main job: live-migrate a running guest. A stress guest (2 vCPUs, 256 MiB, rewriting
# 64 MiB over and over) runs in one vmm; a second vmm waits with --incoming; `migrate` on the
# source's monitor moves the guest across while it runs, with a live progress bar and the
# final statistics. Then the two RAM digests are compared and the guest runs on at the
# destination.
#   scripts/demo.sh            over TCP on loopback
#   scripts/demo.sh --rdma     over RDMA: this machine's RDMA device (address in $VMM_RDMA_ADDR),
#                              or, without one, the same demo inside the SoftRoCE nested VM
#   scripts/demo.sh --virsh    the same through stock virsh and two vmmd (scripts/demo-virsh.sh)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
rdma=0
case "${1:-}" in
    --rdma) rdma=1 ;;
    --virsh) exec bash "$(dirname "$0")/demo-virsh.sh" ;;
    "") ;;
    *) die "unknown option $1 (scripts/demo.sh [--rdma | --virsh])" ;;
esac
if [ -z "${VMM_DEMO_INSIDE:-}" ]; then
    hide_kvm_if_asked "$0" "$@"
    if [ -z "${VMM_DEMO_NO_BUILD:-}" ]; then  # the test of this demo runs it on the build under test
        if [ "$rdma" = 1 ]; then
            pkgs=("${VMM_CORE_PACKAGES[@]}" "${VMM_RDMA_PACKAGES[@]}")
            build_only pkgs vmm vmmctl guest_payloads vmm-transport-rdma
        else
            build_only VMM_CORE_PACKAGES vmm vmmctl guest_payloads
        fi
    fi
    no_rdma=0 no_kvm=0
    [ "$rdma" = 1 ] && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ] && no_rdma=1
    kvm_usable || no_kvm=1
    run_nested_if "$no_rdma" "no RDMA device here: the demo runs inside the SoftRoCE nested VM (SoftRoCE under TCG: ~20 MB/s)" \
        "$ROOT/scripts/demo.sh" "$@"
    run_nested_if "$no_kvm" "$(why_no_kvm): $NESTED_KVM_WHY" "$ROOT/scripts/demo.sh" "$@"
fi

work=$(mktemp -d /tmp/vmm-demo.XXXXXX)
port=$(( 28000 + RANDOM % 4000 ))  # below the kernel's ephemeral ports (32768 up), which an outgoing connection may hold
uri="tcp:127.0.0.1:$port" stress=64M
if [ "$rdma" = 1 ]; then
    [ -n "${VMM_RDMA_ADDR:-}" ] || die "set VMM_RDMA_ADDR to an IPv4 address of this machine's RDMA device"
    uri="rdma:$VMM_RDMA_ADDR:$port"
fi
# In the nested VM (TCG running nested KVM; SoftRoCE moves 10-20 MB/s there) a guest rewriting
# 2 MiB converges.
[ -n "${VMM_DEMO_INSIDE:-}" ] && stress=2M
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
src="unix:$work/src.sock" dst="unix:$work/dst.sock"

ctl() {  # ctl WHICH COMMAND...
    local which=$1; shift
    printf '\033[36m%s (vmm) %s\033[0m\n' "$which" "$*"
    "$BUILD/bin/vmmctl" "$([ "$which" = source ] && echo "$src" || echo "$dst")" "$*"
}

log "destination: vmm -m 256M --smp 2 --incoming $uri -S"
"$BUILD/bin/vmm" -m 256M --smp 2 --incoming "$uri" -S --monitor "$dst" \
    --serial "file:$work/dst.serial" 2>"$work/dst.log" &
pids+=($!)
log "source: vmm --guest stress -m 256M --smp 2 --append bytes=$stress"
"$BUILD/bin/vmm" --guest stress -m 256M --smp 2 --append "bytes=$stress" --monitor "$src" \
    --serial "file:$work/src.serial" 2>"$work/src.log" &
pids+=($!)
wait_for_monitor "${pids[0]}" "$work/dst.sock" "$work/dst.log"
wait_for_monitor "${pids[1]}" "$work/src.sock" "$work/src.log"
for _ in $(seq 100); do [ -s "$work/src.serial" ] && break; sleep 0.1; done  # its first line
sleep 1  # a second of it, for the dirty-rate sampler
log "the guest runs on the source:"
sed 's/^/    | /' "$work/src.serial"
ctl source info status
ctl source info dirty-rate
ctl destination info status

# Should the guest dirty memory faster than the link drains it, auto-converge throttles its
# vCPUs until what is left fits in downtime-limit (with the hand-over the destination
# rehearsed). Without it a demo under SoftRoCE and TCG, where each 2 MiB round takes about as
# long as the limit allows, once ran 975 rounds (7 minutes) before a lucky one converged.
log "auto-converge on: if the guest dirties RAM faster than the link moves it, its vCPUs are slowed"
ctl source migrate_set_capability auto-converge on
log "live migration, the guest running all along:"
ctl source migrate "$uri"
ctl source info migrate-rounds
ctl source info status
ctl destination info status

log "RAM digests (source at the pause, destination before it runs):"
ctl source info ramhash | tee "$work/h1"
ctl destination info ramhash | tee "$work/h2"
tail -n +2 "$work/h1" >"$work/d1"
tail -n +2 "$work/h2" >"$work/d2"  # files, not <(...): the nested VM has no /dev/fd
if cmp -s "$work/d1" "$work/d2"; then log "identical"; else die "the RAM differs"; fi

log "the guest runs on at the destination:"
ctl destination cont
sleep 2
ctl destination info guest
tail -n 2 "$work/dst.serial" | sed 's/^/    | /'
ctl destination quit >/dev/null
ctl source quit >/dev/null
wait
pids=()
log "done"
