#!/usr/bin/env bash
# RDMA migration benchmark: every figure measured side by side in one run on one RDMA device
# (the SoftRoCE nested VM when this machine has none):
#   - ib_write_bw on the same device with the chunk size as message size: the ceiling (in every
#     run, and again just before and just after each migration, whose throughput is also
#     divided by the mean of those two)
#   - our RDMA migration: dynamic registration, rdma-pin-all, 2 channels; our TCP migration
#     (one connection; vmm-tcp-multifd: 2 lanes, and vmm-tcp-multifd-postcopy, the same switching
#     to postcopy after the bulk round, only with --modes)
#   - QEMU's own RDMA migration (dynamic and pin-all) of a guest with the same RAM and workload,
#     and QEMU's own TCP migration (qemu-tcp; qemu-tcp-multifd with --modes) beside our vmm-tcp,
#     paired the same way
#   - our RDMA migration (dynamic, pin-all) of an idle guest whose RAM the host filled: the
#     spec's bulk-round scenario (8 GB in active use, the VM completely idle); like ib_write_bw,
#     they run with nothing beside them: no memory sampler, progress polled once a second
#   - the same dynamic migration with the destination started with --mem-prealloc: its RAM
#     populated before the migration, as ib_write_bw's buffer is before it measures (the
#     "-prealloc" modes)
# The workload, but for -idle, is the pattern payload (it boots under both VMMs): it fills --fill
# bytes of RAM with incompressible per-page data, then only re-checks it, so every mode moves the
# same bytes (-idle: the host fills the same bytes with random data before boot).
# Throughput = RAM transferred / (total time - setup time), from query-migrate, for every mode
# (for QEMU, less also the time its migrate command took: it connects inside it, outside setup);
# downtime as each VMM measures it, and the pause our pattern guest observed itself; the CPU
# each VMM spent beyond its guest's vCPUs while migrating (from /proc, less the vCPU threads).
# Writes build/bench/rdma-DATE.json (figures, query-migrate samples, our round logs) and
# build/bench/rdma-DATE.png (data moved over time, per mode).
#
# --modes picks modes (comma-separated) from those above, "-verify" twins of ours (verify-ram
# on: vmm-rdma-dynamic-verify, vmm-rdma-pin-all-verify, vmm-tcp-verify; their throughput beside
# the same mode's is what verification costs), "-auth" ones (tls-creds at both ends, an
# authenticated migration: vmm-rdma-dynamic-auth, vmm-rdma-pin-all-auth; beside the same mode's
# -verify, what the TLS control channel and keyed sums cost beyond verify-ram's sums), their
# "-stopped" twins (the
# guest paused before migrating: the transport alone, no vCPU competing for the CPU) and, for
# ours, their "-idle" twins, e.g.
#   --modes vmm-rdma-dynamic-stopped,vmm-rdma-pin-all-idle,qemu-rdma-dynamic-stopped
#
# --keep-logs keeps every run's logs (both VMMs', with our source's protocol trace, whose lines
# carry CLOCK_MONOTONIC stamps) in build/bench/rdma-DATE-logs/; a failed run keeps them anyway.
#
# --chunk-sizes LIST (default 2M,1G; "" for none): x-rdma-chunk-size beside the default 1 MiB,
# as modes vmm-rdma-dynamic-chunkSIZE-idle and vmm-rdma-pin-all-chunkSIZE-idle, each beside
# ib_write_bw with writes of its chunk size (at most --fill); the report gives registrations per
# round and the ratio to ib_write_bw for each.
#
#   scripts/bench-rdma.sh [--size 128M] [--fill 96M] [--runs 1] [--no-qemu] [--modes LIST] [--keep-logs] [--chunk-sizes LIST]
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

size=128M fill=96M runs=1 qemu=1 only= keep_logs=0 chunks=2M,1G
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size=$2; shift 2 ;;
        --fill) fill=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --no-qemu) qemu=0; shift ;;
        --modes) only=$2; shift 2 ;;
        --keep-logs) keep_logs=1; shift ;;
        --chunk-sizes) chunks=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;  # the comment block above
        *) die "unknown option $1 (see --help)" ;;
    esac
done

if [ -z "${VMM_BENCH_INSIDE:-}" ]; then
    ensure_packages qemu-system-x86 perftest jq gnuplot-nox
    pkgs=("${VMM_CORE_PACKAGES[@]}" "${VMM_RDMA_PACKAGES[@]}")  # what it runs, not every test and fuzzer
    build_only pkgs vmm vmmctl vmm-memwatch guest_payloads vmm-transport-rdma
    if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
        log "no RDMA device here: the benchmark runs inside the SoftRoCE nested VM"
        # Single-threaded TCG by default, as for the tests: multi-threaded TCG (both emulated
        # cores at once, so two queue pairs run side by side) panicked the nested kernel in
        # KVM_RUN during a run ("corrupted stack end detected inside scheduler");
        # SOFTROCE_TCG_THREAD=multi still selects it.
        exec "$ROOT/scripts/softroce-run.sh" env VMM_BENCH_INSIDE=1 "$ROOT/scripts/bench-rdma.sh" \
            --size "$size" --fill "$fill" --runs "$runs" $([ "$qemu" = 1 ] || echo --no-qemu) \
            ${only:+--modes "$only"} $([ "$keep_logs" = 0 ] || echo --keep-logs) --chunk-sizes "$chunks"
    fi
    [ -n "${VMM_RDMA_ADDR:-}" ] || die "set VMM_RDMA_ADDR to an IPv4 address of this machine's RDMA device"
fi
source "$ROOT/scripts/lib/bench-rdma-lib.sh"

addr=$VMM_RDMA_ADDR
dev=$(ls /sys/class/infiniband | head -1)
out="$BUILD/bench"; mkdir -p "$out"
stamp=$(date -u +%Y%m%d-%H%M%S)
work=$(mktemp -d /tmp/vmm-bench-rdma.XXXXXX)
trap cleanup EXIT
printf '\n\033[1mvmm RDMA migration benchmark\033[0m  %s  device %s at %s, guest %s (%s filled), %s run(s)\n' \
    "$(date -u +%FT%TZ)" "$dev" "$addr" "$size" "$fill" "$runs"
printf '%s, %s cores%s\n' "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" "$(nproc)" \
    "$([ -n "${VMM_BENCH_INSIDE:-}" ] && echo ', inside the SoftRoCE nested VM (TCG): absolute figures say little, compare the ratios')"


modes=(vmm-rdma-dynamic vmm-rdma-pin-all vmm-rdma-2-channels vmm-tcp vmm-rdma-dynamic-idle vmm-rdma-pin-all-idle
       vmm-rdma-dynamic-prealloc-idle)
# x-rdma-chunk-size beside the default 1 MiB (vmm-rdma-*-idle): the idle host-filled guest,
# dynamic and pin-all, at each size of --chunk-sizes.
for c in ${chunks//,/ }; do modes+=("vmm-rdma-dynamic-chunk$c-idle" "vmm-rdma-pin-all-chunk$c-idle"); done
[ "$qemu" = 1 ] && modes+=(qemu-rdma-dynamic qemu-rdma-pin-all qemu-tcp)
if [ -n "$only" ]; then
    IFS=, read -r -a modes <<<"$only"
    ours='vmm-rdma-dynamic|vmm-rdma-dynamic-prealloc|vmm-rdma-pin-all|vmm-rdma-2-channels|vmm-tcp|vmm-tcp-multifd|vmm-tcp-multifd-postcopy'
    ours+='|vmm-rdma-dynamic-verify|vmm-rdma-pin-all-verify|vmm-tcp-verify'  # each has an -idle twin
    ours+='|vmm-rdma-dynamic-auth|vmm-rdma-pin-all-auth'
    for m in "${modes[@]}"; do
        m=$(sed 's/-chunk[0-9]*[MG]-idle$/-idle/' <<<"$m")  # vmm-rdma-*-chunkSIZE-idle: x-rdma-chunk-size SIZE
        [[ "${m%-stopped}" =~ ^($ours|qemu-rdma-dynamic|qemu-rdma-pin-all|qemu-tcp|qemu-tcp-multifd)$ || "${m%-idle}" =~ ^($ours)$ ]] ||
            die "unknown mode '$m' (see --help)"
    done
fi
ceilings=() busy_ceilings=() failed=()
for run in $(seq 1 "$runs"); do
    # The ceiling is measured in every run, next to the migrations it is compared with: on a
    # shared machine the device's speed drifts between runs.
    log "run $run: ceiling: ib_write_bw on $dev, 1 MiB writes (the chunk size)"
    ceilings+=("$(ib_ceiling "$dev" "$addr")")
    echo "   ib_write_bw: ${ceilings[-1]} MB/s"
    log "run $run: ceiling beside a busy core (as the source guest's vCPU keeps one busy)"
    busy_ceilings+=("$(ib_ceiling "$dev" "$addr" busy)")
    echo "   ib_write_bw beside a busy core: ${busy_ceilings[-1]} MB/s"
    before= before_bytes=
    for mode in "${modes[@]}"; do
        bytes=$(message_bytes "$mode")  # ib_write_bw's writes beside it: the mode's chunk size
        [ "$bytes" = "$before_bytes" ] || before=
        # The ceiling again just before and just after each migration: this shared machine's
        # speed drifts within a run too (by 1.5x), and a ratio means most between figures
        # measured back to back; one ib_write_bw alone swings by a quarter, so two are averaged.
        # One migration's "after" is the next one's "before": nothing runs between them.
        [ -n "$before" ] || before=$(ib_ceiling "$dev" "$addr" "" "$bytes")
        before_bytes=$bytes
        log "run $run: $mode (ib_write_bw just before: $before MB/s)"
        # A mode that fails is reported as failed (its reason and logs) beside the others' figures.
        if ! run_mode "$mode" "$run"; then
            jq -r '"   FAILED: \(.reason) (logs: \(.logs))"' "$work/$mode-$run.json"
            failed+=("$mode")
            continue
        fi
        after=$(ib_ceiling "$dev" "$addr" "" "$bytes")
        jq --argjson b "$before" --argjson a "$after" '(($b + $a) / 2) as $c
            | def per_ceiling(x): if x then ((x / $c * 100 | round) / 100) else null end;
            .ceiling_before_mbs = $b | .ceiling_after_mbs = $a
            | .ratio_to_ceiling_around = per_ceiling(.throughput_mbs)
            | .ram_ratio_to_ceiling_around = per_ceiling(.ram_mbs)
            | .bulk_ratio_to_ceiling_around = per_ceiling(.bulk_mbs)' \
            "$work/$mode-$run.json" >"$work/paired.json" && mv "$work/paired.json" "$work/$mode-$run.json"
        jq -r '"   end to end \(.end_to_end_ms) ms from the migrate command (setup \(.setup_ms) ms\(if .command_s > 0.05 then ", of which the command itself \(.command_s * 1000 | round) ms" else "" end)\(if .setup_parts then ": " + .setup_parts else "" end))",
            "   \(.throughput_mbs) MB/s (\(.ratio_to_ceiling_around // "-") of ib_write_bw around it, \(.ceiling_before_mbs) before and \(.ceiling_after_mbs) after; bulk round \(.bulk_mbs // "-") MB/s, \(.bulk_ratio_to_ceiling_around // "-")), total \(.total_ms) ms, downtime \(.downtime_ms) ms, guest-observed \(.guest_pause_ms // "-") ms, guest stall while migrating \(.guest_stall_ms // "-") ms",
            "   CPU beyond the vCPUs: source \(.cpu_s.source) s, destination \(.cpu_s.destination) s; \(.cpu_s_per_gb // "-") s per GB sent",
            (if .downtime_parts then "   downtime parts (ms): \(.downtime_parts | to_entries | map("\(.key) \(.value * 10 | round / 10)") | join(", ")); hand-over estimate \(.handover_estimate_ms // "-") ms" else empty end)' \
            "$work/$mode-$run.json"
        before=$after
    done
done

ceiling=$(printf '%s\n' "${ceilings[@]}" | median)
busy_ceiling=$(printf '%s\n' "${busy_ceilings[@]}" | median)
report "$ceiling" "$out/rdma-$stamp.json" "$busy_ceiling"
chart "$out/rdma-$stamp.json" "$out/rdma-$stamp.png"
log "figures: $out/rdma-$stamp.json; chart: $out/rdma-$stamp.png"
if [ ${#failed[@]} -gt 0 ]; then
    die "$(printf '%s\n' "${failed[@]}" | sort -u | paste -sd, -) failed (the report names why; every other mode's figures stand)"
fi
