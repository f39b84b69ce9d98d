#include "vmm/monitor/qmp_session.h"

#include <fmt/format.h>

#include "vmm/monitor/client/json_access.h"

namespace vmm::monitor {

std::string to_line(const Json& j) { return to_text(j) + "\n"; }

QmpSession::~QmpSession() {
    if (subscription_ != 0) dispatcher_.unsubscribe(subscription_);
}

std::string QmpSession::greeting() {
    Json g{{"QMP", {{"version", {{"qemu", {{"major", 0}, {"minor", 1}, {"micro", 0}}}, {"package", "vmm"}}},
                    {"capabilities", Json::array()}}}};
    return to_line(g);
}

std::string QmpSession::too_long(size_t limit) {
    return to_line(qmp_error(fmt::format("request line longer than {} bytes: the session is closed", limit)));
}

Json QmpSession::answer(const Json& request) {
    auto execute = string_member(request, "execute");
    if (execute && *execute == "qmp_capabilities") {
        if (subscription_ != 0) {
            return qmp_error("Capabilities negotiation is already complete, command ignored", "CommandNotFound");
        }
        subscription_ = dispatcher_.subscribe([events = events_](const Json& ev) { events(to_line(ev)); });
        return Json{{"return", Json::object()}};
    }
    if (subscription_ == 0) return qmp_error("Expecting capabilities negotiation with 'qmp_capabilities'", "CommandNotFound");
    return dispatcher_.run_qmp(request);
}

std::string QmpSession::handle(std::string_view line) {
    if (line.find_first_not_of(" \t") == std::string_view::npos) return {};
    auto request = parse_request(line);
    if (!request) return to_line(qmp_error(request.error().message()));
    Json reply = answer(*request);
    // The dispatcher's replies carry the id already; only the session's own need it copied.
    if (const Json* id = member(*request, "id"); id != nullptr && member(reply, "id") == nullptr) reply["id"] = *id;
    return to_line(reply);
}

}  // namespace vmm::monitor
