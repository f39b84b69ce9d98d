#!/usr/bin/env bash
# The switchover is a commit through vmmd too (label libvirt): stock virsh live-migrates a vmm
# domain back and forth between two vmmd while the migrating vmm cuts its own link after one step
# of the hand-over, a different step each time (x-switchover-cut: 1 after the device state, 2
# after the destination's READY, 3 after GO, 4 after the destination's RUNNING), as a network
# failing right there would. Each time `virsh migrate --live` completes with no client action
# (vmm settles the hand-over over a new connection; vmmd's Perform, Finish and Confirm wait for
# it), the guest runs in exactly one place, the vmmd it moved to, its memory whole (the pattern
# guest checks its own), and the vmmd it left has no vmm and no domain.
#   virsh_switchover_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build"
start_destination "$build"
qmp() { domain_qmp "$build/bin/vmmctl" "$@"; }  # qmp STATE DOMAIN COMMAND
port=$((18600 + RANDOM % 190))
vmms_of() { pgrep -f -- "--qmp unix:$dir/$1/run/"; }  # vmms_of STATE: the vmm processes that vmmd runs
no_vmm() { [ -z "$(vmms_of "$1")" ]; }

pattern_domain "$dir/demo.xml"
out=$(v create "$dir/demo.xml") || fail "create: $out"  # transient: it moves whole each way

# cut_and_move STEP FROM TO: migrates demo from the vmmd with state dir FROM to the one with TO,
# its vmm cutting the link after STEP; then checks where the guest runs.
cut_and_move() {
    local step=$1 from=$2 to=$3 from_uri to_uri
    if [ "$from" = state ]; then from_uri=$uri to_uri=$duri; else from_uri=$duri to_uri=$uri; fi
    # A destination whose source's DONE was lost (step 4) waits out the window: a short one here,
    # as the destination takes the source's.
    out=$(qmp "$from" demo "migrate-set-parameters {\"x-switchover-cut\":$step,\"x-resume-window\":3000}") ||
        fail "step $step: setting the cut: $out"
    port=$((port + 1))
    out=$(virsh -c "$from_uri" migrate --live demo "$to_uri" --migrateuri "tcp://127.0.0.1:$port" 2>&1) ||
        fail "step $step: virsh migrate failed: $out"
    grep -q "x-switchover-cut $step: cutting" "$dir/$from"/log/*.log ||
        fail "step $step: the vmm did not cut its link (its log says no 'x-switchover-cut $step: cutting')"
    expect "step $step: the guest runs where it moved" "$(virsh -c "$to_uri" domstate demo 2>&1)" "^running"
    wait_until 60 no_vmm "$from" || fail "step $step: a vmm is left where the guest was: $(vmms_of "$from")"
    out=$(virsh -c "$from_uri" domstate demo 2>&1) && fail "step $step: the domain is still where it was: $out"
    guest_runs_clean "$build/bin/vmmctl" "$to"
    echo "ok: cut after step $step: one copy, at $to, its memory whole"
}

cut_and_move 1 state dstate
cut_and_move 2 dstate state
cut_and_move 3 state dstate
cut_and_move 4 dstate state
