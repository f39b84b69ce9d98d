// cut_forwarder TARGET_PORT: the tests' TCP forwarder (tests/support/tcp_proxy.h) for scripts.
// Prints the port it listens on (127.0.0.1), then reads commands, one a line, on stdin:
//   cut    cut every connection through it; later ones are closed at once
//   mend   forward again
//   flow N  wait (at most 60 s) until N bytes have gone forward on connections made since the
//          last mend, and print the milliseconds from that mend until then
//   quit   (or the end of stdin)
// scripts/bench-flap.sh drives it to cut a migration's link in the middle of its bulk round.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "tests/support/tcp_proxy.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: cut_forwarder TARGET_PORT\n";
        return 2;
    }
    long target = std::strtol(argv[1], nullptr, 10);
    if (target <= 0 || target > 65535) {
        std::cerr << "cut_forwarder: " << argv[1] << " is not a port\n";
        return 2;
    }
    vmm::test::TcpProxy link(static_cast<uint16_t>(target));
    std::cout << link.port() << std::endl;
    for (std::string line; std::getline(std::cin, line);) {
        if (line == "cut") {
            link.cut();
        } else if (line == "mend") {
            link.mend();
        } else if (line.rfind("flow ", 0) == 0) {
            uint64_t bytes = std::strtoull(line.c_str() + 5, nullptr, 10);
            auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            double ms = -1;
            while ((ms = link.ms_until_flowing(bytes)) < 0 && std::chrono::steady_clock::now() < give_up)
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            std::cout << ms << std::endl;
        } else if (line == "quit") {
            break;
        } else {
            std::cerr << "cut_forwarder: unknown command '" << line << "' (cut, mend, flow N, quit)\n";
        }
        std::cout << std::flush;
    }
    return 0;
}
