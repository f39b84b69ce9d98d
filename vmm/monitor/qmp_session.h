// One QMP session's protocol, apart from its socket: the greeting, capabilities negotiation,
// then each request line through the Dispatcher. The server feeds it lines; the QMP fuzz target
// feeds it the same way, so what a client can send is what is fuzzed.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "vmm/monitor/dispatcher.h"

namespace vmm::monitor {

// A reply or event as one line of text. Strings that are not UTF-8 (a guest's message, say) are
// replaced, never thrown over.
std::string to_line(const Json& j);

class QmpSession {
public:
    using Write = std::function<void(const std::string& line)>;  // where events go
    QmpSession(Dispatcher& dispatcher, Write events) : dispatcher_(dispatcher), events_(std::move(events)) {}
    ~QmpSession();
    QmpSession(const QmpSession&) = delete;
    QmpSession& operator=(const QmpSession&) = delete;

    static std::string greeting();
    // The reply line to one request line (without its newline); empty for a blank line.
    std::string handle(std::string_view line);
    // The error reply to a line over the limit, sent before the session is closed.
    static std::string too_long(size_t limit);

private:
    Json answer(const Json& request);

    Dispatcher& dispatcher_;
    Write events_;
    int subscription_ = 0;
};

}  // namespace vmm::monitor
