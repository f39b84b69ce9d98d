// A TCP forwarder on loopback that a test can cut, as a failed network would: the two ends of
// every connection through it see their link end (shutdown both ways), and neither side chose it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "vmm/common/fd.h"

namespace vmm::test {

class TcpProxy {
public:
    // Listens on 127.0.0.1 (a free port) and forwards each connection to 127.0.0.1:target.
    explicit TcpProxy(uint16_t target);
    ~TcpProxy();  // stops and closes everything
    TcpProxy(const TcpProxy&) = delete;
    TcpProxy& operator=(const TcpProxy&) = delete;

    uint16_t port() const { return port_; }
    // Cuts every connection through it (both directions, both ends); later ones are refused.
    void cut();
    // Connections forwarded so far.
    int connections() const;

private:
    struct Pair {
        UniqueFd a, b;
    };
    void loop();
    bool forward(int from, int to);

    uint16_t target_;
    uint16_t port_ = 0;
    UniqueFd listener_, stop_;
    mutable std::mutex mutex_;
    std::vector<Pair> pairs_;
    int accepted_ = 0;
    bool cut_ = false;
    std::thread thread_;
};

}  // namespace vmm::test
