#!/usr/bin/env bash
# go-libvirt (DigitalOcean's pure-Go client, its own XDR codec: a peer nobody here wrote) against
# two vmmd (label libvirt): connect, define, start, list, state, save, restore, lifecycle events,
# a live --p2p migration with typed parameters and its job statistics during and after, the
# guest at the destination, destroy, undefine.
# Built from Debian's packaged source (golang-github-digitalocean-go-libvirt-dev) with Debian's Go.
#   golibvirt_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
command -v go >/dev/null || { echo "SKIP: needs Go (apt-get install golang-go)"; exit 77; }
gopath=/usr/share/gocode
[ -d "$gopath/src/github.com/digitalocean/go-libvirt" ] ||
    { echo "SKIP: needs go-libvirt (apt-get install golang-github-digitalocean-go-libvirt-dev)"; exit 77; }
client=$build/tests/golibvirt  # built with the rest (tests/CMakeLists.txt); else here
if [ ! -x "$client" ] || [ "$client" -ot "$(dirname "$0")/golibvirt/main.go" ]; then
    out=$(cd "$(dirname "$0")/golibvirt" && GO111MODULE=off GOPATH=$gopath GOCACHE=$build/go-cache \
          go build -o "$client" . 2>&1) || fail "building the go-libvirt client: $out"
fi
start_vmmd "$build"
start_destination "$build"
pattern_domain "$dir/demo.xml"
port=$((26200 + RANDOM % 400))
out=$(timeout 300 "$client" "$sock" "$dir/dsock" "$dir/demo.xml" "$dir/demo.save" "$port" 2>&1) || fail "$out"
expect "go-libvirt drives vmmd" "$out" "go-libvirt ok"
echo "PASS"
