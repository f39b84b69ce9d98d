#!/bin/sh
# PID 1 of the nested test VM (copied into its initramfs by softroce-run.sh).
# Mounts the host's root filesystem read-only over virtio-9p and the project checkout
# read-write at the same path, runs softroce-inside.sh there in a chroot, reports its exit
# status on the console with a marker the host looks for, and powers off.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
say() { echo "softroce-init: $*"; }
for m in virtio_pci 9pnet_virtio 9p; do modprobe "$m" || say "modprobe $m failed"; done
opts=trans=virtio,version=9p2000.L,msize=524288
mkdir -p /newroot
if ! mount -t 9p -o "$opts,ro,cache=loose" hostroot /newroot; then
    say "cannot mount the host root over 9p"
    echo "VMM-SOFTROCE-EXIT: 125"
    poweroff -f
fi
for d in proc sys dev; do mount --bind "/$d" "/newroot/$d"; done
# What udev makes on a real system and devtmpfs lacks (bash's <(…) needs /dev/fd).
ln -sf /proc/self/fd /dev/fd
for i in 0:stdin 1:stdout 2:stderr; do ln -sf "/proc/self/fd/${i%%:*}" "/dev/${i##*:}"; done
mount -t tmpfs -o size=1g tmpfs /newroot/tmp
mount -t tmpfs tmpfs /newroot/run
mkdir -p /newroot/dev/pts /newroot/dev/shm 2>/dev/null
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mount -t tmpfs tmpfs /newroot/root
# The checkout may live where the VM has a fresh tmpfs (e.g. under /tmp): make the mount point.
mkdir -p "/newroot$VMM_CHECKOUT" 2>/dev/null
if ! mount -t 9p -o "$opts,rw" checkout "/newroot$VMM_CHECKOUT"; then
    say "cannot mount the checkout at $VMM_CHECKOUT"
    echo "VMM-SOFTROCE-EXIT: 125"
    poweroff -f
fi
case "$VMM_BUILD" in
    "$VMM_CHECKOUT"/*) ;;
    *) mkdir -p "/newroot$VMM_BUILD" 2>/dev/null; mount -t 9p -o "$opts,rw" build "/newroot$VMM_BUILD" ;;
esac
say "up at $(cut -d' ' -f1 /proc/uptime)s, kernel $(uname -r)"
chroot /newroot /bin/sh "$VMM_CHECKOUT/scripts/lib/softroce-inside.sh"
rc=$?
sync
echo "VMM-SOFTROCE-EXIT: $rc"
poweroff -f
