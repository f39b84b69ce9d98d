#!/usr/bin/env bash
# Installed like a hypervisor (label libvirt), in two tests. The package (no KVM needed, so it runs
# wherever the tests do): `cpack -G DEB` packs vmm under /usr, with Depends from the libraries it
# links and a systemd unit naming /usr/bin/vmmd. The installed tree (label kvm as well):
# `cmake --install` into a temporary prefix puts every file where vmm and vmmd look for it, with a
# systemd unit naming the installed vmmd; then, with the build tree hidden (an empty tmpfs mounted
# over it in a private mount namespace), two installed vmmd migrate a domain live with stock virsh
# (TCP on loopback, RAM digests equal) and the installed vmm loads the installed RDMA plugin.
#   install_test.sh BUILD_DIR             the installed tree (second stage: --installed BUILD_DIR PREFIX)
#   install_test.sh --package BUILD_DIR   the Debian package
set -uo pipefail
if [ "${1:-}" = --installed ]; then
    build=$2 prefix=$3
    unset VMM_GUEST_DIR VMM_PLUGIN_DIR VMM_BIN_DIR VMM_BINARY
    . "$(dirname "$0")/../vmmd/lib.sh"
    [ -z "$(ls -A "$build")" ] || fail "the build tree is still visible"
    echo "ok: the build tree is hidden; only $prefix remains"
    cd /
    start_vmmd "$prefix"
    start_destination "$prefix"
    qmp() { domain_qmp "$prefix/bin/vmmctl" "$1" demo "$2"; }  # qmp STATE COMMAND
    pattern_domain "$dir/demo.xml"
    out=$(v define "$dir/demo.xml") || fail "define: $out"
    out=$(v start demo) || fail "start (the installed vmm and its payload): $out"
    out=$(v suspend demo) || fail "suspend: $out"
    before=$(qmp state query-ramhash) || fail "query-ramhash: $before"
    port=$((24400 + RANDOM % 400))
    out=$(v migrate --live demo "$duri" --migrateuri "tcp://127.0.0.1:$port") || fail "migrate: $out"
    after=$(qmp dstate query-ramhash) || fail "query-ramhash at the destination: $after"
    [ "$before" = "$after" ] || fail "RAM digests differ: $before vs $after"
    echo "ok: two installed vmmd migrated a domain live; RAM digests equal ($after)"
    out=$(qmp dstate 'migrate-set-capabilities {"capabilities": [{"capability": "rdma-pin-all", "state": false}]}') ||
        fail "the installed vmm did not load the installed RDMA plugin: $out"
    echo "ok: the installed vmm loads $prefix/lib/vmm/vmm-transport-rdma.so"
    exit 0
fi

fail() { echo "FAIL: $*"; exit 1; }
if [ "${1:-}" = --package ]; then
    build=$2
    command -v cpack >/dev/null && command -v dpkg-deb >/dev/null ||
        { echo "SKIP: needs cpack and dpkg-deb (apt-get install cmake dpkg)"; exit 77; }
    [ -x "$build/bin/vmmd" ] || { echo "SKIP: vmmd is not built (needs libvirt-dev)"; exit 77; }
    work=$(mktemp -d /tmp/vmm-package.XXXXXX)
    trap 'rm -rf "$work"' EXIT
    out=$(cd "$build" && cpack -G DEB -B "$work/deb" 2>&1) || fail "cpack -G DEB: $out"
    deb=$(ls "$work"/deb/vmm_*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || fail "cpack made no .deb: $out"
    contents=$(dpkg-deb -c "$deb")
    for f in ./usr/bin/vmmd ./usr/bin/vmm ./usr/bin/vmm-snapshot ./usr/lib/vmm/vmm-transport-rdma.so ./usr/share/vmm/guest/pattern.elf \
             ./usr/lib/systemd/system/vmmd.service; do
        grep -q " $f\$" <<<"$contents" || fail "$(basename "$deb") lacks $f"
    done
    depends=$(dpkg-deb -f "$deb" Depends)
    for lib in libvirt0 libibverbs1 librdmacm1 libxml2; do
        grep -q "$lib" <<<"$depends" || fail "the package's Depends lacks $lib: $depends"
    done
    # Read whole, then searched: grep -q leaving early killed dpkg-deb with SIGPIPE, which pipefail
    # then reported as a failure (seen once in CI: "paste subprocess was killed by signal").
    unit=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/systemd/system/vmmd.service) ||
        fail "the package has no vmmd.service"
    grep -q "^ExecStart=/usr/bin/vmmd " <<<"$unit" || fail "the packaged unit does not start /usr/bin/vmmd: $unit"
    echo "ok: cpack -G DEB made $(basename "$deb") (Depends: $depends)"
    exit 0
fi

build=$1
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
command -v virsh >/dev/null || { echo "SKIP: needs virsh (apt-get install libvirt-clients)"; exit 77; }
[ -x "$build/bin/vmmd" ] || { echo "SKIP: vmmd is not built (needs libvirt-dev)"; exit 77; }
work=$(mktemp -d /tmp/vmm-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

out=$(cmake --install "$build" --prefix "$prefix" 2>&1) || fail "cmake --install: $out"
for f in bin/vmm bin/vmmctl bin/vmm-snapshot bin/vmmd lib/vmm/vmm-transport-rdma.so share/vmm/guest/pattern.elf share/vmm/guest/stress.elf \
         share/vmm/configs/pattern.toml lib/systemd/system/vmmd.service share/doc/vmm/libvirt.md share/doc/vmm/virsh.md; do
    [ -e "$prefix/$f" ] || fail "cmake --install did not install $f"
done
echo "ok: cmake --install --prefix put binaries, plugin, payloads, configs, docs and the unit in place"
grep -q "^ExecStart=$prefix/bin/vmmd " "$prefix/lib/systemd/system/vmmd.service" ||
    fail "the unit does not start the installed vmmd: $(grep ExecStart "$prefix/lib/systemd/system/vmmd.service")"
grep -q "^KillMode=process" "$prefix/lib/systemd/system/vmmd.service" || fail "the unit would kill the guests with vmmd"
echo "ok: the systemd unit starts $prefix/bin/vmmd and leaves the guests running when it stops"

unshare -m --propagation private true 2>/dev/null || { echo "SKIP: hiding the build tree needs unshare -m (root)"; exit 77; }
unshare -m --propagation private bash -c 'mount -t tmpfs tmpfs "$1" && exec bash "$2" --installed "$1" "$3"' \
    _ "$build" "$0" "$prefix"
