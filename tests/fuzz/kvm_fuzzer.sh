#!/bin/sh
# kvm_fuzzer.sh CORPUS FUZZER [ARGS...]: a fuzzer with a machine under it (vmm_add_fuzzer's
# KVM_RUNS), from the seeds in CORPUS. Skips without /dev/kvm. In the nested VM under TCG an
# input that drives a live VM runs at 2-5 a second, and libFuzzer runs every seed before it looks
# at its time limit (345 seeds: past the test's 180 s): there it takes every eighth seed.
corpus=$1
shift
[ -w /dev/kvm ] || { echo 'SKIP: needs /dev/kvm'; exit 77; }
if [ -n "${VMM_NESTED_TCG:-}" ]; then
    sample=$(mktemp -d)
    trap 'rm -rf "$sample"' EXIT
    n=0
    for f in "$corpus"/*; do
        [ $((n % 8)) = 0 ] && cp "$f" "$sample/"
        n=$((n + 1))
    done
    echo "under TCG (VMM_NESTED_TCG): $(ls "$sample" | wc -l) of the $n seeds"
    "$@" "$sample"
    exit $?
fi
exec "$@" "$corpus"
