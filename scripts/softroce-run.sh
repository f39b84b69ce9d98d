#!/usr/bin/env bash
# softroce-run.sh COMMAND [ARGS...]: runs COMMAND inside a nested VM with a real RDMA device
# (SoftRoCE) and /dev/kvm, and returns its exit status. For machines whose kernel has no RDMA.
#
# The VM is QEMU (TCG, -cpu max, no NIC) booting Debian's kernel with a tiny busybox initramfs
# that mounts this host's root filesystem read-only over virtio-9p and this checkout (with its
# build tree) read-write at the same path; so COMMAND sees the same files, tools and libraries
# as here:   scripts/softroce-run.sh ctest --test-dir build -L rdma
# Inside, rdma_rxe runs on a dummy netdev (address in $VMM_RDMA_ADDR) and kvm_amd gives nested
# KVM. The console log is saved in build/softroce/console.log. Every step has a time limit
# (SOFTROCE_TIMEOUT seconds for the whole VM, default 1800): a hang fails, never sticks.
# SOFTROCE_TCG_THREAD=single (default) or multi: QEMU 7.2's multi-threaded TCG running nested
# SVM has wedged the nested kernel (a vCPU stuck in guest mode never takes the TLB-flush IPI,
# then soft lockup) within two VMs of hammering the dirty log; single-threaded TCG ran six such
# VMs and the whole rdma|kvm suite without it, at about the same speed for the tests.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
[ $# -ge 1 ] || die "usage: scripts/softroce-run.sh COMMAND [ARGS...]"

ensure_packages "${VMM_NESTED_PACKAGES[@]}"
kernel=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
[ -n "$kernel" ] || die "no kernel in /boot: install linux-image-amd64"
kver=${kernel#/boot/vmlinuz-}
[ -d "/lib/modules/$kver" ] || die "no modules for $kver in /lib/modules"

dir="${SOFTROCE_DIR:-$BUILD/softroce}"  # one per VM when several run at once
mkdir -p "$dir"
log="$dir/console.log"
# The command, quoted exactly, and where it runs.
printf '%q ' "$@" >"$dir/command.sh"
echo >>"$dir/command.sh"
printf '%s\n' "$*" >"$dir/command.txt"
pwd >"$dir/cwd.txt"

# The VM's image: a busybox root with just what mounting 9p needs. Made once per kernel and init
# script in $BUILD/softroce-image/ and shared by every VM that boots from this build tree (the
# test command's shards start side by side: the first makes it while the others wait).
image_dir="$BUILD/softroce-image"
initramfs="$image_dir/initramfs-$kver-$(cksum <"$ROOT/scripts/lib/softroce-init.sh" | cut -d' ' -f1).cpio.gz"
build_initramfs() {
    local r m d f
    r=$(mktemp -d "$image_dir/root.XXXXXX")
    mkdir -p "$r"/{bin,sbin,proc,sys,dev,newroot}
    cp /bin/busybox "$r/bin/busybox"
    for a in $("$r/bin/busybox" --list); do [ -e "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"; done
    declare -A seen
    resolve() { for m in "$@"; do
        [ -n "${seen[$m]:-}" ] && continue; seen[$m]=1
        d=$(modinfo -k "$kver" -F depends "$m" 2>/dev/null || true); [ -n "$d" ] && resolve ${d//,/ }
    done; return 0; }
    resolve virtio_pci 9pnet_virtio 9p
    for m in "${!seen[@]}"; do
        f=$(modinfo -k "$kver" -F filename "$m" 2>/dev/null) || continue
        [ "$f" = "(builtin)" ] && continue
        mkdir -p "$r$(dirname "$f")"; cp "$f" "$r$f"
    done
    cp /lib/modules/"$kver"/modules.{order,builtin,builtin.modinfo} "$r/lib/modules/$kver/" 2>/dev/null || true
    depmod -b "$r" "$kver"
    cp "$ROOT/scripts/lib/softroce-init.sh" "$r/init"
    chmod +x "$r/init"
    (cd "$r" && find . | cpio -o -H newc --quiet | gzip -1) >"$initramfs.tmp"
    mv "$initramfs.tmp" "$initramfs"  # whole or not at all: a VM waiting on the lock reads it next
    rm -rf "$r"
}
mkdir -p "$image_dir"
exec {image_lock}>>"$image_dir/lock"
flock -w 600 "$image_lock" || die "another softroce-run.sh held $image_dir/lock for 600 s"
[ -s "$initramfs" ] || { log "making the nested VM's image (kernel $kver)"; build_initramfs; }
exec {image_lock}>&-

timeout_s=${SOFTROCE_TIMEOUT:-1800}
# A nested VM whose console stays silent this long has hung (TCG running nested KVM has been
# seen to wedge the whole guest kernel, rarely): it is killed and, once, booted again. Longer
# than any silence a command of ours has (ctest's per-test limit is 900 s).
silence_s=${SOFTROCE_SILENCE:-1000}
virtfs=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
        -virtfs "local,path=$ROOT,mount_tag=checkout,security_model=none,multidevs=remap")
case "$BUILD" in "$ROOT"/*) ;; *) virtfs+=(-virtfs "local,path=$BUILD,mount_tag=build,security_model=none,multidevs=remap") ;; esac
name="vmm-softroce-$$"

watch_silence() {  # kills the VM when its console log has not grown for $silence_s seconds
    while sleep 10; do
        [ -e "$log" ] || continue
        if [ $(( $(date +%s) - $(stat -c %Y "$log") )) -ge "$silence_s" ]; then
            : >"$dir/hung"
            pkill -f -- "-name $name" || true
            return
        fi
    done
}

boot() {  # one run of the VM; the console goes to $log, qemu's status to $dir/qemu.rc
    rm -f "$dir/hung" "$dir/qemu.rc"
    watch_silence & local watcher=$!
    { timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 -name "$name" -accel "tcg,thread=${SOFTROCE_TCG_THREAD:-single}" -machine q35 -cpu max \
          -m "${SOFTROCE_MEM:-4G}" -smp 2 -kernel "$kernel" -initrd "$initramfs" \
          -append "console=ttyS0 panic=-1 loglevel=${SOFTROCE_LOGLEVEL:-4} VMM_CHECKOUT=$ROOT VMM_BUILD=$BUILD VMM_SOFTROCE_DIR=$dir" \
          "${virtfs[@]}" -nographic -no-reboot -nic none </dev/null 2>&1; echo $? >"$dir/qemu.rc"; } |
        stdbuf -oL tr -d '\r' | tee "$log"
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
}

for attempt in 1 2; do
    log "booting the nested VM (kernel $kver, TCG; console: $log; limit ${timeout_s}s)"
    boot
    [ -e "$dir/hung" ] && [ "$attempt" = 1 ] || break
    cp "$log" "$dir/console-hung.log"
    log "the nested VM hung (its console was silent for ${silence_s}s; saved as $dir/console-hung.log): booting it once more"
done
qemu_rc=$(cat "$dir/qemu.rc" 2>/dev/null || echo "?")
rc=$(grep -a -m1 '^VMM-SOFTROCE-EXIT: ' "$log" | sed 's/.*: //' || true)
if [ -z "$rc" ]; then
    [ -e "$dir/hung" ] && die "the nested VM hung twice (console silent for ${silence_s}s); consoles: $dir/console-hung.log, $log"
    [ "$qemu_rc" = 124 ] && die "the nested VM did not finish within ${timeout_s}s (SOFTROCE_TIMEOUT); console: $log"
    die "the nested VM ended (qemu status $qemu_rc) without reporting the command's status; console: $log"
fi
log "nested VM: '$*' exited with status $rc"
exit "$rc"
