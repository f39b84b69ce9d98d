// libvirt's RPC messages (src/rpc/virnetprotocol.x): a 4-byte length that counts itself, a
// 24-byte header {program, version, procedure, type, serial, status}, then the payload: a call's
// arguments, a reply's return value, or on status ERROR a remote_error. Pure: bytes in, values
// out; every length is checked against libvirt's own maximum before anything is read or kept.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vmmd/xdr/xdr.h"

namespace vmmd::rpc {

using vmm::Error;
using vmm::Result;
using vmm::Status;

constexpr uint32_t kRemoteProgram = 0x20008086;     // REMOTE_PROGRAM
constexpr uint32_t kRemoteVersion = 1;
constexpr uint32_t kQemuProgram = 0x20008087;       // QEMU_PROGRAM (src/remote/qemu_protocol.x)
constexpr uint32_t kQemuVersion = 1;
constexpr uint32_t kKeepaliveProgram = 0x6b656570;  // KEEPALIVE_PROGRAM ("keep")
constexpr uint32_t kKeepaliveVersion = 1;
constexpr int32_t kKeepalivePing = 1, kKeepalivePong = 2;

constexpr size_t kLengthSize = 4;
constexpr size_t kHeaderSize = 24;
constexpr size_t kMaxMessage = 16777216;       // VIR_NET_MESSAGE_MAX: header and payload
constexpr size_t kMaxString = 4194304;         // REMOTE_STRING_MAX

enum class Type : uint32_t { call = 0, reply = 1, message = 2, stream = 3, call_with_fds = 4, reply_with_fds = 5 };
enum class ReplyStatus : uint32_t { ok = 0, error = 1, more = 2 };

struct Header {
    uint32_t program = kRemoteProgram;
    uint32_t version = kRemoteVersion;
    int32_t procedure = 0;
    Type type = Type::call;
    uint32_t serial = 0;
    ReplyStatus status = ReplyStatus::ok;
};

struct Message {
    Header header;
    std::vector<uint8_t> payload;
};

// The length word: how many bytes follow it (header and payload), checked to hold a header and
// to stay within kMaxMessage.
Result<size_t> decode_length(std::span<const uint8_t, kLengthSize> word);
// A message without its length word.
Result<Message> decode_message(std::span<const uint8_t> bytes);
// A whole message, length word first.
std::vector<uint8_t> encode_message(const Header& h, std::span<const uint8_t> payload);

// virErrorPtr on the wire (remote_error): what a failed call answers with.
struct RemoteError {
    int32_t code = 0;    // virErrorNumber
    int32_t domain = 0;  // virErrorDomain
    std::string message;
    int32_t level = 2;   // VIR_ERR_ERROR
    std::optional<std::string> str1;
};
std::vector<uint8_t> encode_error(const RemoteError& e);
Result<RemoteError> decode_error(std::span<const uint8_t> payload);

}  // namespace vmmd::rpc
