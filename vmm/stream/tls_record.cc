#include "vmm/stream/tls_record.h"

#include <fmt/format.h>

namespace vmm::stream {

Result<uint16_t> decode_tls_record_header(std::span<const uint8_t, kTlsRecordHeader> header) {
    uint8_t type = header[0];
    if (type < 20 || type > 24 || header[1] != 3) {
        // 'V' is a vmm stream's magic ("VMMIGRAT"), 'Q' QEMU's ("QEVM"): plaintext where TLS was expected.
        if (header[0] == 'V' || header[0] == 'Q') {
            return Error("the peer speaks a plaintext migration stream where TLS was expected: set tls-creds on both "
                         "sides, or on neither");
        }
        return Error(fmt::format("the peer does not speak TLS (its first bytes are {:02x} {:02x} {:02x}): set tls-creds on "
                                 "both sides, or on neither",
                                 header[0], header[1], header[2]));
    }
    uint16_t length = static_cast<uint16_t>((header[3] << 8) | header[4]);
    if (length > kTlsMaxRecordBody) {
        return Error(fmt::format("TLS: a record of {} bytes, more than the {} TLS allows", length, kTlsMaxRecordBody));
    }
    return length;
}

}  // namespace vmm::stream
