// The client's end of a connection an event hub writes to (a socketpair in the tests): the next
// whole message waiting there, or nullopt when none is.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <optional>
#include <span>
#include <vector>

#include "vmmd/rpc/message.h"

namespace vmmd::test {

inline std::optional<rpc::Message> next_event_message(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) return std::nullopt;
    uint8_t word[4];
    EXPECT_EQ(::read(fd, word, 4), 4);
    auto n = rpc::decode_length(std::span<const uint8_t, 4>(word, 4));
    EXPECT_TRUE(n);
    if (!n) return std::nullopt;
    std::vector<uint8_t> body(*n);
    EXPECT_EQ(::read(fd, body.data(), body.size()), static_cast<ssize_t>(body.size()));
    auto m = rpc::decode_message(body);
    EXPECT_TRUE(m);
    if (!m) return std::nullopt;
    return *m;
}

}  // namespace vmmd::test
