#include "vmm/migration/transport/candidates.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "vmm/common/log.h"

namespace vmm::migration {

Candidates::Candidates(Check check, std::string what, std::function<std::chrono::milliseconds()> within)
    : check_(std::move(check)), what_(std::move(what)), within_(within),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

Candidates::~Candidates() {
    std::lock_guard lock(mutex_);
    for (auto& [id, r] : running_) ::shutdown(r.fd, SHUT_RDWR);  // each check fails at once
    size_t left = checked_[0].size() + checked_[1].size();
    if (left != 0) {
        log::warn("{}: dropped {} connection(s) that began as a source's but were no part of the migration taken (a "
                  "second source, or a multifd lane of none)", what_, left);
    }
}

void Candidates::add(UniqueFd fd) {
    std::lock_guard lock(mutex_);
    if (running_.size() >= kMaxRunning) {
        log::warn("{}: dropped a connection: {} others are still being checked", what_, running_.size());
        return;  // fd closes here
    }
    uint64_t id = next_id_++;
    auto within = within_();
    running_.push_back({id, Running{fd.get(), within, std::chrono::steady_clock::now() + within}});
    threads_.emplace_back([this, id, fd = std::move(fd)]() mutable { run(id, std::move(fd)); });
}

void Candidates::run(uint64_t id, UniqueFd fd) {
    auto checked = check_(std::move(fd));  // the stream owns the socket from here, and closes it
    {
        std::lock_guard lock(mutex_);
        // Off the list before its socket can close: a cut never reaches another's descriptor.
        auto it = std::find_if(running_.begin(), running_.end(), [id](const auto& e) { return e.first == id; });
        bool cut = it != running_.end() && it->second.cut;
        auto within = it != running_.end() ? it->second.within : std::chrono::milliseconds(0);
        if (it != running_.end()) running_.erase(it);
        auto& queue = checked ? checked_[static_cast<int>(checked->kind)] : checked_[0];
        if (checked && queue.size() >= kMaxRunning) {
            log::warn("{}: dropped a connection: {} of its kind wait to be taken already", what_, queue.size());
        } else if (checked) {
            queue.push_back(std::move(checked->stream));
        } else if (cut) {
            log::warn("{}: dropped a connection that did not begin as a source within {} ms (x-connect-timeout); still "
                      "waiting for the source", what_, within.count());
        } else {
            log::warn("{}: dropped a connection that is not a migration ({}); still waiting for the source", what_,
                      checked.error().message());
        }
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

std::unique_ptr<stream::ByteStream> Candidates::take(Kind kind) {
    uint64_t drained;
    [[maybe_unused]] ssize_t n = ::read(wake_.get(), &drained, sizeof drained);
    std::lock_guard lock(mutex_);
    auto now = std::chrono::steady_clock::now();
    for (auto& [id, r] : running_) {
        if (!r.cut && now >= r.deadline) {
            ::shutdown(r.fd, SHUT_RDWR);  // past its time: its check fails, and says so
            r.cut = true;
        }
    }
    auto& queue = checked_[static_cast<int>(kind)];
    if (queue.empty()) return nullptr;
    auto first = std::move(queue.front());
    queue.pop_front();
    return first;
}

std::chrono::milliseconds Candidates::next_deadline() const {
    std::lock_guard lock(mutex_);
    auto now = std::chrono::steady_clock::now();
    auto next = std::chrono::milliseconds::max();
    for (const auto& [id, r] : running_) {
        if (r.cut) continue;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(r.deadline - now);
        next = std::min(next, std::max(left, std::chrono::milliseconds(0)));
    }
    return next;
}

}  // namespace vmm::migration
