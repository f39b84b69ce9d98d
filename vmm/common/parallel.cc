#include "vmm/common/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "vmm/common/thread_name.h"

namespace vmm {

Status for_each_parallel(size_t count, unsigned workers, const std::function<Status(size_t, unsigned)>& piece) {
    workers = static_cast<unsigned>(std::clamp<size_t>(workers, 1, std::max<size_t>(count, 1)));
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mutex;
    std::optional<std::pair<size_t, Error>> first;  // the lowest failed index
    auto fail = [&](size_t index, Error e) {
        std::lock_guard lock(mutex);
        if (!first || index < first->first) first.emplace(index, std::move(e));
        failed = true;
    };
    auto work = [&](unsigned worker) {
        for (size_t index; !failed && (index = next++) < count;) {
            try {
                if (Status s = piece(index, worker); !s) fail(index, s.error());
            } catch (const std::exception& e) {
                fail(index, Error(fmt::format("internal: {}", e.what())));
            }
        }
    };
    {
        std::vector<std::jthread> threads;
        for (unsigned w = 1; w < workers; ++w) {
            try {
                threads.emplace_back([&work, w] {
                    name_this_thread("parallel");
                    work(w);
                });
            } catch (const std::system_error&) {
                break;  // no thread to be had: fewer do the work
            }
        }
        work(0);
    }  // joined
    if (first) return std::move(first->second);
    return {};
}

unsigned worker_count(unsigned cap) {
    return std::clamp(std::thread::hardware_concurrency(), 1u, std::max(cap, 1u));
}

}  // namespace vmm
