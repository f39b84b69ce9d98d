// libFuzzer target for what a TLS destination reads before anyone is authenticated: the input
// is a peer's bytes. First as the record layer's framing (tls_record.h), record after
// record, as TlsStream's transport reads it: a header that decodes must announce a body within
// the bound and be a TLS content type. Then as a whole connection: a destination's TLS
// handshake (tls_stream.h, server side, with credentials made once at start-up) over a stream
// that holds the input; it must fail with a message (no peer here holds a certificate the CA
// signed) and never crash or read past the input.
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <span>
#include <string>

#include "vmm/stream/byte_stream.h"
#include "vmm/stream/tls_stream.h"
#include "vmm/stream/tls_record.h"

using namespace vmm::stream;

namespace {

std::string g_dir;

void write_pem(const std::string& path, const gnutls_datum_t& d) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(d.data), static_cast<std::streamsize>(d.size));
}

// A self-signed CA whose certificate is also the server's (enough for a handshake to reach
// the client's certificate, which no input has).
bool make_credentials() {
    char tmpl[] = "/tmp/vmm-tls-fuzz.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return false;
    g_dir = tmpl;
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    if (gnutls_x509_privkey_init(&key) < 0 || gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA, 256, 0) < 0) return false;
    if (gnutls_x509_crt_init(&crt) < 0) return false;
    gnutls_x509_crt_set_version(crt, 3);
    unsigned char serial = 1;
    gnutls_x509_crt_set_serial(crt, &serial, 1);
    gnutls_x509_crt_set_activation_time(crt, time(nullptr) - 3600);
    gnutls_x509_crt_set_expiration_time(crt, time(nullptr) + 86400);
    gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, "fuzz", 4);
    gnutls_x509_crt_set_key(crt, key);
    gnutls_x509_crt_set_ca_status(crt, 1);
    if (gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0) < 0) return false;
    gnutls_datum_t cert_pem{}, key_pem{};
    gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cert_pem);
    gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &key_pem);
    write_pem(g_dir + "/ca-cert.pem", cert_pem);
    write_pem(g_dir + "/server-cert.pem", cert_pem);
    write_pem(g_dir + "/server-key.pem", key_pem);
    gnutls_free(cert_pem.data);
    gnutls_free(key_pem.data);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (!make_credentials()) __builtin_trap();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::span<const uint8_t> in(data, size);
    while (in.size() >= kTlsRecordHeader) {
        auto length = decode_tls_record_header(in.first<kTlsRecordHeader>());
        if (!length) break;
        if (*length > kTlsMaxRecordBody || in[0] < 20 || in[0] > 24) __builtin_trap();
        in = in.subspan(kTlsRecordHeader);
        if (in.size() < *length) break;
        in = in.subspan(*length);
    }
    TlsSetup setup;
    setup.role = TlsRole::server;
    setup.creds_dir = g_dir;
    setup.first_words_within = std::chrono::milliseconds(0);
    auto peer = std::make_unique<MemoryStream>(std::vector<uint8_t>(data, data + size));
    auto tls = tls_handshake(std::move(peer), setup);
    if (tls) __builtin_trap();  // no input holds a client certificate the CA signed
    if (tls.error().message().empty()) __builtin_trap();
    return 0;
}
