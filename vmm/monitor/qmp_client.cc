#include "vmm/monitor/qmp_client.h"

#include <poll.h>
#include <unistd.h>

#include "vmm/monitor/client.h"

namespace vmm::monitor {

namespace {
constexpr int kReplyTimeoutMs = 60000;
}  // namespace

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
        pollfd p{fd_.get(), POLLIN, 0};
        int r = ::poll(&p, 1, kReplyTimeoutMs);
        if (r == 0) return Error("the QMP peer did not answer within 60 s");
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Error::from_errno("poll on the QMP socket");
        char chunk[4096];
        ssize_t n = ::read(fd_.get(), chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error::from_errno("read from the QMP socket");
        if (n == 0) return Error("the QMP peer closed the connection");
        buffer_.append(chunk, static_cast<size_t>(n));
    }
}

Result<Json> QmpClient::execute(const std::string& name, const Json& args) {
    Json cmd{{"execute", name}};
    if (!args.empty()) cmd["arguments"] = args;
    std::string text = cmd.dump() + "\n";
    for (size_t done = 0; done < text.size();) {
        ssize_t n = ::write(fd_.get(), text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error::from_errno("write to the QMP socket");
        done += static_cast<size_t>(n);
    }
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
