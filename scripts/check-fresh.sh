#!/usr/bin/env bash
# check-fresh.sh: the README's two commands on a fresh Debian 12, from nothing. A new root is
# made with debootstrap from the mirror apt uses here (in a temporary directory); in it, as a
# newcomer would: git is installed, this checkout's HEAD is cloned, then `scripts/demo.sh` runs
# in full and `scripts/test.sh` after it. Everything either command needs it must install itself:
# a package missing from their lists fails here, even where this machine has it. /dev (with
# /dev/kvm where the host has it), /proc and /sys are the host's; without /dev/kvm the same check
# takes the path of a machine without it (the nested VM). Needs root. Each phase's time is printed.
#   scripts/check-fresh.sh             the demo, then the whole test command
#   scripts/check-fresh.sh -L unit     the demo, then scripts/test.sh -L unit (arguments go to it)
#   VMM_FRESH_DIR=DIR                  where the root is made (default /var/tmp); removed at the end
#   VMM_FRESH_KEEP=1                   keep the root (and its build) afterwards
#   VMM_FRESH_WITHOUT="PKG ..."        the scripts' package lists without these (to see the check fail)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
[ "$(id -u)" = 0 ] || die "check-fresh.sh makes a root with debootstrap and enters it: run it as root"
ensure_packages debootstrap git

# The mirror apt uses here (deb822 sources first, then the one-line format).
mirror=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 !~ /^\[/ && $3 == "bookworm" { print $2; exit }' \
                                 /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}

base=${VMM_FRESH_DIR:-/var/tmp}
root=$(mktemp -d "$base/vmm-fresh.XXXXXX")
chmod 755 "$root"  # a machine's / is every user's to enter: tests run programs as nobody there
leave() {  # whatever still runs in the root is ended; the root goes unless asked to stay
    local p
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null
    done
    if [ -n "${VMM_FRESH_KEEP:-}" ]; then log "the fresh root stays at $root"; return; fi
    # Its mounts lived in the namespace below, gone with it: nothing of the host is under $root.
    rm -rf --one-file-system "$root"
}
trap leave EXIT
out="$root.log"  # what the commands printed, kept beside the root

log "a fresh Debian 12 root in $root (debootstrap bookworm from $mirror)"
debootstrap bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
    { tail -20 "$root.debootstrap.log" >&2; die "debootstrap failed (log: $root.debootstrap.log)"; }
rm -f "$root.debootstrap.log"
# apt there reads the mirror as apt here does: the Debian sources and the settings that make it
# usable (a snapshot mirror's dates), not other vendors' repositories, whose keys it lacks.
for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
    [ -f "$f" ] && grep -q "$mirror" "$f" && cp "$f" "$root$f"
done
[ -e "$root/etc/apt/sources.list.d/debian.sources" ] && rm -f "$root/etc/apt/sources.list"
grep -lsE 'Check-Valid-Until|Check-Date' /etc/apt/apt.conf.d/* | xargs -r cp -t "$root/etc/apt/apt.conf.d/"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
echo vmm-fresh >"$root/etc/hostname"
phase_done debootstrap

# The scripts as the newcomer has them, less the packages asked to be left out.
commit=$(git -C "$ROOT" rev-parse HEAD)
[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] ||
    log "note: the checkout has uncommitted changes; the fresh root gets its HEAD ($(git -C "$ROOT" log -1 --format=%h)) only"
mkdir -p "$root/mnt/origin"
cat >"$root/root/fresh.sh" <<EOF
set -euo pipefail
export HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
t=\$(date +%s)
apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git ca-certificates >/dev/null
git config --global --add safe.directory '*'
git clone -q /mnt/origin /root/vmm && cd /root/vmm && git checkout -q $commit
for p in ${VMM_FRESH_WITHOUT:-}; do
    sed -i -E "s/(^|[ (])\$p([ )]|\$)/\\1\\2/" scripts/lib/common.sh
    echo "==> left out of the install lists: \$p"
done
echo "FRESH-PHASE clone \$((\$(date +%s) - t))"; t=\$(date +%s)
bash scripts/demo.sh
echo "FRESH-PHASE demo \$((\$(date +%s) - t))"; t=\$(date +%s)
rc=0
bash scripts/test.sh "\$@" || rc=\$?
echo "FRESH-PHASE tests \$((\$(date +%s) - t))"
exit \$rc
EOF

# In a mount namespace of its own: the host's /dev, /proc, /sys and this checkout bound in, all
# gone when it ends.
rc=0
unshare --mount --propagation private bash -c '
    set -e
    root=$1 origin=$2; shift 2
    # The root a mount point of its own, as a machine'"'"'s is: unshare -m inside (the tests that hide
    # /dev/kvm or the build tree) can then make its mounts private.
    mount --bind "$root" "$root"
    mount --rbind /dev "$root/dev"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount -t tmpfs tmpfs "$root/run"
    mount -t tmpfs tmpfs "$root/tmp"
    mount --bind -o ro "$origin" "$root/mnt/origin"
    exec chroot "$root" /usr/bin/env -i CI="${CI:-}" TERM=dumb VMM_NO_KVM="${VMM_NO_KVM:-}" \
        VMM_SKIP_NESTED="${VMM_SKIP_NESTED:-}" /bin/bash /root/fresh.sh "$@"' \
    bash "$root" "$ROOT" "$@" 2>&1 | tee "$out" || rc=$?
while read -r _ name secs; do
    phase_add "$name" "$secs"
done < <(grep -a '^FRESH-PHASE ' "$out" || true)

tests_line=$(grep -a -E '^tests: [0-9]+ passed, [0-9]+ failed' "$out" | tail -1 || true)
skipped=$(sed -nE 's/.* ([0-9]+) skipped.*/\1/p' <<<"$tests_line")
if [ "$rc" = 0 ] && [ "${skipped:-0}" != 0 ] && [ $# = 0 ]; then
    log "in a fresh root every test must run, as the test command installs all they need: $skipped skipped"
    rc=1
fi
print_phases "from nothing (${commit:0:7})"
[ -z "$tests_line" ] || echo "$tests_line"
exit "$rc"
