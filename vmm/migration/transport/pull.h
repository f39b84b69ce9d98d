// Pulling a saved guest (the scheme "<transport>-pull", e.g. rdma-pull:HOST:PORT): one vmm
// serves a saved guest's file for remote read (FileServer), and any number of others start that
// guest at once and bring its pages in as it touches them and in the background, by reading the
// server's copy (PulledFile), never waking the server's CPU. On the clone's side it is a lazy
// restore (file_transport.h's) whose bytes come from the server instead of a local file.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/result.h"

namespace vmm::migration {

// A served file, as a client reads it. Thread-safe: any thread may read.
class PulledFile {
public:
    virtual ~PulledFile() = default;
    virtual uint64_t size() const = 0;
    // Bytes [at, at + into.size()) of the served file, whole.
    virtual Status read(std::span<uint8_t> into, uint64_t at) = 0;
    virtual std::string describe() const = 0;  // "rdma-pull:10.0.0.1:4444"
};

// One client of a FileServer, as the server knows it.
struct PullClient {
    enum class State { pulling, done, gone };
    std::string peer;
    uint64_t pulled = 0;  // bytes it says it has read
    uint64_t ms = 0;      // since it connected (until it left)
    State state = State::pulling;
    std::string why;  // gone: why, when known
};

// A file served for remote read until destroyed.
class FileServer {
public:
    virtual ~FileServer() = default;
    virtual std::vector<PullClient> clients() const = 0;
};

const char* pull_state_name(PullClient::State s);

}  // namespace vmm::migration
