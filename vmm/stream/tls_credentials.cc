#include "vmm/stream/tls_credentials.h"

#include <fmt/format.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace vmm::stream {

namespace {

Status check_file(const std::string& path, const char* what) {
    if (::access(path.c_str(), R_OK) == 0) return {};
    return Error::from_errno(fmt::format("TLS credentials: {} {}", what, path), errno,
                             "tls-creds names a directory of ca-cert.pem, server-cert.pem, server-key.pem, client-cert.pem "
                             "and client-key.pem, vmmd's --pki-dir one of cacert.pem, servercert.pem and serverkey.pem "
                             "(scripts/make-test-pki.sh makes both)");
}

Error gnutls_error(const std::string& what, int rc) { return Error(fmt::format("{}: {}", what, gnutls_strerror(rc))); }

// What a credential file is now: a file replaced or rewritten differs in one of these.
struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const Stamp&) const = default;
};

std::vector<Stamp> stamps(const TlsFiles& f) {
    std::vector<Stamp> out;
    for (const std::string* path : {&f.ca, &f.cert, &f.key, &f.crl}) {
        struct stat st {};
        if (path->empty() || ::stat(path->c_str(), &st) != 0) {
            out.push_back({});
            continue;
        }
        out.push_back({st.st_dev, st.st_ino, st.st_size, int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec});
    }
    return out;
}

// Loaded credentials by their files, reused while the files stay as they were: parsing an RSA
// key and its certificate takes ~3 ms, which every connection of a migration (and each multifd
// lane) would otherwise spend before its handshake.
struct Cache {
    std::mutex mu;
    std::map<std::tuple<std::string, std::string, std::string, std::string>, std::pair<std::vector<Stamp>, TlsCredentials>> loaded;
};
Cache& cache() {
    static Cache c;
    return c;
}

}  // namespace

Result<TlsCredentials> TlsCredentials::load(const std::string& dir, TlsRole role) {
    std::string name = role == TlsRole::server ? "server" : "client";
    return load(TlsFiles{dir + "/ca-cert.pem", dir + "/" + name + "-cert.pem", dir + "/" + name + "-key.pem", dir + "/ca-crl.pem"});
}

Result<TlsCredentials> TlsCredentials::load(const TlsFiles& files) {
    auto key = std::tuple{files.ca, files.cert, files.key, files.crl};
    std::vector<Stamp> now = stamps(files);
    {
        std::lock_guard lock(cache().mu);
        auto it = cache().loaded.find(key);
        if (it != cache().loaded.end() && it->second.first == now) return it->second.second;
    }
    auto c = read(files);
    if (!c) return c.error();
    std::lock_guard lock(cache().mu);
    cache().loaded.insert_or_assign(key, std::pair{now, *c});
    return c;
}

void TlsCredentials::warm(const std::string& dir) {
    (void)load(dir, TlsRole::server);
    (void)load(dir, TlsRole::client);
}

Result<TlsCredentials> TlsCredentials::read(const TlsFiles& files) {
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

}  // namespace vmm::stream
