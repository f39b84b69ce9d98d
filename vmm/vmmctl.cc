// vmmctl: send text-monitor commands to a running vmm and print the answers.
//   vmmctl unix:/tmp/m.sock "info status" "info ramblocks"
// Exit status: 0, 1 when the monitor cannot be reached or a command printed "Error:", 2 for
// bad usage.
#include <cstdio>
#include <string>

#include "vmm/config/config.h"
#include "vmm/monitor/client.h"

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: vmmctl unix:PATH COMMAND [COMMAND...]\n");
        return 2;
    }
    auto endpoint = vmm::config::parse_endpoint(argv[1], false);
    if (!endpoint || endpoint->kind != vmm::config::Endpoint::Kind::unix_socket) {
        std::fprintf(stderr, "vmmctl: '%s' is not unix:PATH\n", argv[1]);
        return 2;
    }
    auto client = vmm::monitor::HmpClient::connect(endpoint->path, std::chrono::seconds(10));
    if (!client) {
        std::fprintf(stderr, "vmmctl: %s\n", client.error().message().c_str());
        return 1;
    }
    int status = 0;
    for (int i = 2; i < argc; ++i) {
        auto out = (*client)->command(argv[i], [](std::string_view text) {
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);  // a progress bar must show as it moves
        });
        if (!out) {
            std::fprintf(stderr, "vmmctl: %s\n", out.error().message().c_str());
            return 1;
        }
        if (out->rfind("Error:", 0) == 0) status = 1;
    }
    return status;
}
