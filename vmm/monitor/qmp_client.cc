#include "vmm/monitor/qmp_client.h"

#include "vmm/monitor/client.h"

namespace vmm::monitor {

Result<std::unique_ptr<QmpClient>> QmpClient::connect(const std::string& path, std::chrono::milliseconds timeout) {
    auto fd = connect_unix(path, timeout);
    if (!fd) return fd.error();
    std::unique_ptr<QmpClient> c(new QmpClient(std::move(*fd)));
    auto greeting = c->read_message();
    if (!greeting) return greeting.error();
    if (!greeting->contains("QMP")) return Error(path + " is not a QMP socket (no greeting): is it a text monitor?");
    if (auto r = c->execute("qmp_capabilities"); !r) return r.error();
    return c;
}

Result<Json> QmpClient::read_message() {
    for (;;) {
        if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
            Json j = Json::parse(line, nullptr, false);
            if (j.is_discarded()) return Error("the QMP peer sent a line that is not JSON: " + line.substr(0, 120));
            return j;
        }
        auto more = receive_more(fd_.get(), buffer_, "the QMP peer");
        if (!more) return more.error();
        if (!*more) return Error("the QMP peer closed the connection");
    }
}

Result<Json> QmpClient::execute(const std::string& name, const Json& args) {
    Json cmd{{"execute", name}};
    if (!args.empty()) cmd["arguments"] = args;
    if (auto s = send_all(fd_.get(), cmd.dump() + "\n", "the QMP peer"); !s) return s.error();
    for (;;) {
        auto m = read_message();
        if (!m) return m.error();
        if (m->contains("event")) continue;
        if (m->contains("return")) return (*m)["return"];
        if (m->contains("error")) {
            const Json& e = (*m)["error"];
            return Error(name + ": " + e.value("desc", e.dump()));
        }
        return Error("unexpected QMP answer to " + name + ": " + m->dump().substr(0, 200));
    }
}

}  // namespace vmm::monitor
