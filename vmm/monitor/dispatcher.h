// Dispatcher: runs commands from every monitor session one at a time (like QEMU's big lock)
// and fans QMP events out to the sessions that subscribed.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "vmm/monitor/command_table.h"

namespace vmm::monitor {

class Dispatcher {
public:
    using EventSink = std::function<void(const Json& event)>;

    CommandTable& table() { return table_; }
    HmpOutcome run_hmp(std::string_view line);
    Json run_qmp(const Json& request);

    // Returns an id for unsubscribe.
    int subscribe(EventSink sink);
    void unsubscribe(int id);
    // {"event": name, "data": data, "timestamp": {...}} to every subscriber.
    void emit(std::string_view name, const Json& data = Json::object());

private:
    CommandTable table_;
    std::mutex exec_mutex_;
    std::mutex sinks_mutex_;
    std::vector<std::pair<int, EventSink>> sinks_;
    int next_id_ = 1;
};

}  // namespace vmm::monitor
