// Kernel TLS (x-tls-kernel): a TLS session's sending side handed to the kernel after the
// handshake (GnuTLS keeps the receiving side), so that what the stream sends is plaintext to
// the socket and the kernel encrypts it: guest RAM is spliced into the socket again, as without
// TLS. TCP only (the kernel's TLS is a TCP upper-layer protocol), TLS 1.3 with AES-GCM or
// ChaCha20-Poly1305. Renewing the sending key in the kernel (a KeyUpdate, then the new key)
// needs Linux 6.14; before it a connection may only send until its key's limit.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vmm/common/result.h"

namespace vmm::stream {

// One direction's TLS 1.3 traffic keys as GnuTLS has them (gnutls_record_get_state).
struct KernelTlsKeys {
    int cipher = 0;                 // TLS_CIPHER_* (linux/tls.h)
    std::vector<uint8_t> key;       // the traffic key
    std::vector<uint8_t> iv;        // the 12-byte static IV
    std::array<uint8_t, 8> seq{};   // the next record's number, big-endian
};

// A stream whose sending side the kernel's TLS can take (ByteStream::kernel_tls(): a TCP socket's).
class KernelTlsSender {
public:
    virtual ~KernelTlsSender() = default;
    // From now on the kernel encrypts what the stream sends, with `keys`; false, with nothing
    // changed, where it cannot after all (no kernel TLS here).
    virtual Result<bool> kernel_tls_start(const KernelTlsKeys& keys) = 0;
    // The records sent under the current key so far (the kernel's record number).
    virtual Result<uint64_t> kernel_tls_records() = 0;
    // A KeyUpdate record under the key in use, then `next` for what follows.
    virtual Status kernel_tls_renew(const KernelTlsKeys& next) = 0;
};

// What this kernel can do, found once on a loopback connection of its own.
struct KernelTlsSupport {
    bool available = false;  // TLS 1.3 sending in the kernel
    bool renews = false;     // ... and a new sending key on the same socket (Linux 6.14)
    std::string why;         // when not available: what is missing
};
const KernelTlsSupport& kernel_tls_support();

// The kernel's TLS for what `fd` (a connected TCP socket) sends from now on.
Status kernel_tls_send(int fd, const KernelTlsKeys& keys);
// The records sent under the current key so far (the kernel's record number for the next one).
Result<uint64_t> kernel_tls_sent_records(int fd);
// A KeyUpdate record under the current key (update_not_requested), then `next` for what follows;
// `writable` waits until the (non-blocking) socket takes more.
Status kernel_tls_key_update(int fd, const KernelTlsKeys& next, const std::function<Status()>& writable);

}  // namespace vmm::stream
