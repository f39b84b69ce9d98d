// A TCP forwarder on loopback that a test can cut, as a failed network would: the two ends of
// every connection through it see their link end (shutdown both ways), and neither side chose it.
#pragma once

#include <chrono>
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
    // Cuts every connection through it (both directions, both ends); later ones are accepted and
    // closed at once, as a link that is down would end them, until mend().
    void cut();
    // Cuts the `number`th connection forwarded (0: the first accepted), if it is still open:
    // one of a migration's connections (its main one, a lane, the preempt one) breaking alone.
    bool cut_one(int number);
    // The link is back: connections are forwarded again.
    void mend();
    // The connections through it stay; new ones are closed at once (a path that went down for
    // anyone who would connect again).
    void refuse_new();
    // Milliseconds from the last mend() until `bytes` had gone forward (client to target) on
    // connections accepted since: when a resumed migration's pages flow again. -1 until then.
    double ms_until_flowing(uint64_t bytes) const;
    // Connections forwarded so far.
    int connections() const;

private:
    struct Pair {
        UniqueFd a, b;
        bool after_mend = false;
        int number = 0;  // in accept order
    };
    void loop();
    ssize_t forward(int from, int to);  // bytes copied; <= 0 when either end is done

    uint16_t target_;
    uint16_t port_ = 0;
    UniqueFd listener_, stop_;
    mutable std::mutex mutex_;
    std::vector<Pair> pairs_;
    int accepted_ = 0;
    bool cut_ = false;
    bool refuse_new_ = false;
    std::chrono::steady_clock::time_point mended_at_{};
    uint64_t forwarded_since_mend_ = 0;
    std::vector<std::pair<uint64_t, double>> flowing_;  // (bytes, ms after the mend)
    std::thread thread_;
};

}  // namespace vmm::test
