// The TLS record layer's framing (RFC 8446 §5.1), as a stream that carries TLS reads it: a
// 5-byte header (content type, legacy version, length), then that many bytes. Reading whole
// records lets a TLS session run over any ByteStream, one that can only read exactly what it is
// asked (an RDMA control channel) included. Pure: bytes in, a checked length out.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "vmm/common/result.h"

namespace vmm::stream {

constexpr size_t kTlsRecordHeader = 5;
// The longest record body TLS allows: 2^14 bytes of plaintext plus 256 of expansion (TLS 1.3's
// TLSCiphertext; TLS 1.2's is larger by 1 KiB, so the larger bound).
constexpr size_t kTlsMaxRecordBody = (1u << 14) + 2048;

// The body length a record header announces, checked: a content type TLS defines (20 to 24),
// a legacy version 3.x, a length within kTlsMaxRecordBody. A peer that speaks something else
// (a plaintext migration stream, an HTTP client) is named as such.
Result<uint16_t> decode_tls_record_header(std::span<const uint8_t, kTlsRecordHeader> header);

}  // namespace vmm::stream
