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
# For tests and labs: a production PKI keeps its CA key elsewhere. Needs certtool (gnutls-bin).
set -euo pipefail
dir= client=vmm-source ca_from= expired=0 servers=()
while [ $# -gt 0 ]; do
    case "$1" in
        --server) servers+=("$2"); shift 2 ;;
        --client) client=$2; shift 2 ;;
        --ca) ca_from=$2; shift 2 ;;
        --expired) expired=1; shift ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
        -*) echo "make-test-pki.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) dir=$1; shift ;;
    esac
done
[ -n "$dir" ] || { echo "usage: make-test-pki.sh DIR [--server NAME]... [--client CN] [--ca FROM_DIR] [--expired]" >&2; exit 2; }
command -v certtool >/dev/null || { echo "make-test-pki.sh: needs certtool (apt-get install gnutls-bin)" >&2; exit 1; }
[ ${#servers[@]} -gt 0 ] || servers=(localhost 127.0.0.1 ::1)
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

dates() {  # the validity lines of a template
    if [ "$expired" = 1 ]; then
        printf 'activation_date = "2020-01-01 00:00:00"\nexpiration_date = "2020-02-01 00:00:00"\n'
    else
        echo "expiration_days = 3650"
    fi
}
# RSA: libvirt insists on the key-encipherment usage, which an ECDSA key cannot carry.
key() { certtool --generate-privkey --key-type rsa --bits 2048 --outfile "$1" 2>/dev/null; }

if [ -n "$ca_from" ]; then
    cp "$ca_from/ca-cert.pem" "$ca_from/ca-key.pem" "$dir/"
else
    key "$dir/ca-key.pem"
    { echo 'cn = "vmm test CA"'; echo ca; echo cert_signing_key; echo "expiration_days = 3650"; } >"$tmp/ca.info"
    certtool --generate-self-signed --load-privkey "$dir/ca-key.pem" --template "$tmp/ca.info" \
        --outfile "$dir/ca-cert.pem" 2>/dev/null
fi

{
    echo "cn = \"${servers[0]}\""
    for n in "${servers[@]}"; do
        if [[ "$n" =~ ^[0-9.]+$ || "$n" == *:* ]]; then echo "ip_address = \"$n\""; else echo "dns_name = \"$n\""; fi
    done
    echo tls_www_server; echo encryption_key; echo signing_key; dates
} >"$tmp/server.info"
{ echo "cn = \"$client\""; echo tls_www_client; echo encryption_key; echo signing_key; dates; } >"$tmp/client.info"
for side in server client; do
    key "$dir/$side-key.pem"
    certtool --generate-certificate --load-privkey "$dir/$side-key.pem" --load-ca-certificate "$dir/ca-cert.pem" \
        --load-ca-privkey "$dir/ca-key.pem" --template "$tmp/$side.info" --outfile "$dir/$side-cert.pem" 2>/dev/null
done
for f in ca-cert:cacert server-cert:servercert server-key:serverkey client-cert:clientcert client-key:clientkey; do
    cp "$dir/${f%%:*}.pem" "$dir/${f##*:}.pem"
done
chmod 600 "$dir"/*-key.pem "$dir"/*key.pem
echo "$dir: ca-cert.pem, server-cert.pem (${servers[*]}), server-key.pem, client-cert.pem (CN=$client), client-key.pem"
