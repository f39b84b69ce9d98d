// PullServer (proto/pull_wire.h; docs/rdma-protocol.md, "Pulling a saved guest"): a saved
// guest's file, mapped read-only, registered once for remote read and served to every client
// that connects, until the server is destroyed. One thread ("rdma-pull-serve") takes the CM
// events (connections made and ended) and the clients' few messages (how much each has read);
// the clients' READs never reach it. A client that breaks the protocol is cut off with a line
// saying why, and the others go on.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cm.h"
#include "endpoint.h"
#include "proto/pull_wire.h"
#include "vmm/common/fd.h"
#include "vmm/common/mapping.h"

namespace rdma_migrate {

class PullServer {
public:
    struct Client {
        std::string peer;
        uint64_t pulled = 0;  // what it says it has read
        uint64_t ms = 0;      // since it connected, until it left
        enum class State { pulling, done, gone } state = State::pulling;
        std::string why;  // gone: why
    };
    static constexpr size_t kMaxClients = 64;  // connected at once; more are refused, saying so

    // Listens on host:port and serves [base, base + length) (unchanging while served).
    static Result<std::unique_ptr<PullServer>> start(const std::string& host, uint16_t port, const void* base,
                                                     uint64_t length, Timeouts t);
    ~PullServer();  // every client cut off, then the registration goes
    PullServer(const PullServer&) = delete;
    PullServer& operator=(const PullServer&) = delete;

    std::vector<Client> clients() const;  // every client so far, in the order they came
    // The served region as clients see it (the hostile-peer tests aim READs past it).
    uint64_t address() const { return reinterpret_cast<uint64_t>(base_); }
    uint32_t rkey() const;

private:
    struct Conn;
    PullServer() = default;
    Status device(ibv_context* ctx);  // the PD, CQ and registration, made with the first client
    void run();
    void take_cm_event(const CmEvent& ev);
    Status accept(rdma_cm_id* raw, const CmEvent& ev, uint32_t& index);
    Status offer(Conn& c);
    void take_completions();
    Status take_message(Conn& c, const ibv_wc& wc);
    Status post_receive(Conn& c, uint32_t slot);
    // Marks client `c` as ended (done or gone, with why) and hangs up; the id goes at its
    // DISCONNECTED event.
    void end(Conn& c, Client::State state, const std::string& why);
    Conn* find(rdma_cm_id* id);
    void forget(rdma_cm_id* id);

    const uint8_t* base_ = nullptr;
    uint64_t length_ = 0;
    std::string describe_;
    Timeouts timeouts_;
    // Destroyed in reverse: the clients' queue pairs first, then what they share.
    EventChannel events_;
    CmId listen_id_;
    ProtectionDomain pd_;
    CompletionChannel channel_;
    CompletionQueue cq_;
    MemoryRegion served_;
    uint8_t reads_ = 1;  // READs at once a client's queue pair takes
    std::map<rdma_cm_id*, std::unique_ptr<Conn>> conns_;  // the serving thread's
    mutable std::mutex mutex_;
    std::vector<Client> clients_;  // under mutex_
    std::vector<std::chrono::steady_clock::time_point> since_;  // under mutex_: when each came
    vmm::UniqueFd stop_;  // an eventfd: the thread ends when it is written
    std::thread thread_;
};

}  // namespace rdma_migrate
