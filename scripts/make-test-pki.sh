#!/usr/bin/env bash
# make-test-pki.sh DIR [--server NAME]... [--client CN] [--ca FROM_DIR] [--expired]: a CA and
# certificates for TLS migration (tls-creds DIR), in QEMU's tls-creds-x509 layout: ca-cert.pem,
# server-cert.pem, server-key.pem, client-cert.pem, client-key.pem (and ca-key.pem, to sign more);
# and the same files in libvirt's names, for vmmd (--pki-dir DIR: cacert.pem, servercert.pem,
# serverkey.pem) and its clients (virsh -c 'vmm+tls://HOST/system?pkipath=DIR': cacert.pem,
# clientcert.pem, clientkey.pem).
#   --server NAME  a name the destination's certificate carries (DNS name or IP address; may
#                  repeat; default: localhost, 127.0.0.1, ::1)
#   --client CN    the source certificate's common name (default: vmm-source)
#   --ca FROM_DIR  sign with the CA in FROM_DIR (its ca-cert.pem, ca-key.pem) instead of a new one
#   --expired      certificates that expired in 2020 (for tests)
# make-test-pki.sh --fill-pool DIR N: DIR/key-0.pem … key-(N-1).pem, RSA keys made ahead (the
# build does it for the tests: tests/CMakeLists.txt).
# With $VMM_TEST_KEY_POOL naming such a directory, the keys are taken from it instead of made:
# distinct among the PKIs made in one parent directory (claimed by files there), made anew once the pool
# is used up. Making an RSA key takes ~0.1 s natively and ~10 s in a nested VM under TCG, where a
# TLS test made three PKIs of three keys each (docs/performance.md, "Keys made ahead").
# For tests and labs: a production PKI keeps its CA key elsewhere. Needs certtool (gnutls-bin).
set -euo pipefail
dir= client=vmm-source ca_from= expired=0 servers=() fill=
while [ $# -gt 0 ]; do
    case "$1" in
        --server) servers+=("$2"); shift 2 ;;
        --client) client=$2; shift 2 ;;
        --ca) ca_from=$2; shift 2 ;;
        --expired) expired=1; shift ;;
        --fill-pool) fill=${3:?--fill-pool DIR N}; dir=$2; shift 3 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
        -*) echo "make-test-pki.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) dir=$1; shift ;;
    esac
done
[ -n "$dir" ] || { echo "usage: make-test-pki.sh DIR [--server NAME]... [--client CN] [--ca FROM_DIR] [--expired]" >&2; exit 2; }
command -v certtool >/dev/null || { echo "make-test-pki.sh: needs certtool (apt-get install gnutls-bin)" >&2; exit 1; }
[ ${#servers[@]} -gt 0 ] || servers=(localhost 127.0.0.1 ::1)
# Few processes: in a nested VM under TCG each one costs a tenth of a second or more (files are
# copied by the shell).
dir=${dir%/}
mkdir -p "$dir"

dates() {  # the validity lines of a template
    if [ "$expired" = 1 ]; then
        printf 'activation_date = "2020-01-01 00:00:00"\nexpiration_date = "2020-02-01 00:00:00"\n'
    else
        echo "expiration_days = 3650"
    fi
}
copy() { printf '%s\n' "$(<"$1")" >"$2"; }  # PEM: text ending in one newline
# RSA: libvirt insists on the key-encipherment usage, which an ECDSA key cannot carry.
new_key() { certtool --generate-privkey --key-type rsa --bits 2048 --outfile "$1" 2>/dev/null; }
if [ -n "$fill" ]; then
    for ((i = 0; i < fill; i++)); do
        [ -s "$dir/key-$i.pem" ] || { new_key "$dir/key-$i.pem.tmp" && mv "$dir/key-$i.pem.tmp" "$dir/key-$i.pem"; }
    done
    exit 0
fi
pool=${VMM_TEST_KEY_POOL:-}
case "$dir" in */*) parent=${dir%/*} ;; *) parent=. ;; esac
# key FILE: the pool's first key not yet claimed in this parent directory (a claim is a file
# created exclusively, so PKIs made side by side never share a key), or a new one.
key() {
    local n=0 claimed
    while [ -n "$pool" ] && [ -s "$pool/key-$n.pem" ]; do
        set -C
        claimed=0
        if true 2>/dev/null >"$parent/.test-pki-key-$n"; then claimed=1; fi
        set +C
        if [ "$claimed" = 1 ]; then copy "$pool/key-$n.pem" "$1"; return; fi
        n=$((n + 1))
    done
    new_key "$1"
}
server_template() {
    echo "cn = \"${servers[0]}\""
    for n in "${servers[@]}"; do
        if [[ "$n" =~ ^[0-9.]+$ || "$n" == *:* ]]; then echo "ip_address = \"$n\""; else echo "dns_name = \"$n\""; fi
    done
    echo tls_www_server; echo encryption_key; echo signing_key; dates
}
client_template() { echo "cn = \"$client\""; echo tls_www_client; echo encryption_key; echo signing_key; dates; }

if [ -n "$ca_from" ]; then
    copy "$ca_from/ca-cert.pem" "$dir/ca-cert.pem"
    copy "$ca_from/ca-key.pem" "$dir/ca-key.pem"
else
    key "$dir/ca-key.pem"
    { echo 'cn = "vmm test CA"'; echo ca; echo cert_signing_key; echo "expiration_days = 3650"; } >"$dir/.ca.info"
    certtool --generate-self-signed --load-privkey "$dir/ca-key.pem" --template "$dir/.ca.info" \
        --outfile "$dir/ca-cert.pem" 2>/dev/null
fi
for side in server client; do
    key "$dir/$side-key.pem"
    "${side}_template" >"$dir/.$side.info"
    certtool --generate-certificate --load-privkey "$dir/$side-key.pem" --load-ca-certificate "$dir/ca-cert.pem" \
        --load-ca-privkey "$dir/ca-key.pem" --template "$dir/.$side.info" --outfile "$dir/$side-cert.pem" 2>/dev/null
done
for f in ca-cert:cacert server-cert:servercert server-key:serverkey client-cert:clientcert client-key:clientkey; do
    copy "$dir/${f%%:*}.pem" "$dir/${f##*:}.pem"
done
rm -f "$dir"/.*.info
chmod 600 "$dir"/*-key.pem "$dir"/*key.pem
echo "$dir: ca-cert.pem, server-cert.pem (${servers[*]}), server-key.pem, client-cert.pem (CN=$client), client-key.pem"
