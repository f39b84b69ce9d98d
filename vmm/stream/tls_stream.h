// TlsStream: a ByteStream over a TLS 1.3 session (GnuTLS) that runs over another ByteStream,
// so every path that takes a stream (the main connection, multifd's lanes, the return path,
// postcopy-preempt's connection, a recovery's) takes a TLS one as it is. The session reads
// whole TLS records from the stream under it (tls_record.h), so it needs of that stream
// only read_exact and write: a socket's, or an RDMA control channel's.
//
// Both sides authenticate (tls_credentials.h). One thread may write while another reads (the
// return path): each direction has its own buffers, and the writer renews its own key (a TLS
// 1.3 KeyUpdate that asks nothing of the peer) every `rekey_records` records, long before
// AES-GCM's limit; GnuTLS's own rekey, which makes the peer's reading thread answer with a write
// of its own, is off (it is what broke QEMU's TLS migrations after some 64 GB).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/stream/byte_stream.h"
#include "vmm/stream/tls_setup.h"

namespace vmm::stream {

// Runs the handshake over `inner` and checks the peer; the TLS stream, or why the peer was
// refused (one line: whose certificate, what was wrong with it).
Result<std::unique_ptr<ByteStream>> tls_handshake(std::unique_ptr<ByteStream> inner, const TlsSetup& setup);

// What a TLS stream has done (tests, `info migrate`'s log): key updates sent so far, and whether
// the kernel encrypts what it sends (x-tls-kernel taken).
uint64_t tls_key_updates(const ByteStream& stream);
bool tls_kernel_sends(const ByteStream& stream);

// `size` bytes of keying material exported from the session under `label` (RFC 8446 §7.5:
// both ends derive the same bytes, nobody else can): what keys the RDMA transport's RAM sums.
Result<std::vector<uint8_t>> tls_export(const ByteStream& stream, const std::string& label, size_t size);

}  // namespace vmm::stream
