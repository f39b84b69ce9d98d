#include "vmm/monitor/qmp_client.h"

#include "vmm/monitor/client.h"
#include "vmm/monitor/json_access.h"

namespace vmm::monitor {

namespace {
// A reply may be large (QEMU's query-commands, a long round log), but not unbounded.
constexpr size_t kMaxReplyBytes = 16 << 20;
}  // namespace

Result<std::unique_ptr<QmpClient>> QmpClient::connect(const std::string& path, std::chrono::milliseconds timeout) {
    auto fd = connect_unix(path, timeout);
    if (!fd) return fd.error();
    std::unique_ptr<QmpClient> c(new QmpClient(std::move(*fd)));
    auto greeting = c->read_message();
    if (!greeting) return greeting.error();
    if (member(*greeting, "QMP") == nullptr) return Error(path + " is not a QMP socket (no greeting): is it a text monitor?");
    if (auto r = c->execute("qmp_capabilities"); !r) return r.error();
    return c;
}

Result<Json> QmpClient::read_message() {
    for (;;) {
        if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
            auto j = parse_request(line, kMaxReplyBytes);
            if (!j) return Error("the QMP peer sent a line that is not JSON (" + j.error().message() + "): " + line.substr(0, 120));
            return std::move(*j);
        }
        if (buffer_.size() > kMaxReplyBytes) return Error("the QMP peer sent a line longer than 16 MiB");
        auto more = receive_more(fd_.get(), buffer_, "the QMP peer");
        if (!more) return more.error();
        if (!*more) return Error("the QMP peer closed the connection");
    }
}

Result<Json> QmpClient::execute(const std::string& name, const Json& args) {
    Json cmd{{"execute", name}};
    if (!args.empty()) cmd["arguments"] = args;
    if (auto s = send_all(fd_.get(), to_text(cmd) + "\n", "the QMP peer"); !s) return s.error();
    for (;;) {
        auto m = read_message();
        if (!m) return m.error();
        if (member(*m, "event") != nullptr) continue;
        if (const Json* r = member(*m, "return")) return *r;
        if (const Json* e = member(*m, "error")) return Error(name + ": " + str(*e, "desc", to_text(*e)));
        return Error("unexpected QMP answer to " + name + ": " + to_text(*m).substr(0, 200));
    }
}

}  // namespace vmm::monitor
