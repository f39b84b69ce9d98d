// Candidates: the connections a listener accepts while it sets up a migration, each checked (its
// TLS handshake, its first words) on a thread of its own, so that no connection waits on
// another's: a port scan, a silent client or a slow handshake holds up nobody. What checks out
// is a main connection (a source's first) or a side one (a multifd lane, postcopy-preempt's),
// queued for whoever takes that kind; the side ones may arrive, and finish their handshakes,
// before the main one does. One still being checked when its time is up (`within()`, read as it
// is accepted, from then) is cut; one that fails is logged and dropped.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"
#include "vmm/stream/byte_stream.h"

namespace vmm::migration {

class Candidates {
public:
    enum class Kind { main, side };
    struct Checked {
        std::unique_ptr<stream::ByteStream> stream;
        Kind kind;
    };
    // Turns an accepted socket into a stream of a source and says which kind, or why it is none.
    using Check = std::function<Result<Checked>(UniqueFd fd)>;

    Candidates(Check check, std::string what, std::function<std::chrono::milliseconds()> within);
    ~Candidates();  // cuts every check still running and waits for it
    Candidates(const Candidates&) = delete;
    Candidates& operator=(const Candidates&) = delete;

    // Starts checking `fd` on a thread of its own; beyond kMaxRunning checks at once, a new one
    // is dropped at once (a flood of connections costs no more than that many threads).
    void add(UniqueFd fd);
    static constexpr size_t kMaxRunning = 32;
    // The first stream of that kind that checked out and was not taken yet; none yet otherwise.
    // Cuts any candidate past its time.
    std::unique_ptr<stream::ByteStream> take(Kind kind);
    // How long the caller may wait before take() has something to do (a check may end sooner:
    // it wakes `wake_fd()`).
    std::chrono::milliseconds next_deadline() const;
    // Readable when a check has ended (poll it beside the listening socket).
    int wake_fd() const { return wake_.get(); }

private:
    struct Running {
        int fd;  // still the checking thread's: cut (shutdown) under the lock, never closed here
        std::chrono::milliseconds within;
        std::chrono::steady_clock::time_point deadline;
        bool cut = false;
    };
    void run(uint64_t id, UniqueFd fd);
    void finish(uint64_t id);

    Check check_;
    std::string what_;
    std::function<std::chrono::milliseconds()> within_;
    UniqueFd wake_;  // an eventfd
    mutable std::mutex mutex_;
    std::vector<std::pair<uint64_t, Running>> running_;
    std::deque<std::unique_ptr<stream::ByteStream>> checked_[2];  // by Kind
    uint64_t next_id_ = 0;
    std::vector<std::jthread> threads_;  // joined as this goes, after the destructor cut them
};

}  // namespace vmm::migration
