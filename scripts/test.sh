#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test this machine can run. Tests that need
# what the machine lacks (e.g. /dev/kvm) skip and say what they need.
#   scripts/test.sh            all labels
#   scripts/test.sh -L unit    any extra arguments go to ctest
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build
log "running the tests"
cd "$BUILD"
ctest --output-on-failure --timeout 600 "$@"
