#include "vmmd/server/tls_terminator.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <vector>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"
#include "vmm/stream/socket_stream.h"
#include "vmm/stream/tls_stream.h"
#include "vmmd/rpc/message.h"

namespace vmmd {

using vmm::Error;
using vmm::Status;
using vmm::UniqueFd;

vmm::Result<std::unique_ptr<TlsTerminator>> TlsTerminator::start(UniqueFd tcp, const TlsServerConfig& config, std::string peer,
                                                                  UniqueFd* plain) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return Error::from_errno("socketpair for a TLS client");
    UniqueFd ours(sv[0]);
    *plain = UniqueFd(sv[1]);
    auto cancel = vmm::stream::CancelToken::create();
    if (!cancel) return cancel.error();
    auto t = std::unique_ptr<TlsTerminator>(
        new TlsTerminator(std::move(*cancel), std::move(tcp), std::move(ours), config, std::move(peer)));
    t->thread_ = std::thread([p = t.get()] { p->run(); });
    return t;
}

TlsTerminator::TlsTerminator(vmm::stream::CancelToken cancel, UniqueFd tcp, UniqueFd pair, TlsServerConfig config, std::string peer)
    : cancel_(std::move(cancel)), tcp_(std::move(tcp)), pair_(std::move(pair)), config_(std::move(config)),
      peer_(std::move(peer)) {}

TlsTerminator::~TlsTerminator() {
    stop();
    if (thread_.joinable()) thread_.join();
}

void TlsTerminator::stop() { cancel_.cancel(); }

void TlsTerminator::run() {
    vmm::name_this_thread("vmmd-tls");
    // The stream owns the TCP socket from here; the pair's end stays ours (the pumps' other side).
    vmm::stream::SocketWords words{.carries = "libvirt session",
                                   .cancelled = "vmmd closed the connection (it is stopping)",
                                   .io_timeout_setting = "no limit",
                                   .first_words_setting = "vmmd's limit for a TLS client's first words"};
    auto plain = std::make_unique<vmm::stream::SocketStream>(std::move(tcp_), cancel_, std::chrono::milliseconds(-1), peer_,
                                                             false, std::move(words));
    auto tls = vmm::stream::tls_handshake(
        std::move(plain), vmm::stream::libvirt_server_tls_setup(config_.files, config_.allowed, config_.handshake_within));
    if (tls) {
        // libvirt's client waits for one byte saying the server accepted its certificate
        // (virnetclient.c: "If we make the grade, it will send us a '\1' byte").
        const uint8_t accepted = 1;
        Status s = (*tls)->write(std::span<const uint8_t>(&accepted, 1));
        if (s) s = (*tls)->flush();
        if (!s) tls = s.error();
    }
    if (!tls) {
        vmm::log::warn("vmmd: refused the TLS client {}: {}", peer_, tls.error().message());
    } else {
        // Two directions at once: one reader and one writer of the session, as TLS allows.
        // A connection ends when either side closes it (no line for that); a broken frame or
        // a failed record is logged.
        std::thread out([this, &tls] {
            vmm::name_this_thread("vmmd-tls-out");
            if (auto s = pump_out(**tls); !s && !cancel_.cancelled()) vmm::log::warn("vmmd: TLS client {}: {}", peer_, s.error().message());
            (void)(*tls)->shutdown();  // the client hears the end; pump_in's read returns
        });
        if (auto s = pump_in(**tls); !s && !cancel_.cancelled()) vmm::log::warn("vmmd: TLS client {}: {}", peer_, s.error().message());
        ::shutdown(pair_.get(), SHUT_RDWR);  // the server's client thread ends; pump_out reads the end
        out.join();
    }
    pair_.reset();
    done_ = true;
}

// Each message whole: its length word checked before its body is read.
Status TlsTerminator::pump_in(vmm::stream::ByteStream& tls) {
    std::vector<uint8_t> message;
    for (;;) {
        std::array<uint8_t, rpc::kLengthSize> word{};
        if (auto s = tls.read_exact(word); !s) return {};  // the client left (or was cut)
        auto n = rpc::decode_length(word);
        if (!n) return n.error();
        message.assign(word.begin(), word.end());
        message.resize(rpc::kLengthSize + *n);
        if (auto s = tls.read_exact(std::span<uint8_t>(message).subspan(rpc::kLengthSize)); !s) return s;
        for (size_t sent = 0; sent < message.size();) {
            ssize_t w = ::send(pair_.get(), message.data() + sent, message.size() - sent, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) return Error::from_errno("to vmmd's server");
            sent += static_cast<size_t>(w);
        }
    }
}

Status TlsTerminator::pump_out(vmm::stream::ByteStream& tls) {
    std::vector<uint8_t> buffer(64 * 1024);
    for (;;) {
        pollfd fds[2] = {{pair_.get(), POLLIN, 0}, {cancel_.fd(), POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return Error::from_errno("poll in a TLS client's pump");
        }
        if (fds[1].revents != 0) return Error("vmmd is stopping");
        ssize_t r = ::read(pair_.get(), buffer.data(), buffer.size());
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Error::from_errno("from vmmd's server");
        if (r == 0) return {};  // the server closed the connection
        if (auto s = tls.write(std::span<const uint8_t>(buffer.data(), static_cast<size_t>(r))); !s) return s;
        if (auto s = tls.flush(); !s) return s;
    }
}

}  // namespace vmmd
