#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test, each where it can run: on the host, and
# in the SoftRoCE nested VM (scripts/softroce-run.sh) what needs what the host lacks: an RDMA
# device (label rdma), the kernel's TLS where this kernel has none (label ktls) and, on a machine
# without a usable /dev/kvm, KVM (label kvm). The nested VMs (one per core, the tests shared out
# between them) run beside the host's tests. It ends with where each test passed, what skipped
# and why, and how long each phase took; a test that needs KVM or RDMA and ran nowhere fails the
# command.
#   scripts/test.sh               everything
#   scripts/test.sh -L unit       any arguments go to ctest, on the host only
#   VMM_NO_KVM=1 scripts/test.sh  as on a machine without /dev/kvm (it is hidden: needs root)
#   VMM_SKIP_NESTED=1             no nested VM (what needs it is then reported as not run)
#   VMM_NESTED_VMS=N              nested VMs side by side (default: the number of cores)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
hide_kvm_if_asked "$0" "$@"


# Where each label runs (decided first: the nested VM's packages are installed with the rest,
# once, before anything runs side by side).
host_exclude=() nested_labels=() nested_extra=""
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
    host_exclude+=(rdma) nested_labels+=(rdma)
fi
if ! kernel_tls_usable; then
    log "this kernel has no TLS (modprobe tls): the tests that need it (label ktls) run in the nested VM"
    host_exclude+=(ktls) nested_labels+=(ktls)
fi
if kvm_usable; then
    # The dirty ring is exact only on a stock KVM: its check and the per-vCPU dirty limit's run
    # in the nested VM.
    nested_extra='DirtyTracking.*/ring|DirtyLimitRing\.'
else
    log "$(why_no_kvm): the tests that need KVM (label kvm) run in the nested VM"
    host_exclude+=(kvm) nested_labels+=(kvm)
    # Then each nested VM runs ~125 tests under TCG: 2,100-2,600 s (a6de11e, 2026-12-05), past
    # softroce-run.sh's default limit of 1,800 s for one VM.
    export SOFTROCE_TIMEOUT=${SOFTROCE_TIMEOUT:-3600}
fi
wanted=("${VMM_PACKAGES[@]}")
if [ $# = 0 ] && [ -z "${VMM_SKIP_NESTED:-}" ] && { [ ${#nested_labels[@]} -gt 0 ] || [ -n "$nested_extra" ]; }; then
    wanted+=("${VMM_NESTED_PACKAGES[@]}")
fi
ensure_packages "${wanted[@]}"
phase_done packages
configure
phase_done configure

if [ $# -gt 0 ]; then  # a subset, on the host, as asked
    log "building everything"
    build_targets
    phase_done build
    log "running the tests ($*)"
    rc=0
    (cd "$BUILD" && ctest --output-on-failure --timeout 600 -j"$(nproc)" "$@") || rc=$?
    phase_done "host tests"
    print_phases times
    exit "$rc"
fi

report_dir="$BUILD/test-reports"
rm -rf "$report_dir"
mkdir -p "$report_dir"
allow_unrun=()
[ -n "${VMM_SKIP_NESTED:-}" ] && allow_unrun=(--allow-unrun "VMM_SKIP_NESTED=1")

# Everything but the fuzzers first: the nested VMs (which run no fuzzer) start as soon as that is
# built, and the fuzzers' sub-build (clang, ASan) runs beside them.
log "building everything"
build_targets vmm_all_but_fuzzers
phase_done build
nested_pids=() reports=()
if [ ${#nested_labels[@]} -gt 0 ] || [ -n "$nested_extra" ]; then
    if [ -n "${VMM_SKIP_NESTED:-}" ]; then
        log "VMM_SKIP_NESTED=1: the tests labelled $(IFS='|'; echo "${nested_labels[*]}") run nowhere"
        # Still listed, so that the summary says which ones did not run.
        (cd "$BUILD" && ctest -L "$(IFS='|'; echo "${nested_labels[*]}")" --output-junit "$report_dir/host-unrun.xml" \
            >/dev/null 2>&1) || true
    else
        vms=${VMM_NESTED_VMS:-$(nproc)}
        "$ROOT/scripts/lib/nested-shards.sh" "$vms" "$report_dir" "$(IFS='|'; echo "${nested_labels[*]}")" "$nested_extra"
        for shard in "$report_dir"/shard-*; do
            [ -e "$shard/tests.txt" ] || continue
            n=$(basename "$shard")
            log "nested VM ${n#shard-}: $(wc -l <"$shard/tests.txt") tests, beside the host's (console: $shard/softroce/console.log)"
            SOFTROCE_DIR="$shard/softroce" "$ROOT/scripts/softroce-run.sh" \
                ctest --test-dir "$shard" -I "$(cat "$shard/ids.txt")" --output-on-failure --timeout 900 \
                --output-junit "$shard/junit.xml" >"$shard/output.log" 2>&1 &
            nested_pids+=($!)
            reports+=("nested VM ${n#shard-}=$shard/junit.xml")
        done
    fi
fi

log "building the fuzzers"
build_targets
phase_done "fuzzers"

log "running the tests on the host$([ ${#host_exclude[@]} -gt 0 ] && echo " (but those labelled $(IFS='|'; echo "${host_exclude[*]}"))")"
host_args=(--output-on-failure --timeout 600 -j"$(nproc)" --output-junit "$report_dir/host.xml")
[ ${#host_exclude[@]} -gt 0 ] && host_args+=(-LE "$(IFS='|'; echo "${host_exclude[*]}")")
host_rc=0
(cd "$BUILD" && ctest "${host_args[@]}") || host_rc=$?
phase_done "host tests"
reports=("host=$report_dir/host.xml" "${reports[@]}")
[ -e "$report_dir/host-unrun.xml" ] && reports+=("not run=$report_dir/host-unrun.xml")

nested_rc=0
if [ ${#nested_pids[@]} -gt 0 ]; then
    log "waiting for the nested VMs"
    for i in "${!nested_pids[@]}"; do
        wait "${nested_pids[$i]}" || nested_rc=$?
    done
    for shard in "$report_dir"/shard-*; do
        [ -e "$shard/output.log" ] || continue
        log "nested VM ${shard##*shard-}:"
        # All of it when a test failed there (its own lines say why, and the VM and its files are
        # gone once a fresh root is removed); the last 60 lines otherwise.
        lines=60
        grep -q '^The following tests FAILED' "$shard/output.log" && lines=+1
        grep -vE '^\s*Start +[0-9]+:|^softroce|^\[ *[0-9.]+\]' "$shard/output.log" | sed 's/^/    /' | tail -n "$lines"
    done
    phase_done "nested VM (after the host's tests)"
fi

summary_rc=0
python3 "$ROOT/scripts/lib/test-summary.py" --costs "$BUILD/nested-costs.txt" "${allow_unrun[@]}" "${reports[@]}" ||
    summary_rc=$?
print_phases times
[ "$host_rc" = 0 ] && [ "$nested_rc" = 0 ] && [ "$summary_rc" = 0 ]
