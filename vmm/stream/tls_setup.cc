#include "vmm/stream/tls_setup.h"

#include <fmt/format.h>

namespace vmm::stream {

TlsSetup migration_tls_setup(TlsRole role, const MigrationTls& settings) {
    TlsSetup setup;
    setup.role = role;
    setup.creds_dir = settings.creds;
    setup.hostname = settings.hostname.empty() ? settings.uri_host : settings.hostname;
    setup.authz = settings.authz;
    setup.first_words_within = settings.connect_timeout;
    if (settings.rekey_records != 0) setup.rekey_records = settings.rekey_records;
    setup.kernel_send = settings.kernel_send;
    return setup;
}

TlsSetup libvirt_server_tls_setup(const TlsFiles& files, const std::string& allowed_dn,
                                  std::chrono::milliseconds handshake_within) {
    TlsSetup setup;
    setup.role = TlsRole::server;
    setup.files = files;
    setup.authz = allowed_dn;
    setup.peer_word = "client";
    setup.authz_setting = "--tls-allowed-dn";
    setup.first_words_within = handshake_within;
    setup.first_words_setting = fmt::format("{} s of connecting (vmmd's limit for a TLS client)", handshake_within.count() / 1000);
    return setup;
}

}  // namespace vmm::stream
