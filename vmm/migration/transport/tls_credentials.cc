#include "vmm/migration/transport/tls_credentials.h"

#include <fmt/format.h>
#include <fnmatch.h>
#include <unistd.h>

namespace vmm::migration {

namespace {

Status check_file(const std::string& path, const char* what) {
    if (::access(path.c_str(), R_OK) == 0) return {};
    return Error::from_errno(fmt::format("TLS credentials: {} {}", what, path), errno,
                             "tls-creds names a directory of ca-cert.pem, server-cert.pem, server-key.pem, client-cert.pem "
                             "and client-key.pem, vmmd's --pki-dir one of cacert.pem, servercert.pem and serverkey.pem "
                             "(scripts/make-test-pki.sh makes both)");
}

Error gnutls_error(const std::string& what, int rc) { return Error(fmt::format("{}: {}", what, gnutls_strerror(rc))); }

}  // namespace

Result<TlsCredentials> TlsCredentials::load(const std::string& dir, TlsRole role) {
    std::string name = role == TlsRole::server ? "server" : "client";
    return load(TlsFiles{dir + "/ca-cert.pem", dir + "/" + name + "-cert.pem", dir + "/" + name + "-key.pem", dir + "/ca-crl.pem"});
}

Result<TlsCredentials> TlsCredentials::load(const TlsFiles& files) {
    const std::string &ca = files.ca, &cert = files.cert, &key = files.key, &crl = files.crl;
    for (auto [path, what] : {std::pair{ca, "CA certificate"}, {cert, "certificate"}, {key, "key"}})
        if (auto s = check_file(path, what); !s) return s.error();
    gnutls_certificate_credentials_t raw = nullptr;
    if (int rc = gnutls_certificate_allocate_credentials(&raw); rc < 0) return gnutls_error("tls-creds", rc);
    TlsCredentials c;
    c.creds_.reset(raw, Free{});
    if (int rc = gnutls_certificate_set_x509_trust_file(raw, ca.c_str(), GNUTLS_X509_FMT_PEM); rc <= 0) {
        return rc < 0 ? gnutls_error("tls-creds: reading " + ca, rc) : Error("tls-creds: " + ca + " holds no certificate");
    }
    if (int rc = gnutls_certificate_set_x509_key_file(raw, cert.c_str(), key.c_str(), GNUTLS_X509_FMT_PEM); rc < 0) {
        return gnutls_error(fmt::format("tls-creds: reading {} and {}", cert, key), rc);
    }
    if (!crl.empty() && ::access(crl.c_str(), R_OK) == 0) {
        if (int rc = gnutls_certificate_set_x509_crl_file(raw, crl.c_str(), GNUTLS_X509_FMT_PEM); rc < 0)
            return gnutls_error("tls-creds: reading " + crl, rc);
    }
    return c;
}

bool tls_authz_allows(std::string_view authz, std::string_view dn, std::string_view cn) {
    if (authz.empty()) return true;
    std::string d(dn), c(cn);
    size_t start = 0;
    while (start <= authz.size()) {
        size_t end = authz.find(';', start);
        if (end == std::string_view::npos) end = authz.size();
        std::string pattern(authz.substr(start, end - start));
        if (!pattern.empty()) {
            const std::string& subject = pattern.find('=') != std::string::npos ? d : c;
            if (::fnmatch(pattern.c_str(), subject.c_str(), 0) == 0) return true;
        }
        start = end + 1;
    }
    return false;
}

}  // namespace vmm::migration
