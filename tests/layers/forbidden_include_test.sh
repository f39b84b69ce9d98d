#!/usr/bin/env bash
# Builds a target that includes a header from a layer above its own, and passes only if the
# compiler refused it for the reason the layers give: the header is not on that layer's
# include path. Any other outcome (it compiled, or failed for another reason) fails.
#   forbidden_include_test.sh BUILD_DIR TARGET HEADER
set -uo pipefail
build=$1 target=$2 header=$3
out=$(cmake --build "$build" --target "$target" 2>&1)
rc=$?
if [ "$rc" = 0 ]; then
    echo "FAIL: $target compiled: $header is visible from a layer below it"
    exit 1
fi
if ! grep -q "$header: No such file or directory" <<<"$out"; then
    echo "FAIL: $target failed to build, but not because $header is out of its reach:"
    echo "$out" | tail -20
    exit 1
fi
echo "ok: $target cannot include $header"
