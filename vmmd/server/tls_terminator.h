// TlsTerminator: one client of vmmd's --listen-tls socket. Its thread runs the TLS handshake
// (libvirt's pki layout, the client's certificate required, signed by the CA and named in the
// allowed list), then pumps: each RPC message the client sends (its length word checked) into a
// socketpair whose other end the server serves like any local client, and what the server
// writes there back into the TLS session. The RPC code never sees TLS.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"
#include "vmm/stream/cancel.h"
#include "vmm/stream/byte_stream.h"
#include "vmm/stream/tls_credentials.h"

namespace vmmd {

struct TlsServerConfig {
    vmm::stream::TlsFiles files;  // cacert.pem, servercert.pem, serverkey.pem
    std::string allowed;  // client certificate names accepted (';'-separated patterns, tls_credentials.h); empty: any the CA signed
    std::chrono::milliseconds handshake_within{10000};  // a client that says nothing this long is dropped
};

class TlsTerminator {
public:
    // Takes the accepted TCP connection; the caller serves `*plain` (the socketpair's other end).
    static vmm::Result<std::unique_ptr<TlsTerminator>> start(vmm::UniqueFd tcp, const TlsServerConfig& config,
                                                             std::string peer, vmm::UniqueFd* plain);
    ~TlsTerminator();  // stops and joins
    TlsTerminator(const TlsTerminator&) = delete;
    TlsTerminator& operator=(const TlsTerminator&) = delete;
    void stop();  // from any thread: every wait returns
    bool done() const { return done_; }

private:
    TlsTerminator(vmm::stream::CancelToken cancel, vmm::UniqueFd tcp, vmm::UniqueFd pair, TlsServerConfig config,
                  std::string peer);
    void run();
    vmm::Status pump_in(vmm::stream::ByteStream& tls);   // client -> server, message by message
    vmm::Status pump_out(vmm::stream::ByteStream& tls);  // server -> client, as it comes

    vmm::stream::CancelToken cancel_;
    vmm::UniqueFd tcp_, pair_;
    TlsServerConfig config_;
    std::string peer_;
    std::thread thread_;
    std::atomic<bool> done_{false};
};

}  // namespace vmmd
