#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test this machine can run. Tests that need
# what the machine lacks (e.g. /dev/kvm) skip and say what they need.
#   scripts/test.sh            all labels
#   scripts/test.sh -L unit    any extra arguments go to ctest
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build
log "running the tests"
(cd "$BUILD" && ctest --output-on-failure --timeout 600 "$@")

# RDMA (and nested KVM, with a stock kernel) where this machine has no RDMA device: the same
# ctest inside the SoftRoCE nested VM (scripts/softroce-run.sh), whenever QEMU and a kernel
# can be installed. VMM_SKIP_NESTED=1 leaves it out.
if [ $# -eq 0 ] && [ -z "${VMM_SKIP_NESTED:-}" ]; then
    if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
        log "this machine has an RDMA device: the rdma tests ran above"
    else
        log "running the rdma and kvm tests inside the SoftRoCE nested VM (adds 5-10 minutes)"
        "$ROOT/scripts/softroce-run.sh" ctest --test-dir "$BUILD" -L 'rdma|kvm' --output-on-failure --timeout 900
    fi
fi
