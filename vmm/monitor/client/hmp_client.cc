#include "vmm/monitor/client/hmp_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace vmm::monitor {

namespace {
constexpr auto kReplyTimeout = std::chrono::seconds(60);
}  // namespace

Result<UniqueFd> connect_unix(const std::string& path, std::chrono::milliseconds timeout) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) return Error("socket path is too long: " + path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!fd) return Error::from_errno("socket");
        if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
        int err = errno;
        if (std::chrono::steady_clock::now() >= deadline) {
            return Error::from_errno("connect to " + path, err, "is vmm running with --monitor unix:" + path + "?");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

Result<bool> receive_more(int fd, std::string& buffer, const std::string& peer) {
    for (;;) {
        auto ready = readable_within(fd, kReplyTimeout, peer);
        if (!ready) return ready.error();
        if (!*ready) return Error(peer + " did not answer within 60 s");
        char chunk[4096];
        ssize_t n = ::read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error::from_errno("read from " + peer);
        buffer.append(chunk, static_cast<size_t>(n));
        return n > 0;
    }
}

Result<std::unique_ptr<HmpClient>> HmpClient::connect(const std::string& path, std::chrono::milliseconds timeout) {
    auto fd = connect_unix(path, timeout);
    if (!fd) return fd.error();
    std::unique_ptr<HmpClient> c(new HmpClient(std::move(*fd)));
    if (auto banner = c->read_until_prompt(); !banner) return banner.error();
    return c;
}

Result<std::string> HmpClient::read_until_prompt(const std::function<void(std::string_view)>& stream) {
    std::string out;
    // Hands over what is certainly output: all but a tail that could be the start of a prompt.
    auto emit = [&](size_t n) {
        if (n == 0) return;
        out += buffer_.substr(0, n);
        if (stream) stream(std::string_view(buffer_).substr(0, n));
        buffer_.erase(0, n);
    };
    for (;;) {
        size_t at = buffer_.find(kHmpPrompt);
        if (at != std::string::npos) {
            emit(at);
            buffer_.erase(0, std::strlen(kHmpPrompt));
            return out;
        }
        if (stream && buffer_.size() > std::strlen(kHmpPrompt)) emit(buffer_.size() - std::strlen(kHmpPrompt));
        auto more = receive_more(fd_.get(), buffer_, "the monitor");
        if (!more) return more.error();
        if (!*more) {  // the monitor closed (e.g. after quit): what came is the answer
            emit(buffer_.size());
            return out;
        }
    }
}

Result<std::string> HmpClient::command(const std::string& line, const std::function<void(std::string_view)>& stream) {
    if (auto s = send_all(fd_.get(), line + "\n", "the monitor"); !s) return s.error();
    return read_until_prompt(stream);
}

}  // namespace vmm::monitor
