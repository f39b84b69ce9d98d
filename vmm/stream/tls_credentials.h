// A migration's TLS credentials, QEMU's tls-creds-x509 layout: a directory holding ca-cert.pem
// (the CA both sides trust), server-cert.pem and server-key.pem (the destination's),
// client-cert.pem and client-key.pem (the source's), and optionally ca-crl.pem. Both sides
// authenticate: the source checks the destination's certificate and its name, the destination
// the source's certificate and, with tls-authz, its name.
#pragma once

#include <gnutls/gnutls.h>

#include <memory>
#include <string>
#include <string_view>

#include "vmm/common/result.h"

namespace vmm::stream {

enum class TlsRole { client, server };  // the source connects, the destination accepts

// Where a side's credentials are, file by file (libvirt's layout differs from QEMU's).
struct TlsFiles {
    std::string ca, cert, key;
    std::string crl;  // optional
};

class TlsCredentials {
public:
    // Loads the role's certificate and key and the CA from `dir`; a missing or unreadable file
    // is named with what to do.
    static Result<TlsCredentials> load(const std::string& dir, TlsRole role);
    // Files loaded before and unchanged since (same inode, size and mtime) are not read again:
    // the credentials are shared, as GnuTLS allows once they are set up.
    static Result<TlsCredentials> load(const TlsFiles& files);
    // Loads what `dir` holds for either role, so that a migration's first handshake does not
    // (what setting tls-creds does); a role whose files are missing or bad is left for the
    // migration to report.
    static void warm(const std::string& dir);
    gnutls_certificate_credentials_t get() const { return creds_.get(); }

private:
    static Result<TlsCredentials> read(const TlsFiles& files);
    struct Free {
        void operator()(gnutls_certificate_credentials_t c) const { gnutls_certificate_free_credentials(c); }
    };
    std::shared_ptr<gnutls_certificate_credentials_st> creds_;
};

// tls-authz: the client certificates a destination accepts, ';'-separated shell patterns, each
// matched against the certificate's distinguished name ("CN=src,O=Lab") or, without an '=',
// its common name. Empty: any certificate the CA signed.
bool tls_authz_allows(std::string_view authz, std::string_view dn, std::string_view cn);

}  // namespace vmm::stream
