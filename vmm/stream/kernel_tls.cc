#include "vmm/stream/kernel_tls.h"

#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "vmm/common/fd.h"

namespace vmm::stream {

namespace {

constexpr uint8_t kHandshakeRecord = 22;  // TLS ContentType handshake
constexpr size_t kSaltSize = 4;          // of the 12-byte static IV, for the AES-GCM ciphers

// The setsockopt(TLS_TX) argument for `keys`: the key, the IV split as the kernel wants it, the
// record number.
template <typename Info>
Info crypto_info(const KernelTlsKeys& keys, uint16_t cipher, size_t salt) {
    Info info{};
    info.info.version = TLS_1_3_VERSION;
    info.info.cipher_type = cipher;
    std::memcpy(info.key, keys.key.data(), sizeof info.key);
    if constexpr (sizeof(info.salt) > 0) std::memcpy(info.salt, keys.iv.data(), salt);
    std::memcpy(info.iv, keys.iv.data() + salt, sizeof info.iv);
    std::memcpy(info.rec_seq, keys.seq.data(), sizeof info.rec_seq);
    return info;
}

// setsockopt(SOL_TLS, TLS_TX) with `keys`; errno kept for the caller.
int set_tx(int fd, const KernelTlsKeys& keys) {
    auto set = [fd](const auto& info) { return ::setsockopt(fd, SOL_TLS, TLS_TX, &info, sizeof info); };
    if (keys.iv.size() != 12) {
        errno = EINVAL;
        return -1;
    }
    switch (keys.cipher) {
        case TLS_CIPHER_AES_GCM_128:
            if (keys.key.size() != TLS_CIPHER_AES_GCM_128_KEY_SIZE) break;
            return set(crypto_info<tls12_crypto_info_aes_gcm_128>(keys, TLS_CIPHER_AES_GCM_128, kSaltSize));
        case TLS_CIPHER_AES_GCM_256:
            if (keys.key.size() != TLS_CIPHER_AES_GCM_256_KEY_SIZE) break;
            return set(crypto_info<tls12_crypto_info_aes_gcm_256>(keys, TLS_CIPHER_AES_GCM_256, kSaltSize));
        case TLS_CIPHER_CHACHA20_POLY1305:
            if (keys.key.size() != TLS_CIPHER_CHACHA20_POLY1305_KEY_SIZE) break;
            return set(crypto_info<tls12_crypto_info_chacha20_poly1305>(keys, TLS_CIPHER_CHACHA20_POLY1305, 0));
        default:
            break;
    }
    errno = EINVAL;
    return -1;
}

// A connected loopback TCP pair's sending end, or -1.
UniqueFd loopback_connection(UniqueFd& listener, UniqueFd& accepted) {
    listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!listener || !client) return {};
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof at;
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || ::listen(listener.get(), 1) != 0 ||
        ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&at), &len) != 0 ||
        ::connect(client.get(), reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
        return {};
    }
    accepted = UniqueFd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    return accepted ? std::move(client) : UniqueFd{};
}

KernelTlsSupport probe() {
    KernelTlsSupport s;
    UniqueFd listener, accepted;
    UniqueFd fd = loopback_connection(listener, accepted);
    if (!fd) {
        s.why = "no loopback TCP connection to try it on";
        return s;
    }
    if (::setsockopt(fd.get(), SOL_TCP, TCP_ULP, "tls", sizeof "tls") != 0) {
        s.why = fmt::format("the kernel has no TLS ({}: modprobe tls)", std::strerror(errno));
        return s;
    }
    KernelTlsKeys keys{TLS_CIPHER_AES_GCM_256, std::vector<uint8_t>(32, 1), std::vector<uint8_t>(12, 2), {}};
    if (set_tx(fd.get(), keys) != 0) {
        s.why = fmt::format("the kernel's TLS does not send TLS 1.3 with AES-256-GCM ({})", std::strerror(errno));
        return s;
    }
    s.available = true;
    keys.key.assign(32, 3);
    s.renews = set_tx(fd.get(), keys) == 0;  // Linux 6.14 takes a new key; before it, EBUSY
    return s;
}

}  // namespace

const KernelTlsSupport& kernel_tls_support() {
    static const KernelTlsSupport support = probe();
    return support;
}

Status kernel_tls_send(int fd, const KernelTlsKeys& keys) {
    if (::setsockopt(fd, SOL_TCP, TCP_ULP, "tls", sizeof "tls") != 0)
        return Error::from_errno("kernel TLS: attaching it to the socket (modprobe tls)");
    if (set_tx(fd, keys) != 0) return Error::from_errno("kernel TLS: giving it the session's sending key");
    return {};
}

Result<uint64_t> kernel_tls_sent_records(int fd) {
    union {
        tls_crypto_info info;
        tls12_crypto_info_aes_gcm_128 gcm128;
        tls12_crypto_info_aes_gcm_256 gcm256;
        tls12_crypto_info_chacha20_poly1305 chacha;
    } u{};
    socklen_t len = sizeof u;
    if (::getsockopt(fd, SOL_TLS, TLS_TX, &u, &len) != 0) return Error::from_errno("kernel TLS: reading its record number");
    const unsigned char* seq = nullptr;
    switch (u.info.cipher_type) {
        case TLS_CIPHER_AES_GCM_128: seq = u.gcm128.rec_seq; break;
        case TLS_CIPHER_AES_GCM_256: seq = u.gcm256.rec_seq; break;
        case TLS_CIPHER_CHACHA20_POLY1305: seq = u.chacha.rec_seq; break;
        default: return Error(fmt::format("kernel TLS: an unknown cipher {} on the socket", u.info.cipher_type));
    }
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n = (n << 8) | seq[i];
    return n;
}

Status kernel_tls_key_update(int fd, const KernelTlsKeys& next, const std::function<Status()>& writable) {
    // KeyUpdate (RFC 8446 4.6.3): type 24, length 1, update_not_requested; a record of type
    // handshake, which the kernel encrypts under the key in use.
    const uint8_t message[] = {24, 0, 0, 1, 0};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint8_t))] = {};
    iovec iov{const_cast<uint8_t*>(message), sizeof message};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_TLS;
    c->cmsg_type = TLS_SET_RECORD_TYPE;
    c->cmsg_len = CMSG_LEN(sizeof(uint8_t));
    *CMSG_DATA(c) = kHandshakeRecord;
    for (;;) {
        ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n == static_cast<ssize_t>(sizeof message)) break;
        if (n >= 0) return Error("kernel TLS: a key update went out in part");  // a record is sent whole or not at all
        if (errno == EINTR) continue;
        if (errno != EAGAIN) return Error::from_errno("kernel TLS: sending a key update");
        if (auto s = writable(); !s) return s;
    }
    if (set_tx(fd, next) != 0) return Error::from_errno("kernel TLS: giving it the renewed sending key");
    return {};
}

}  // namespace vmm::stream
