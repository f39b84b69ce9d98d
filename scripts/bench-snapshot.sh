#!/usr/bin/env bash
# Snapshot benchmark: saving a guest to a file and restoring it, each figure beside what the file
# system itself does with the same bytes, measured side by side in this one run:
#   save     a host-filled (incompressible) guest of --size saved with 'migrate file:' (rounds,
#            device state, fsync, rename: vmm's 'total time') against dd writing the saved
#            file's bytes to a new file on the same file system (conv=fdatasync): ratio dd / vmm
#   restore  the file restored by 'vmm --incoming file:' with x-restore-lazy off (every page read
#            and checked against its sum before the guest runs: the destination's 'total time')
#            against dd reading the same file: ratio; and against a plain program reading the same file
#            into fresh anonymous memory on one thread (python's mmap and readinto)
#   mapped   the same file restored with x-restore-mapped (mapped, checked in the background): the
#            time to a guest ready to run
#   lazy     the same file restored lazily (the default; the guest runs at once, its pages brought
#            in through userfaultfd as it touches them, the rest in file order): the time to a
#            running guest and to the last page in; then a stress guest rewriting 64 MiB restored
#            lazily: how long its vCPU was blocked on faults (postcopy blocktime) and their latency
#   sparse   idle guests of --size and --big (16G) that touched little: the file's size on disk
#            and the times, which must follow what the guest touched, not its RAM size
#   qemu     QEMU 7.2 saving the same kind of guest (its RAM a /dev/shm file filled from the host
#            with as many random bytes, the guest stopped first, as virsh save does) with
#            'migrate exec:cat > FILE' (7.2 has no file: migration) and restoring it with
#            'migrate-incoming exec:cat FILE': its save's own total-time, the same until cat has
#            written the last byte and the file is fsynced (as ours), and its restore from the
#            command to a loaded guest, beside ours (--no-qemu leaves it out)
# Both sides read and write through the page cache as it is after the save (no cache dropped).
#
#   scripts/bench-snapshot.sh [--size 1G] [--big 16G] [--runs 3] [--dir DIR] [--no-qemu]
#   VMM_BENCH_VMM=OTHER/bin/vmm scripts/bench-snapshot.sh ...   (another build's vmm, to compare two)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

size=1G big=16G runs=3 dir= qemu=1
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size=$2; shift 2 ;;
        --big) big=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --no-qemu) qemu=0; shift ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
build
[ "$qemu" = 0 ] || ensure_packages qemu-system-x86
# VMM_BENCH_VMM: another build's vmm in place of this one's (two builds compared side by side).
VMM="${VMM_BENCH_VMM:-$BUILD/bin/vmm}" CTL="$BUILD/bin/vmmctl"
work=$(mktemp -d "${dir:-/var/tmp}/vmm-snap.XXXXXX")
shm=$(mktemp -d /dev/shm/vmm-snap.XXXXXX)  # QEMU's guest RAM, filled from here
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$work" "$shm"; }
trap cleanup EXIT

field() { awk -v k="$1: " 'index($0, k) == 1 && !done { s = substr($0, length(k) + 1); sub(/ .*/, "", s); print s; done = 1 }'; }
ms_of() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }
bytes=$(numfmt --from=iec "$size")

# save_once NAME ARGS...: a guest of $size started with ARGS, saved to $work/NAME.save, paused (or
# running, with SAVE_LIVE=1: it runs again once restored); sets S_MS.
save_once() {
    local name=$1; shift
    "$VMM" -m "$size" --smp 1 --monitor "unix:$work/$name.sock" --serial none "$@" >"$work/$name.log" 2>&1 &
    pids+=("$!")
    local first=stop
    [ -n "${SAVE_LIVE:-}" ] && first="info status"
    "$CTL" --wait 30 "unix:$work/$name.sock" "$first" >/dev/null || { cat "$work/$name.log" >&2; die "save $name: vmm did not start"; }
    local out; out=$("$CTL" "unix:$work/$name.sock" "migrate file:$work/$name.save") || { cat "$work/$name.log" >&2; die "save $name: vmm ended"; }
    echo "$out" | grep -q "Migration status: completed" || { echo "$out" >&2; cat "$work/$name.log" >&2; die "save $name failed"; }
    S_MS=$("$CTL" "unix:$work/$name.sock" "info migrate" | field "total time")
    "$CTL" "unix:$work/$name.sock" quit >/dev/null 2>&1 || true
}

# restore_once NAME [read|mapped|lazy] [SIZE]: $work/NAME.save restored into a fresh vmm (read first,
# with x-restore-lazy off; mapped with x-restore-mapped; or lazily, the default, the guest running
# at once; a socket and log of its own: one quit a moment ago may still be listening); sets R_MS, the
# destination's total time (file opened to guest ready to run; lazy: to its last page in), and
# R_INFO, its info migrate.
restore_once() {
    local name=$1 how=${2:-read} mem=${3:-$size}
    local paused=-S caps
    case "$how" in
        read) caps=("migrate_set_capability x-restore-lazy off") ;;
        mapped) caps=("migrate_set_capability x-restore-mapped on") ;;
        lazy) caps=("migrate_set_capability x-restore-lazy on") paused= ;;  # the guest runs at once
    esac
    "$VMM" -m "$mem" --smp 1 $paused --incoming defer --monitor "unix:$work/$name-$how.sock" --serial none \
        >"$work/$name-$how.log" 2>&1 &
    pids+=("$!")
    "$CTL" --wait 30 "unix:$work/$name-$how.sock" "${caps[@]}" "migrate_incoming file:$work/$name.save" >/dev/null ||
        { cat "$work/$name-$how.log" >&2; die "restore $name ($how): the destination vmm did not take the file"; }
    local st=""
    for _ in $(seq 600); do
        st=$("$CTL" --wait 30 "unix:$work/$name-$how.sock" "info migrate" 2>/dev/null | field "Migration status") || true
        [ "$st" = completed ] || [ "$st" = failed ] && break
        sleep 0.05
    done
    [ "$st" = completed ] || { cat "$work/$name-$how.log" >&2; die "restore $name: $st"; }
    R_INFO=$("$CTL" "unix:$work/$name-$how.sock" "info migrate")
    R_MS=$(field "total time" <<<"$R_INFO")
    "$CTL" "unix:$work/$name-$how.sock" quit >/dev/null 2>&1 || true
}
ready_of() { field "lazy restore ready" <<<"$1"; }
# read_into_fresh_ram FILE: ms for python to read FILE into newly mapped anonymous memory on one
# thread, 8 MiB a read (the kernel zeroes each page first, where dd reads into one buffer it reuses).
# Not a floor: vmm's own read restore, which makes each piece's pages in one call, is faster.
read_into_fresh_ram() {
    python3 - "$1" <<'PY'
import mmap, os, sys, time
size = os.path.getsize(sys.argv[1])
t0 = time.monotonic()
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
view, at = memoryview(m), 0
with open(sys.argv[1], "rb", buffering=0) as f:
    while at < size:
        n = f.readinto(view[at:at + (8 << 20)])
        if not n:
            break
        at += n
print(f"{(time.monotonic() - t0) * 1000:.1f}")
view.release()
PY
}
source "$(dirname "$0")/lib/bench-snapshot-qemu.sh"

printf '\n\033[1mvmm snapshot benchmark\033[0m  %s  %s, %s cores, file system %s\n' "$(date -u +%FT%TZ)" \
    "$(uname -r)" "$(nproc)" "$(df --output=fstype "$work" | tail -1)"
log "host-filled $size guest, $runs run(s): save and restore, each beside dd on the same bytes"
save_ratios=() restore_ratios=() saves=() restores=() dd_w=() dd_r=() mapped=() lazy_ready=() lazy_all=()
q_save=() q_synced=() q_restore=() q_save_ratios=() q_restore_ratios=() fresh_reads=() fresh_ratios=()
# This machine's kernel reports free pages to its hypervisor (virtio-balloon free page reporting),
# so RAM freed a moment ago can cost a fault in the hypervisor when touched again: restoring into
# fresh RAM swings 0.45-2.6 s for one file here. Ours and QEMU's go side by side, their order
# swapped every other run, so that neither always takes the other's freed memory.
ours_save() { save_once "filled$i" --guest idle --prefill "$size"; }
ours_restore() { restore_once "filled$i"; read_ms=$R_MS; }
qemu_save() { [ "$qemu" = 0 ] || qemu_save_once "q$i"; }
qemu_restore() { [ "$qemu" = 0 ] || qemu_restore_once "q$i"; }
for i in $(seq "$runs"); do
    if ((i % 2)); then ours_save; qemu_save; else qemu_save; ours_save; fi
    t0=$(date +%s%N)
    dd if="$work/filled$i.save" of="$work/dd$i.out" bs=4M conv=fdatasync status=none
    t1=$(date +%s%N)
    w=$(ms_of "$t0" "$t1")
    rm -f "$work/dd$i.out"
    if ((i % 2)); then ours_restore; qemu_restore; else qemu_restore; ours_restore; fi
    t0=$(date +%s%N)
    dd if="$work/filled$i.save" of=/dev/null bs=4M status=none
    t1=$(date +%s%N)
    r=$(ms_of "$t0" "$t1")
    fresh_r=$(read_into_fresh_ram "$work/filled$i.save")
    restore_once "filled$i" mapped
    mapped+=("$R_MS")
    restore_once "filled$i" lazy
    lazy_ready+=("$(ready_of "$R_INFO")") lazy_all+=("$R_MS")
    printf '  run %d: save %s ms (dd write %s ms), restore %s ms (dd read %s ms, into fresh RAM %s ms), mapped restore %s ms, lazy restore: running after %s ms, all in after %s ms\n' \
        "$i" "$S_MS" "$w" "$read_ms" "$r" "$fresh_r" "${mapped[-1]}" "${lazy_ready[-1]}" "$R_MS"
    R_MS=$read_ms
    saves+=("$S_MS") restores+=("$R_MS") dd_w+=("$w") dd_r+=("$r")
    save_ratios+=("$(awk -v a="$w" -v b="$S_MS" 'BEGIN { printf "%.2f", a / b }')")
    restore_ratios+=("$(awk -v a="$r" -v b="$R_MS" 'BEGIN { printf "%.2f", a / b }')")
    fresh_reads+=("$fresh_r") fresh_ratios+=("$(awk -v a="$fresh_r" -v b="$R_MS" 'BEGIN { printf "%.2f", a / b }')")
    rm -f "$work/filled$i.save"
    [ "$qemu" = 1 ] || continue
    q_save+=("$QS_MS") q_synced+=("$QS_SYNCED_MS") q_restore+=("$QR_MS")
    q_save_ratios+=("$(awk -v a="$QS_SYNCED_MS" -v b="$S_MS" 'BEGIN { printf "%.2f", a / b }')")
    q_restore_ratios+=("$(awk -v a="$QR_MS" -v b="$R_MS" 'BEGIN { printf "%.2f", a / b }')")
    printf '  run %d: QEMU 7.2 save %s ms (its total-time; %s ms to the file fsynced), restore %s ms (%s)\n' \
        "$i" "$QS_MS" "$QS_SYNCED_MS" "$QR_MS" "$( ((i % 2)) && echo "each after ours" || echo "each before ours")"
done
med() { printf '%s\n' "$@" | median; }
mb_s() { awk -v ms="$1" -v b="$bytes" 'BEGIN { printf "%.0f", b / 1048576 / (ms / 1000) }'; }
log "sparse: an idle $size guest that touched little, and an idle $big one (restored mapped too)"
save_once sparse --guest idle
sparse_save=$S_MS
disk_kib=$(du -k "$work/sparse.save" | cut -f1)
restore_once sparse
sparse_restore=$R_MS
size_was=$size size=$big
save_once big --guest idle
big_save=$S_MS
restore_once big
big_restore=$R_MS
restore_once big mapped
big_mapped=$R_MS
restore_once big lazy
big_lazy_ready=$(ready_of "$R_INFO") big_lazy_all=$R_MS
size=$size_was
log "lazy restore under a guest that touches its memory: a stress guest rewriting 64 MiB of a host-filled $size"
SAVE_LIVE=1 save_once busy --guest stress --append "bytes=64M" --prefill "$size"
restore_once busy lazy
busy_ready=$(ready_of "$R_INFO") busy_all=$R_MS
busy_faults=$(field "postcopy requests" <<<"$R_INFO")
busy_latency=$(awk -F': ' '/^postcopy fault latency:/ { print $2; exit }' <<<"$R_INFO")
busy_block=$(awk -F': ' '/^postcopy blocktime:/ { print $2; exit }' <<<"$R_INFO")

printf '\n\033[1msummary\033[0m (medians of %d runs; ratios: dd time / vmm time, paired per run, 1.0 = as fast as dd)\n' "$runs"
printf '  save    %s: vmm %s ms (%s MiB/s), dd write %s ms; ratio %s (target >= 0.8)\n' "$size" "$(med "${saves[@]}")" \
    "$(mb_s "$(med "${saves[@]}")")" "$(med "${dd_w[@]}")" "$(med "${save_ratios[@]}")"
printf '  restore %s: vmm %s ms (%s MiB/s), dd read %s ms; ratio %s (target >= 0.8)\n' "$size" "$(med "${restores[@]}")" \
    "$(mb_s "$(med "${restores[@]}")")" "$(med "${dd_r[@]}")" "$(med "${restore_ratios[@]}")"
printf '          the same file read by python into fresh memory on one thread: %s ms; ratio %s\n' \
    "$(med "${fresh_reads[@]}")" "$(med "${fresh_ratios[@]}")"
printf '  mapped  %s (x-restore-mapped: the file mapped, its pages checked in the background): %s ms to a guest ready to run\n' \
    "$size" "$(med "${mapped[@]}")"
printf '  lazy    %s (x-restore-lazy): running after %s ms (target <= 10 ms, whatever the size), every page in after %s ms\n' \
    "$size" "$(med "${lazy_ready[@]}")" "$(med "${lazy_all[@]}")"
printf '  lazy    %s idle guest: running after %s ms, every page in after %s ms\n' "$big" "$big_lazy_ready" "$big_lazy_all"
printf '  lazy    %s, a stress guest rewriting 64 MiB: running after %s ms, every page in after %s ms; %s faults, latency %s; blocked %s\n' \
    "$size" "$busy_ready" "$busy_all" "$busy_faults" "$busy_latency" "$busy_block"
if [ "$qemu" = 1 ]; then
    printf '  QEMU    7.2, %s host-filled, exec:cat (ratios: QEMU time / ours, paired per run; above 1: ours is faster):\n' "$size"
    printf '          save %s ms (its total-time), %s ms to the file fsynced against ours %s ms: ratio %s\n' \
        "$(med "${q_save[@]}")" "$(med "${q_synced[@]}")" "$(med "${saves[@]}")" "$(med "${q_save_ratios[@]}")"
    printf '          restore %s ms to a loaded guest against ours %s ms (every page read and checked): ratio %s; ours lazily: running after %s ms\n' \
        "$(med "${q_restore[@]}")" "$(med "${restores[@]}")" "$(med "${q_restore_ratios[@]}")" "$(med "${lazy_ready[@]}")"
fi
printf '  sparse  %s idle guest: file %s KiB on disk, save %s ms, restore %s ms\n' "$size" "$disk_kib" "$sparse_save" \
    "$sparse_restore"
printf '  sparse  %s idle guest: save %s ms, restore %s ms, mapped restore %s ms\n' "$big" "$big_save" "$big_restore" "$big_mapped"
