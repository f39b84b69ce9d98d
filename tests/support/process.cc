#include "tests/support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace vmm::test {

using namespace std::chrono_literals;

std::unique_ptr<VmmProcess> VmmProcess::spawn(const std::vector<std::string>& args, const std::string& log_path,
                                              const std::vector<std::string>& wrapper) {
    const char* bin = std::getenv("VMM_BINARY");
    if (bin == nullptr) bin = VMM_TEST_BINARY;
    std::vector<std::string> all = wrapper;
    all.push_back(bin);
    all.insert(all.end(), args.begin(), args.end());
    return spawn_program(all, log_path);
}

std::unique_ptr<VmmProcess> VmmProcess::spawn_program(const std::vector<std::string>& args, const std::string& log_path) {
    std::vector<std::string> all = args;
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return nullptr;
    return std::unique_ptr<VmmProcess>(new VmmProcess(pid));
}

VmmProcess::~VmmProcess() {
    if (reaped_) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
}

void VmmProcess::signal(int signo) { ::kill(pid_, signo); }

std::optional<int> VmmProcess::wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int status = 0;
        pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            reaped_ = true;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
        std::this_thread::sleep_for(20ms);
    }
}

std::unique_ptr<monitor::HmpClient> connect_hmp(const std::string& path) {
    auto c = monitor::HmpClient::connect(path, 30s);
    if (!c) {
        ADD_FAILURE() << c.error().message();
        return nullptr;
    }
    return std::move(*c);
}

std::string hmp(monitor::HmpClient& client, const std::string& line) {
    auto out = client.command(line);
    return out ? *out : "monitor I/O failed: " + out.error().message();
}

std::unique_ptr<QmpClient> QmpClient::connect(const std::string& path) {
    auto c = monitor::QmpClient::connect(path, 30s);
    if (!c) return nullptr;
    return std::unique_ptr<QmpClient>(new QmpClient(std::move(*c)));
}

namespace {
// An answer as QMP gives it; a failure to talk at all as a ClientError.
Json as_given(Result<Json> answer) {
    if (!answer) return Json{{"error", {{"class", "ClientError"}, {"desc", answer.error().message()}}}};
    return std::move(*answer);
}
}  // namespace

Json QmpClient::send_raw(const std::string& line) { return as_given(client_->send_line(line)); }

Json QmpClient::execute(const std::string& name, const Json& args) { return as_given(client_->call(name, args)); }

std::optional<Json> QmpClient::wait_event(const std::string& name, std::chrono::milliseconds timeout) {
    auto e = client_->wait_event(name, timeout);
    if (!e) {
        ADD_FAILURE() << "waiting for QMP event " << name << ": " << e.error().message();
        return std::nullopt;
    }
    return std::move(*e);
}

std::string temp_path(const std::string& name) {
    return "/tmp/vmm-test-" + std::to_string(::getpid()) + "-" + name;
}

std::string read_text_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

}  // namespace vmm::test
