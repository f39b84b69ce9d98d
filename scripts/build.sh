#!/usr/bin/env bash
# Installs what is missing and builds vmm, vmmctl, the guest payloads and the tests into build/.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
build
log "built: $BUILD/bin/vmm, $BUILD/bin/vmmctl, payloads in $BUILD/guest/"
