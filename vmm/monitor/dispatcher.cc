#include "vmm/monitor/dispatcher.h"

#include <sys/time.h>

#include <algorithm>

namespace vmm::monitor {

HmpOutcome Dispatcher::run_hmp(std::string_view line) {
    std::lock_guard lock(exec_mutex_);
    return execute_hmp_full(table_, line);
}

Json Dispatcher::run_qmp(const Json& request) {
    std::lock_guard lock(exec_mutex_);
    return execute_qmp(table_, request);
}

int Dispatcher::subscribe(EventSink sink) {
    std::lock_guard lock(sinks_mutex_);
    sinks_.emplace_back(next_id_, std::move(sink));
    return next_id_++;
}

void Dispatcher::unsubscribe(int id) {
    std::lock_guard lock(sinks_mutex_);
    std::erase_if(sinks_, [id](const auto& p) { return p.first == id; });
}

void Dispatcher::emit(std::string_view name, const Json& data) {
    timeval tv{};
    ::gettimeofday(&tv, nullptr);
    Json event{{"event", name}, {"data", data}, {"timestamp", {{"seconds", tv.tv_sec}, {"microseconds", tv.tv_usec}}}};
    std::lock_guard lock(sinks_mutex_);
    for (const auto& [id, sink] : sinks_) sink(event);
}

}  // namespace vmm::monitor
