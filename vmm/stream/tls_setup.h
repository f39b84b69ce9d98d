// TlsSetup: what a TLS session is made with (tls_stream.h's tls_handshake), and the one place each
// of its users' settings become one: a migration's (tls-creds in QEMU's layout, over a socket or
// the RDMA plugin's control channel) and vmmd's libvirt socket (libvirt's files, its client's
// names). A change to how a setting reaches TLS is made here, for every user at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "vmm/stream/tls_credentials.h"

namespace vmm::stream {

struct TlsSetup {
    TlsRole role = TlsRole::client;
    std::string creds_dir;  // tls-creds (QEMU's layout), or
    TlsFiles files;         // ... these files, when files.ca is set (vmmd: libvirt's layout)
    std::string hostname;   // client: the name the server's certificate must carry
    std::string authz;      // server: tls-authz
    // What messages call the peer and the authz setting (vmmd: "client", "--tls-allowed-dn").
    std::string peer_word;  // default: "destination" for a client, "source" for a server
    std::string authz_setting = "tls-authz";
    // Server: a peer that has said nothing this long is dropped before the handshake.
    std::chrono::milliseconds first_words_within{10000};
    std::string first_words_setting = "x-connect-timeout";  // what bounds it, in the user's words
    uint64_t rekey_records = uint64_t{1} << 24;  // records under one key before the writer renews it
    // x-tls-kernel: after the handshake the kernel encrypts what this side sends, where the
    // stream below is a TCP socket and the kernel has TLS (kernel_tls.h); GnuTLS keeps reading.
    bool kernel_send = false;
};

// A migration's TLS settings, as the socket transports and the RDMA plugin have them.
struct MigrationTls {
    std::string creds;     // tls-creds: a directory in QEMU's layout
    std::string hostname;  // tls-hostname: the name the destination's certificate must carry ...
    std::string uri_host;  // ... the URI's host when it is empty
    std::string authz;     // tls-authz
    std::chrono::milliseconds connect_timeout{10000};  // x-connect-timeout: a silent peer is dropped
    uint64_t rekey_records = 0;                         // x-tls-rekey-records; 0: TlsSetup's default
    bool kernel_send = false;                           // x-tls-kernel
};
TlsSetup migration_tls_setup(TlsRole role, const MigrationTls& settings);

// vmmd's libvirt socket (--listen-tls): the server side, libvirt's files, its client's names
// (--tls-allowed-dn), and what its messages call the peer.
TlsSetup libvirt_server_tls_setup(const TlsFiles& files, const std::string& allowed_dn,
                                  std::chrono::milliseconds handshake_within);

}  // namespace vmm::stream
