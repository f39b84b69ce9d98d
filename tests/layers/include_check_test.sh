#!/usr/bin/env bash
# Builds a target that includes one header from one layer and checks the outcome the layers give:
#   include_check_test.sh BUILD_DIR TARGET HEADER allowed     passes only if it compiles
#   include_check_test.sh BUILD_DIR TARGET HEADER forbidden   passes only if the compiler refused
#       it because the header is not on that layer's include path (it compiled, or failed for
#       another reason: fails)
set -uo pipefail
build=$1 target=$2 header=$3 want=$4
out=$(cmake --build "$build" --target "$target" 2>&1)
rc=$?
if [ "$want" = allowed ]; then
    if [ "$rc" != 0 ]; then
        echo "FAIL: $target did not compile: $header should be within its layer's reach"
        echo "$out" | tail -20
        exit 1
    fi
    echo "ok: $target includes $header"
    exit 0
fi
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
