#include "vmm/monitor/client/qmp_client.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include "vmm/monitor/client/hmp_client.h"
#include "vmm/monitor/client/json_access.h"

namespace vmm::monitor {

namespace {
// A reply may be large (QEMU's query-commands, a long round log), but not unbounded.
constexpr size_t kMaxReplyBytes = 16 << 20;
// How long an answer to a command may take (a migrate command answers at once; a query soon).
constexpr std::chrono::seconds kAnswerTimeout{60};
}  // namespace

Result<std::unique_ptr<QmpClient>> QmpClient::connect(const std::string& path, std::chrono::milliseconds timeout,
                                                      std::optional<std::chrono::milliseconds> greeting_within) {
    auto fd = connect_unix(path, timeout);
    if (!fd) return fd.error();
    std::unique_ptr<QmpClient> c(new QmpClient(std::move(*fd)));
    // The greeting within the same bound (at least a second): a peer that accepts and then says
    // nothing (a stopped process: the kernel accepts for it) must not hold a caller for a minute.
    auto wait = greeting_within.value_or(std::max<std::chrono::milliseconds>(timeout, std::chrono::seconds(1)));
    auto greeting = c->read_message(wait);
    if (!greeting) return greeting.error();
    if (!*greeting) {
        return Error(fmt::format("{} sent no greeting within {} ms: is the peer stopped or stuck?", path, wait.count()));
    }
    if (member(**greeting, "QMP") == nullptr) return Error(path + " is not a QMP socket (no greeting): is it a text monitor?");
    c->greeting_ = std::move(**greeting);
    if (auto r = c->execute("qmp_capabilities"); !r) return r.error();
    return c;
}

Result<std::optional<Json>> QmpClient::read_message(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
            auto j = parse_request(line, kMaxReplyBytes);
            if (!j) return Error("the QMP peer sent a line that is not JSON (" + j.error().message() + "): " + line.substr(0, 120));
            return std::optional<Json>(std::move(*j));
        }
        if (buffer_.size() > kMaxReplyBytes) return Error("the QMP peer sent a line longer than 16 MiB");
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        auto ready = readable_within(fd_.get(), std::max(left, std::chrono::milliseconds(0)), "the QMP peer");
        if (!ready) return ready.error();
        if (!*ready) return std::optional<Json>();
        auto more = receive_more(fd_.get(), buffer_, "the QMP peer");
        if (!more) return more.error();
        if (!*more) return Error("the QMP peer closed the connection");
    }
}

void QmpClient::keep_event(Json event) {
    if (events_.size() == kMaxKeptEvents) events_.pop_front();
    events_.push_back(std::move(event));
}

Result<Json> QmpClient::read_answer() {
    for (;;) {
        auto m = read_message(kAnswerTimeout);
        if (!m) return m.error();
        if (!*m) return Error("the QMP peer did not answer within 60 s");
        if (member(**m, "event") != nullptr) {
            keep_event(std::move(**m));
            continue;
        }
        return std::move(**m);
    }
}

Result<Json> QmpClient::send_line(const std::string& line) {
    if (auto s = send_all(fd_.get(), line + "\n", "the QMP peer"); !s) return s.error();
    return read_answer();
}

Result<Json> QmpClient::call(const std::string& name, const Json& args) {
    Json cmd{{"execute", name}};
    if (!args.empty()) cmd["arguments"] = args;
    return send_line(to_text(cmd));
}

Result<Json> QmpClient::execute(const std::string& name, const Json& args) {
    auto m = call(name, args);
    if (!m) return m.error();
    if (const Json* r = member(*m, "return")) return *r;
    if (const Json* e = member(*m, "error")) return Error(name + ": " + str(*e, "desc", to_text(*e)));
    return Error("unexpected QMP answer to " + name + ": " + to_text(*m).substr(0, 200));
}

Result<std::optional<Json>> QmpClient::wait_event(const std::string& name, std::chrono::milliseconds timeout) {
    return take_event(name, timeout);
}

Result<std::optional<Json>> QmpClient::next_event(std::chrono::milliseconds timeout) { return take_event("", timeout); }

void QmpClient::interrupt() { ::shutdown(fd_.get(), SHUT_RDWR); }

Result<std::optional<Json>> QmpClient::take_event(std::string_view wanted, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        for (auto it = events_.begin(); it != events_.end(); ++it) {
            if (!wanted.empty() && str(*it, "event", "") != wanted) continue;
            Json e = std::move(*it);
            events_.erase(it);
            return std::optional<Json>(std::move(e));
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::optional<Json>();
        auto m = read_message(left);
        if (!m) return m.error();
        if (!*m) return std::optional<Json>();
        if (member(**m, "event") != nullptr) keep_event(std::move(**m));
        // An answer nobody waits for (none is outstanding between commands) is dropped.
    }
}

}  // namespace vmm::monitor
