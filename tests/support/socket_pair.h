// What the socket tests share: a connected pair of unix stream sockets (non-blocking, as vmm's
// transports have them), and SIGPIPE ignored for a test's lifetime as vmm ignores it.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>

#include <utility>

#include "vmm/common/fd.h"

namespace vmm::test {

inline std::pair<UniqueFd, UniqueFd> unix_pair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

struct SigpipeIgnored {  // as in vmm; restored afterwards
    SigpipeIgnored() { old = ::signal(SIGPIPE, SIG_IGN); }
    ~SigpipeIgnored() { ::signal(SIGPIPE, old); }
    SigpipeIgnored(const SigpipeIgnored&) = delete;
    SigpipeIgnored& operator=(const SigpipeIgnored&) = delete;
    sighandler_t old;
};

}  // namespace vmm::test
