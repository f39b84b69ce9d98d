#!/usr/bin/env bash
# The main job through libvirt's tools (scripts/demo.sh --virsh): two vmmd on this host stand
# for two hypervisor hosts; stock virsh defines a domain running the stress guest on the first,
# starts it, live-migrates it to the second while it runs, and shows the job's figures on both
# sides and the guest running on at the destination. Every virsh command is printed as run.
#   scripts/demo-virsh.sh        (what scripts/demo.sh --virsh runs)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
if [ -z "${VMM_DEMO_INSIDE:-}" ]; then
    hide_kvm_if_asked "$0" "$@"
    if [ -z "${VMM_DEMO_NO_BUILD:-}" ]; then  # the test of this demo runs it on the build under test
        pkgs=("${VMM_CORE_PACKAGES[@]}" "${VMM_VIRSH_PACKAGES[@]}")
        build_only pkgs vmm vmmctl guest_payloads vmmd
    fi
    no_kvm=0
    kvm_usable || no_kvm=1
    run_nested_if "$no_kvm" "$(why_no_kvm): $NESTED_KVM_WHY" "$ROOT/scripts/demo-virsh.sh" "$@"
fi
stress=64
[ -n "${VMM_DEMO_INSIDE:-}" ] && stress=2  # MiB the guest rewrites: TCG running nested KVM is slow
[ -x "$BUILD/bin/vmmd" ] || die "vmmd was not built: it needs libvirt-dev (apt-get install libvirt-dev)"
command -v virsh >/dev/null || die "virsh is missing: apt-get install libvirt-clients"

work=$(mktemp -d /tmp/vmm-demo-virsh.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    pkill -KILL -f -- "--qmp unix:$work/" 2>/dev/null || true  # domains' vmm outlive vmmd by design
    rm -rf "$work"
}
trap cleanup EXIT
src="vmm+unix:///system?socket=$work/src/sock" dst="vmm+unix:///system?socket=$work/dst/sock"
port=$(( 49152 + RANDOM % 60 ))

run() {  # run WHICH VIRSH-ARGS...: prints the command as a user types it, then runs it
    local which=$1 uri
    shift
    uri=$([ "$which" = source ] && echo "$src" || echo "$dst")
    printf "\033[36m%s$ virsh -c '%s' %s\033[0m\n" "$which" "$uri" "$*"
    virsh -c "$uri" "$@"
}

for side in src dst; do
    log "$side: vmmd --socket $work/$side/sock --state-dir $work/$side/state"
    "$BUILD/bin/vmmd" --socket "$work/$side/sock" --state-dir "$work/$side/state" 2>"$work/$side.log" &
    pids+=($!)
done
for uri in "$src" "$dst"; do
    for _ in $(seq 100); do virsh -c "$uri" uri >/dev/null 2>&1 && break; sleep 0.1; done
    virsh -c "$uri" uri >/dev/null 2>&1 || die "vmmd does not answer at $uri: $(cat "$work"/*.log)"
done

cat >"$work/demo.xml" <<XML
<domain type='vmm'>
  <name>demo</name>
  <memory unit='MiB'>256</memory>
  <vcpu>2</vcpu>
  <os>
    <type>hvm</type>
    <kernel>stress</kernel>
    <cmdline>bytes=${stress}M</cmdline>
  </os>
</domain>
XML
log "a domain running the stress guest (2 vCPUs, 256 MiB, rewriting $stress MiB over and over):"
sed 's/^/    | /' "$work/demo.xml"
run source define "$work/demo.xml"
run source start demo
run source list --all
sleep 2
log "live migration, the guest running all along:"
run source migrate --live --auto-converge --persistent --verbose demo "$dst" \
    --migrateuri "tcp://127.0.0.1:$port"
run source domstate demo --reason
run destination list --all
run source domjobinfo demo --completed
run destination domjobinfo demo --completed

log "the guest runs on at the destination:"
qmp="$work/dst/state/run/$(virsh -c "$dst" domuuid demo).qmp"  # $(): no trailing blank line
first=$("$BUILD/bin/vmmctl" --qmp "unix:$qmp" query-guest 2>&1) || die "query-guest: $first"
steps() { sed -n 's/.*"steps":\([0-9]*\).*/\1/p' <<<"$1"; }
# Until the next step (one rewrites 64 MiB: about two seconds on a loaded 2-core machine), at most 30 s.
for _ in $(seq 60); do
    second=$("$BUILD/bin/vmmctl" --qmp "unix:$qmp" query-guest 2>&1) || die "query-guest: $second"
    [ "$(steps "$second")" -gt "$(steps "$first")" ] && break
    sleep 0.5
done
echo "    guest steps: $(steps "$first") then $(steps "$second")"
[ "$(steps "$second")" -gt "$(steps "$first")" ] || die "the guest does not run at the destination (no step in 30 s)"
run destination destroy demo
log "done"
