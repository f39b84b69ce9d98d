# QEMU 7.2's save and restore for scripts/bench-snapshot.sh (sourced; uses its $size, $work,
# $shm, $CTL, pids, die). 7.2 has no file: migration: libvirt saved through an exec: or fd:
# pipe, as here. Its guest RAM is a /dev/shm file filled from the host with random bytes (as
# ours is filled by --prefill), so that nothing waits for a guest to write it; the restoring QEMU
# has plain RAM of the same name (pc.ram) and size, and the same devices.
# -cpu host without arch-capabilities: this machine's paravirtual KVM refuses MSR 0x10a.
qemu_guest=(qemu-system-x86_64 -accel kvm -cpu host,-arch-capabilities -nodefaults -no-user-config -display none
            -m "$size" -kernel "$BUILD/guest/idle.elf" -serial none)
qmp() { "$CTL" --qmp "unix:$1" "${@:2}"; }  # qmp SOCKET COMMAND

# qemu_start NAME ARGS...: a QEMU with a QMP socket $work/NAME.qmp, answering; sets Q_PID.
qemu_start() {
    local name=$1; shift
    "${qemu_guest[@]}" "$@" -qmp "unix:$work/$name.qmp,server=on,wait=off" >"$work/$name.qlog" 2>&1 &
    Q_PID=$!
    pids+=("$Q_PID")
    "$CTL" --wait 30 --qmp "unix:$work/$name.qmp" query-status >/dev/null ||
        { cat "$work/$name.qlog" >&2; die "QEMU $name did not start"; }
}

# qemu_save_once NAME: a stopped guest of $size saved to $work/NAME.qsave; sets QS_MS (QEMU's own
# total-time: its last byte in cat's pipe) and QS_SYNCED_MS (from the command to cat gone and the
# file fsynced, as ours ends).
qemu_save_once() {
    local name=$1 file=$work/$1.qsave st=""
    head -c "$size" /dev/urandom >"$shm/$name.ram"
    qemu_start "$name" -object "memory-backend-file,id=pc.ram,size=$size,mem-path=$shm/$name.ram,share=on" \
        -machine pc,memory-backend=pc.ram
    qmp "$work/$name.qmp" stop >/dev/null
    # 7.2 caps migration at 128 MiB/s by default; libvirt lifts the cap for a save, as here.
    qmp "$work/$name.qmp" 'migrate-set-parameters {"max-bandwidth": 107374182400}' >/dev/null
    local t0; t0=$(date +%s%N)
    qmp "$work/$name.qmp" "migrate {\"uri\": \"exec:cat > $file\"}" >/dev/null || die "QEMU save $name: migrate refused"
    local q
    for _ in $(seq 6000); do
        q=$(qmp "$work/$name.qmp" query-migrate) || die "QEMU save $name: its monitor went away"
        st=$(sed -n 's/.*"status":"\([a-z-]*\)".*/\1/p' <<<"$q")
        [ "$st" = completed ] || [ "$st" = failed ] && break
        sleep 0.01
    done
    [ "$st" = completed ] || { cat "$work/$name.qlog" >&2; die "QEMU save $name: $st: $q"; }
    while pgrep -P "$Q_PID" >/dev/null; do sleep 0.005; done  # its exec: child, cat, writing the pipe's rest
    sync "$file"
    QS_SYNCED_MS=$(ms_of "$t0" "$(date +%s%N)")
    QS_MS=$(sed -n 's/.*"total-time":\([0-9]*\).*/\1/p' <<<"$q")
    qmp "$work/$name.qmp" quit >/dev/null 2>&1 || true
    rm -f "$shm/$name.ram"
}

# qemu_restore_once NAME: $work/NAME.qsave restored into a fresh QEMU (-incoming defer); sets
# QR_MS, from migrate-incoming to the guest loaded (QEMU leaves 'inmigrate').
qemu_restore_once() {
    local name=$1 sock=$work/$1-r.qmp st=""
    qemu_start "$name-r" -incoming defer
    local t0; t0=$(date +%s%N)
    qmp "$sock" "migrate-incoming {\"uri\": \"exec:cat $work/$name.qsave\"}" >/dev/null ||
        die "QEMU restore $name: migrate-incoming refused"
    for _ in $(seq 6000); do
        st=$(qmp "$sock" query-status | sed -n 's/.*"status":"\([a-z-]*\)".*/\1/p') || die "QEMU restore $name: it ended"
        [ "$st" != inmigrate ] && break
        sleep 0.01
    done
    QR_MS=$(ms_of "$t0" "$(date +%s%N)")
    local m; m=$(qmp "$sock" query-migrate)
    [[ "$m" == *'"status":"completed"'* ]] || { cat "$work/$name-r.qlog" >&2; die "QEMU restore $name: $st, $m"; }
    qmp "$sock" quit >/dev/null 2>&1 || true
    rm -f "$work/$name.qsave"
}
