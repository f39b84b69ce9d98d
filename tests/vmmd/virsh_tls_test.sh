#!/usr/bin/env bash
# Stock virsh and libvirt-python against vmmd over TLS (label libvirt): vmmd --listen-tls with a
# test PKI in libvirt's layout (scripts/make-test-pki.sh), clients with libvirt's own client
# certificates (?pkipath=DIR). With its certificate a client lists, defines and reads a domain
# and the connection says it is secure; without one, with another CA's, or with a name
# --tls-allowed-dn does not accept it is refused, and vmmd serves the next client.
#   virsh_tls_test.sh BUILD_DIR
set -uo pipefail
build=$1
command -v certtool >/dev/null || { echo "SKIP: needs certtool (apt-get install gnutls-bin)"; exit 77; }
. "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
"$src/scripts/make-test-pki.sh" "$dir/pki" >/dev/null || fail "make-test-pki.sh"
"$src/scripts/make-test-pki.sh" "$dir/foreign" >/dev/null || fail "make-test-pki.sh (another CA)"
"$src/scripts/make-test-pki.sh" "$dir/intruder" --ca "$dir/pki" --client intruder >/dev/null || fail "make-test-pki.sh (intruder)"
mkdir -p "$dir/nocert" && cp "$dir/pki/cacert.pem" "$dir/nocert/"
port=$((25000 + RANDOM % 400))  # this test's range (lib.sh lists the others)
"$build/bin/vmmd" --socket "$sock" --state-dir "$dir/state" --listen-tls "127.0.0.1:$port" --pki-dir "$dir/pki" \
    --tls-allowed-dn "vmm-source;CN=admin-*" >>"$dir/log" 2>&1 &
pid=$!
tls="vmm+tls://127.0.0.1:$port/system"
wait_until 60 answers "$tls?pkipath=$dir/pki" || fail "vmmd did not serve TLS within 60 s"

t() { virsh -c "$tls?pkipath=$dir/pki" "$@" 2>&1; }
out=$(t version) || fail "virsh version over TLS: $out"
expect "version over TLS" "$out" "Running hypervisor: vmm"
pattern_domain "$dir/demo.xml"
out=$(t define "$dir/demo.xml") || fail "define over TLS: $out"
out=$(t list --all) || fail "list over TLS: $out"
expect "the domain defined over TLS is listed" "$out" "demo +shut off"
out=$(/usr/bin/python3 - "$tls?pkipath=$dir/pki" <<'PY' 2>&1) || fail "libvirt-python over TLS: $out"
import sys, libvirt
c = libvirt.open(sys.argv[1])
assert c.isSecure() == 1, c.isSecure()
assert [d.name() for d in c.listAllDomains()] == ["demo"]
print("secure", c.isSecure())
PY
expect "libvirt-python: the TLS connection is secure" "$out" "secure 1"

for who in nocert foreign intruder; do
    out=$(virsh -c "$tls?pkipath=$dir/$who" list 2>&1) && fail "a client with $who was served: $out"
    echo "ok: refused a client with $who: $(tr '\n' ' ' <<<"$out" | cut -c1-160)"
done
expect "vmmd named the client certificate it refused" "$(cat "$dir/log")" "the client's certificate 'CN=intruder' is not one --tls-allowed-dn accepts"
out=$(t list --all) || fail "list after the refused clients: $out"
expect "vmmd serves the next client" "$out" "demo"
out=$(virsh -c "vmm+tcp://127.0.0.1:$port/system" list 2>&1) && fail "plaintext on the TLS port was served: $out"
echo "ok: plaintext on the TLS port refused"
out=$(t list --all) || fail "list after plaintext: $out"

# A client that connects and says nothing is dropped after vmmd's limit (10 s), named in vmmd's
# words: not as a migration's.
exec {silent}<>"/dev/tcp/127.0.0.1/$port"
for _ in $(seq 300); do grep -q "said nothing within" "$dir/log" && break; sleep 0.1; done
exec {silent}>&-
expect "a silent TLS client is dropped in vmmd's words" "$(cat "$dir/log")" "the client said nothing within 10 s of connecting \(vmmd's limit for a TLS client\)"
if grep -q "migration" <(grep "refused the TLS client" "$dir/log"); then fail "a refused TLS client was logged in a migration's words: $(grep "refused the TLS client" "$dir/log")"; fi

# openssl s_client, a TLS client of another library: with libvirt's client certificate it
# completes a TLS 1.3 handshake and verifies vmmd's certificate; without one vmmd ends it with
# "certificate required", and serves the next client.
s_client() { timeout 20 openssl s_client -connect "127.0.0.1:$port" -CAfile "$dir/pki/cacert.pem" -verify_return_error "$@" </dev/null 2>&1; }
if command -v openssl >/dev/null; then
    out=$(s_client -cert "$dir/pki/clientcert.pem" -key "$dir/pki/clientkey.pem") || fail "openssl s_client with a certificate: $out"
    expect "openssl with a client certificate" "$out" "New, TLSv1.3"
    expect "openssl verified vmmd's certificate" "$out" "Verify return code: 0 \(ok\)"
    # Its input held open a moment: s_client reads on after its side of the handshake, and so
    # sees vmmd's alert (TLS 1.3 checks the client's certificate after the client finished).
    out=$( (sleep 3) | timeout 20 openssl s_client -connect "127.0.0.1:$port" -CAfile "$dir/pki/cacert.pem" 2>&1)
    expect "openssl without a client certificate is refused with TLS's alert" "$out" "alert certificate required"
    out=$(t list --all) || fail "list after openssl: $out"
    echo "ok: openssl s_client with a certificate verified, without one refused"
else
    echo "note: no openssl here: the s_client checks did not run"
fi

# Plaintext TCP only when asked for by name: --listen-tcp alone is refused, saying why.
out=$("$build/bin/vmmd" --socket "$dir/other.sock" --state-dir "$dir/other" --listen-tcp "127.0.0.1:$((port + 1))" 2>&1)
rc=$?
[ "$rc" = 2 ] || fail "vmmd --listen-tcp without --listen-tcp-insecure exited $rc: $out"
expect "--listen-tcp alone is refused" "$out" "add --listen-tcp-insecure if every host on that network is trusted"

# A port something else holds (this test's vmmd, on TLS): one line saying so and what to do, and
# no socket file left behind that nobody serves (a client would read "connection refused").
out=$("$build/bin/vmmd" --socket "$dir/other.sock" --state-dir "$dir/other" --listen-tcp "127.0.0.1:$port" --listen-tcp-insecure 2>&1)
rc=$?
[ "$rc" = 1 ] || fail "vmmd on a port already held exited $rc: $out"
expect "a port already held is named, with what to do" "$out" "listen on TCP 127.0.0.1:$port: Address already in use; another process holds that port"
[ ! -e "$dir/other.sock" ] && [ ! -e "$dir/other.sock-ro" ] || fail "a vmmd that could not start left its socket files: $(ls "$dir")"
echo "ok: a port already held is refused in one line, leaving no socket file"
echo "PASS"
