// vmmctl: drive a running vmm (or QEMU, over QMP) from the shell.
//   vmmctl unix:/tmp/m.sock "info status" "info ramblocks"       text monitor: prints the answers
//   vmmctl --qmp unix:/tmp/q.sock query-status 'migrate {"uri": "tcp:10.0.0.2:4444"}'
//                                   QMP (ours or QEMU's): each command's return value, a JSON line
//   vmmctl --qmp unix:/tmp/q.sock 'migrate {"uri": "rdma:10.0.0.2:4444"}' --watch-migration 200
//                                   then query-migrate every 200 ms, one JSON line each with "t"
//                                   (s) added, until the migration completes, fails or is
//                                   cancelled (one connection: QEMU's QMP takes one client)
//   vmmctl --wait 10 unix:/tmp/m.sock "info status"
//                                   waits up to 10 s for a vmm that is starting to listen (without
//                                   --wait a socket that is not there is an error at once, and one
//                                   that is there gets 2 s to answer)
// Exit status: 0, 1 when the monitor cannot be reached or a command failed (a line starting
// "Error:" on the text monitor, as a foreground `migrate` that fails or is cancelled ends; an
// error answer over QMP; a watched migration that did not complete), 2 for bad usage.
#include <unistd.h>

#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "vmm/config/config.h"
#include "vmm/monitor/client/hmp_client.h"
#include "vmm/monitor/client/json_access.h"
#include "vmm/monitor/client/qmp_client.h"

namespace {

using namespace vmm;

int usage() {
    std::fprintf(stderr,
                 "usage: vmmctl [--wait SECONDS] unix:PATH COMMAND [COMMAND...]\n"
                 "       vmmctl --qmp [--wait SECONDS] unix:PATH 'NAME [JSON-ARGUMENTS]' [...]\n"
                 "       vmmctl --qmp [--wait SECONDS] unix:PATH ['NAME [JSON-ARGUMENTS]' ...] --watch-migration INTERVAL-MS\n");
    return 2;
}

int failed(const Error& e) {
    std::fprintf(stderr, "vmmctl: %s\n", e.message().c_str());
    return 1;
}

// A text-monitor answer reports a failure when one of its lines starts "Error:" (a foreground
// `migrate` prints its progress and statistics first, then that line if it did not complete).
bool reports_error(const std::string& answer) {
    return answer.rfind("Error:", 0) == 0 || answer.find("\nError:") != std::string::npos;
}

int text_monitor(const std::string& path, std::chrono::milliseconds wait, int argc, char** argv) {
    auto client = monitor::HmpClient::connect(path, wait);
    if (!client) return failed(client.error());
    int status = 0;
    for (int i = 0; i < argc; ++i) {
        auto out = (*client)->command(argv[i], [](std::string_view text) {
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);  // a progress bar must show as it moves
        });
        if (!out) return failed(out.error());
        if (reports_error(*out)) status = 1;
    }
    return status;
}

// Samples query-migrate every interval_ms, each with "t" (seconds since watching began) and
// "x-command-seconds": how long the command before the watch took to answer. QEMU connects an
// RDMA migration inside its `migrate` command, after its total-time clock started and before
// its setup-time clock did; a benchmark needs that span to compare like with like.
int watch_migration(monitor::QmpClient& qmp, long interval_ms, double command_seconds) {
    auto start = std::chrono::steady_clock::now();
    int unsettled = 0;
    for (;;) {
        auto r = qmp.execute("query-migrate");
        if (!r) return failed(r.error());
        (*r)["t"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        (*r)["x-command-seconds"] = command_seconds;
        std::printf("%s\n", monitor::to_text(*r).c_str());
        std::fflush(stdout);
        std::string status = monitor::str(*r, "status");
        // QEMU says "completed" a moment before it records the total time (0 until then): a
        // completed record without it is printed, then asked for again, briefly.
        if (status == "completed" && monitor::int_member(*r, "total-time").value_or(1) == 0 && ++unsettled <= 50) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        if (status == "completed") return 0;
        if (status == "failed" || status == "cancelled") return 1;
        std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    }
}

int qmp_command(monitor::QmpClient& qmp, const std::string& line) {
    size_t sp = line.find(' ');
    monitor::Json args = monitor::Json::object();
    if (sp != std::string::npos) {
        auto parsed = monitor::parse_request(line.substr(sp + 1));
        if (parsed) args = std::move(*parsed);
        if (!parsed || !args.is_object()) {
            std::fprintf(stderr, "vmmctl: the arguments of '%s' are not a JSON object\n", line.substr(0, sp).c_str());
            return 2;
        }
    }
    auto r = qmp.execute(line.substr(0, sp), args);
    if (!r) return failed(r.error());
    std::printf("%s\n", monitor::to_text(*r).c_str());
    std::fflush(stdout);
    return 0;
}

int qmp_monitor(const std::string& path, std::chrono::milliseconds wait, int argc, char** argv) {
    // A vmm that is there answers at once, but a loaded machine may take seconds to schedule it.
    auto client = monitor::QmpClient::connect(path, wait, std::chrono::seconds(60));
    if (!client) return failed(client.error());
    double last_seconds = 0;
    for (int i = 0; i < argc; ++i) {
        if (std::string(argv[i]) == "--watch-migration") {
            long ms = i + 1 < argc ? std::strtol(argv[i + 1], nullptr, 10) : 0;
            return ms > 0 && i + 2 == argc ? watch_migration(**client, ms, last_seconds) : usage();
        }
        auto sent = std::chrono::steady_clock::now();
        if (int rc = qmp_command(**client, argv[i]); rc != 0) return rc;
        last_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    bool qmp = false;
    long wait_seconds = -1;  // not given
    int first = 1;
    for (; first < argc; ++first) {
        std::string a = argv[first];
        if (a == "--qmp") {
            qmp = true;
        } else if (a == "--wait" && first + 1 < argc) {
            char* end = nullptr;
            wait_seconds = std::strtol(argv[++first], &end, 10);
            if (*end != '\0' || wait_seconds < 0 || wait_seconds > 3600) return usage();
        } else {
            break;
        }
    }
    if (argc < first + 2) return usage();
    auto endpoint = vmm::config::parse_endpoint(argv[first], false);
    if (!endpoint || endpoint->kind != vmm::config::Endpoint::Kind::unix_socket) {
        std::fprintf(stderr, "vmmctl: '%s' is not unix:PATH\n", argv[first]);
        return 2;
    }
    // Without --wait: a socket that is not there is an error at once; one that is there gets 2 s
    // (a vmm binds its socket a moment before it listens).
    if (wait_seconds < 0 && ::access(endpoint->path.c_str(), F_OK) != 0) {
        if (errno == EACCES) {  // a directory on the way may not be entered: the socket may well be there
            std::fprintf(stderr, "vmmctl: cannot enter a directory on the way to %s (%s): run vmmctl as a user who may, or "
                         "give vmm a socket where this user can reach it\n", endpoint->path.c_str(), std::strerror(errno));
            return 1;
        }
        std::fprintf(stderr, "vmmctl: %s does not exist: is vmm running with %s unix:%s? (--wait SECONDS waits for one that is starting)\n",
                     endpoint->path.c_str(), qmp ? "--qmp" : "--monitor", endpoint->path.c_str());
        return 1;
    }
    std::chrono::milliseconds wait = std::chrono::seconds(wait_seconds < 0 ? 2 : wait_seconds);
    return qmp ? qmp_monitor(endpoint->path, wait, argc - first - 1, argv + first + 1)
               : text_monitor(endpoint->path, wait, argc - first - 1, argv + first + 1);
}
