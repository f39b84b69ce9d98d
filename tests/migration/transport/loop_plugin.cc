// A transport plugin for tests: "loop:HOST:PORT", TCP underneath, with a RAM channel of its
// own on the same socket. It exercises the plugin ABI end to end (loading, the table, args,
// parameters and capabilities passed through, cancel and timeouts) and the core's
// transport-channel RAM path that the RDMA plugin uses, without RDMA hardware.
//
// RAM channel frames (little-endian): 'P' u32 block u64 offset u64 length + data,
// 'Z' u32 block u64 offset u64 length, 'E' (end of round; the destination answers 'A'),
// 'S' u32 block u64 offset u64 count + count u64 page sums (verify-ram, after the range's frames).
//
// Two tables: by default the one a plugin built before ABI 1 grew optional members declares
// (vmm must still load it); with VMM_LOOP_FULL_TABLE=1 in the environment, the whole table, whose
// RAM channel carries verify-ram's sums when the source sets the capability loop-sums (as the
// RDMA plugin's does), so the core's path for such channels is tested without RDMA.
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <new>
#include <string>
#include <vector>

#include "vmm/plugin_abi.h"

namespace {

struct Block {
    uint8_t* host;
    uint64_t size;
};

struct Conn {
    int fd = -1;
    int cancel_fd = -1;
    int timeout_ms = 30000;
    uint64_t chunk = 1 << 20;
    std::vector<Block> blocks;
    std::string peer;
    bool destination = false;  // accepted, not connected
    bool source_sums = false;  // loop-sums: this source's channel carries the sums
    bool has_sums = false;     // sums given for the next range
    uint32_t sums_block = 0;
    uint64_t sums_offset = 0;
    std::vector<uint64_t> sums;
    int (*deliver)(void*, uint32_t, uint64_t, const uint64_t*, uint32_t, vmm_err*) = nullptr;
    void* deliver_ctx = nullptr;
    ~Conn() {
        if (fd >= 0) ::close(fd);
    }
};

struct ListenerState {
    int fd = -1;
    Conn proto;  // settings copied into each accepted connection
    ~ListenerState() {
        if (fd >= 0) ::close(fd);
    }
};

int fail(vmm_err* e, const char* fmt, const char* detail = "") {
    std::snprintf(e->text, sizeof(e->text), fmt, detail);
    return -1;
}

int wait_fd(Conn& c, short ev, vmm_err* e) {
    pollfd p[2] = {{c.fd, ev, 0}, {c.cancel_fd, POLLIN, 0}};
    int r = ::poll(p, 2, c.timeout_ms);
    if (r < 0) return fail(e, "loop: poll: %s", std::strerror(errno));
    if (p[1].revents) return fail(e, "loop: migration cancelled");
    if (r == 0) return fail(e, "loop: the peer was silent too long");
    return 0;
}

int send_all(Conn& c, const vmm_buf* bufs, uint32_t n, vmm_err* e) {
    for (uint32_t i = 0; i < n; ++i) {
        const auto* p = static_cast<const uint8_t*>(bufs[i].data);
        size_t left = bufs[i].len;
        while (left > 0) {
            ssize_t s = ::send(c.fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (s < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (wait_fd(c, POLLOUT, e) != 0) return -1;
                continue;
            }
            if (s < 0) return fail(e, "loop: send: %s", std::strerror(errno));
            p += s;
            left -= static_cast<size_t>(s);
        }
    }
    return 0;
}

int recv_all(Conn& c, void* buf, size_t len, vmm_err* e) {
    auto* p = static_cast<uint8_t*>(buf);
    while (len > 0) {
        ssize_t r = ::recv(c.fd, p, len, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(c, POLLIN, e) != 0) return -1;
            continue;
        }
        if (r < 0) return fail(e, "loop: recv: %s", std::strerror(errno));
        if (r == 0) return fail(e, "loop: the peer closed the connection");
        p += r;
        len -= static_cast<size_t>(r);
    }
    return 0;
}

void configure(Conn& c, const vmm_transport_args* a) {
    c.cancel_fd = a->cancel_fd;
    c.timeout_ms = static_cast<int>(a->io_timeout_ms);
    for (uint32_t i = 0; i < a->block_count; ++i) c.blocks.push_back({static_cast<uint8_t*>(a->blocks[i].host), a->blocks[i].size});
    for (uint32_t i = 0; i < a->param_count; ++i)
        if (std::strcmp(a->params[i].name, "loop-chunk-size") == 0) c.chunk = std::strtoull(a->params[i].value, nullptr, 0);
    for (uint32_t i = 0; i < a->cap_count; ++i)
        if (std::strcmp(a->caps[i].name, "loop-sums") == 0) c.source_sums = std::strcmp(a->caps[i].value, "on") == 0;
    if (c.chunk == 0) c.chunk = 1 << 20;
}

addrinfo* resolve(const vmm_transport_args* a, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    addrinfo* res = nullptr;
    if (::getaddrinfo(a->host, std::to_string(a->port).c_str(), &hints, &res) != 0) return nullptr;
    return res;
}

void* do_connect(const vmm_transport_args* a, vmm_err* e) {
    auto* c = new (std::nothrow) Conn();
    if (c == nullptr) return fail(e, "loop: out of memory"), nullptr;
    configure(*c, a);
    addrinfo* ai = resolve(a, false);
    if (ai == nullptr) return delete c, fail(e, "loop: cannot resolve %s", a->host), nullptr;
    c->fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int r = ::connect(c->fd, ai->ai_addr, ai->ai_addrlen);
    ::freeaddrinfo(ai);
    if (r != 0) return fail(e, "loop: connect: %s", std::strerror(errno)), delete c, nullptr;
    c->peer = std::string("loop destination ") + a->uri;
    return c;
}

void* do_listen(const vmm_transport_args* a, vmm_err* e) {
    auto* l = new (std::nothrow) ListenerState();
    if (l == nullptr) return fail(e, "loop: out of memory"), nullptr;
    configure(l->proto, a);
    addrinfo* ai = resolve(a, true);
    if (ai == nullptr) return delete l, fail(e, "loop: cannot resolve %s", a->host), nullptr;
    l->fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int r = ::bind(l->fd, ai->ai_addr, ai->ai_addrlen);
    ::freeaddrinfo(ai);
    if (r != 0 || ::listen(l->fd, 1) != 0) return fail(e, "loop: listen: %s", std::strerror(errno)), delete l, nullptr;
    return l;
}

void* do_accept(void* lp, vmm_err* e) {
    auto* l = static_cast<ListenerState*>(lp);
    pollfd p[2] = {{l->fd, POLLIN, 0}, {l->proto.cancel_fd, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 || p[1].revents) return fail(e, "loop: cancelled while waiting"), nullptr;
    int fd = ::accept4(l->fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return fail(e, "loop: accept: %s", std::strerror(errno)), nullptr;
    auto* c = new (std::nothrow) Conn();
    if (c == nullptr) return ::close(fd), fail(e, "loop: out of memory"), nullptr;
    c->fd = fd;
    c->cancel_fd = l->proto.cancel_fd;
    c->timeout_ms = l->proto.timeout_ms;
    c->blocks = l->proto.blocks;
    c->peer = "loop source";
    c->destination = true;
    return c;
}

struct Frame {
    uint8_t type;
    uint32_t block;
    uint64_t offset, length;
} __attribute__((packed));

int ram_begin(void*, uint32_t, vmm_err*) { return 0; }

// After a range's frames: its sums, if the core gave them for exactly that range.
int send_sums(Conn& c, uint32_t block, uint64_t offset, uint64_t length, vmm_err* e) {
    if (!c.has_sums) return 0;
    c.has_sums = false;
    if (c.sums_block != block || c.sums_offset != offset || c.sums.size() * 4096 != length)
        return fail(e, "loop: sums given for another range than the pages that followed");
    Frame f{'S', block, offset, c.sums.size()};
    vmm_buf bufs[2] = {{&f, sizeof(f)}, {c.sums.data(), c.sums.size() * sizeof(uint64_t)}};
    return send_all(c, bufs, 2, e);
}

int ram_send(void* cp, uint32_t block, uint64_t offset, uint64_t length, vmm_err* e) {
    auto& c = *static_cast<Conn*>(cp);
    if (block >= c.blocks.size() || offset > c.blocks[block].size || length > c.blocks[block].size - offset)
        return fail(e, "loop: the core asked for pages outside a block");
    for (uint64_t done = 0; done < length; done += c.chunk) {
        uint64_t n = length - done < c.chunk ? length - done : c.chunk;
        Frame f{'P', block, offset + done, n};
        vmm_buf bufs[2] = {{&f, sizeof(f)}, {c.blocks[block].host + offset + done, n}};
        if (send_all(c, bufs, 2, e) != 0) return -1;
    }
    return send_sums(c, block, offset, length, e);
}

int ram_zero(void* cp, uint32_t block, uint64_t offset, uint64_t length, vmm_err* e) {
    Frame f{'Z', block, offset, length};
    vmm_buf b{&f, sizeof(f)};
    if (send_all(*static_cast<Conn*>(cp), &b, 1, e) != 0) return -1;
    return send_sums(*static_cast<Conn*>(cp), block, offset, length, e);
}

// The destination's side of an 'S' frame: checked against the blocks, then handed to vmm.
int serve_sums(Conn& c, const Frame& f, vmm_err* e) {
    if (c.deliver == nullptr) return fail(e, "loop: sums arrived, but vmm did not ask for them");
    if (f.block >= c.blocks.size() || f.length == 0 || f.length > c.blocks[f.block].size / 4096 ||
        f.offset > c.blocks[f.block].size - f.length * 4096)
        return fail(e, "loop: sums for pages outside a block");
    std::vector<uint64_t> sums(f.length);
    if (recv_all(c, sums.data(), sums.size() * sizeof(uint64_t), e) != 0) return -1;
    return c.deliver(c.deliver_ctx, f.block, f.offset, sums.data(), static_cast<uint32_t>(sums.size()), e);
}

int ram_end(void* cp, vmm_err* e) {
    auto& c = *static_cast<Conn*>(cp);
    uint8_t end = 'E', ack = 0;
    vmm_buf b{&end, 1};
    if (send_all(c, &b, 1, e) != 0 || recv_all(c, &ack, 1, e) != 0) return -1;
    return ack == 'A' ? 0 : fail(e, "loop: bad end-of-round acknowledgement");
}

int ram_serve(void* cp, uint32_t, vmm_err* e) {
    auto& c = *static_cast<Conn*>(cp);
    for (;;) {
        uint8_t type = 0;
        if (recv_all(c, &type, 1, e) != 0) return -1;
        if (type == 'E') {
            uint8_t ack = 'A';
            vmm_buf b{&ack, 1};
            return send_all(c, &b, 1, e);
        }
        Frame f{};
        f.type = type;
        if (recv_all(c, reinterpret_cast<uint8_t*>(&f) + 1, sizeof(f) - 1, e) != 0) return -1;
        if (type == 'S') {
            if (serve_sums(c, f, e) != 0) return -1;
            continue;
        }
        if ((type != 'P' && type != 'Z') || f.block >= c.blocks.size() || f.offset > c.blocks[f.block].size ||
            f.length > c.blocks[f.block].size - f.offset)
            return fail(e, "loop: invalid RAM frame from the source");
        uint8_t* dst = c.blocks[f.block].host + f.offset;
        if (type == 'Z') std::memset(dst, 0, f.length);
        else if (recv_all(c, dst, f.length, e) != 0) return -1;
    }
}

int do_write(void* c, const vmm_buf* b, uint32_t n, vmm_err* e) { return send_all(*static_cast<Conn*>(c), b, n, e); }
int do_flush(void*, vmm_err*) { return 0; }
int do_read(void* c, void* buf, size_t len, vmm_err* e) { return recv_all(*static_cast<Conn*>(c), buf, len, e); }
const char* do_describe(void* c) { return static_cast<Conn*>(c)->peer.c_str(); }
void do_close(void* c) { delete static_cast<Conn*>(c); }
void do_close_listener(void* l) { delete static_cast<ListenerState*>(l); }

uint32_t ram_features(void* cp) {
    auto& c = *static_cast<Conn*>(cp);
    // A destination delivers whatever sums come; a source carries them under loop-sums.
    return c.destination || c.source_sums ? VMM_RAM_SUMS : 0u;
}
int ram_sums(void* cp, uint32_t block, uint64_t offset, const uint64_t* sums, uint32_t count, vmm_err* e) {
    auto& c = *static_cast<Conn*>(cp);
    if (!c.source_sums) return fail(e, "loop: sums given, but loop-sums is off");
    c.has_sums = true;
    c.sums_block = block;
    c.sums_offset = offset;
    c.sums.assign(sums, sums + count);
    return 0;
}
void ram_on_sums(void* cp, int (*fn)(void*, uint32_t, uint64_t, const uint64_t*, uint32_t, vmm_err*), void* ctx) {
    auto& c = *static_cast<Conn*>(cp);
    c.deliver = fn;
    c.deliver_ctx = ctx;
}

const char* const kCaps[] = {"loop-verify", "loop-sums", nullptr};
const char* const kParams[] = {"loop-chunk-size", nullptr};

// The table as a plugin built before ABI 1 grew optional members declares it (its RAM channel
// confirms every write synchronously, so it has no use for ram_in_flight): vmm must still load it.
const vmm_transport_ops kOps = {
    VMM_TRANSPORT_ABI_VERSION, VMM_TRANSPORT_OPS_V1_MIN_SIZE, "loop", kCaps, kParams,
    do_connect, do_listen, do_accept, do_close_listener, do_write, do_flush, do_read,
    ram_begin, ram_send, ram_zero, ram_end, ram_serve, do_describe, do_close,
};

const vmm_transport_ops kFullOps = {
    VMM_TRANSPORT_ABI_VERSION, sizeof(vmm_transport_ops), "loop", kCaps, kParams,
    do_connect, do_listen, do_accept, do_close_listener, do_write, do_flush, do_read,
    ram_begin, ram_send, ram_zero, ram_end, ram_serve, do_describe, do_close,
    nullptr, nullptr, nullptr, nullptr, ram_features, ram_sums, ram_on_sums,
};

// The same names as rows of vmm's settings table (vmm_setting): vmm checks and explains them.
const vmm_setting kRows[] = {
    {"loop-verify", "loop: check each page written against the source's", VMM_SETTING_CAPABILITY, 0, 0, 1, 0},
    {"loop-sums", "loop: the RAM channel carries verify-ram's sums", VMM_SETTING_CAPABILITY, 0, 0, 1, 0},
    {"loop-chunk-size", "loop: bytes per RAM channel write", VMM_SETTING_SIZE, VMM_SETTING_F_POWER_OF_TWO, 4096,
     1 << 20, 65536},
    {nullptr, nullptr, 0, 0, 0, 0, 0},
};

// A row vmm must refuse when it loads the plugin: its fallback is outside its bounds.
const vmm_setting kBadRows[] = {
    {"loop-chunk-size", "loop: bytes per write", VMM_SETTING_SIZE, 0, 4096, 1 << 20, 1},
    {nullptr, nullptr, 0, 0, 0, 0, 0},
};

vmm_transport_ops with_rows(const vmm_setting* rows) {
    vmm_transport_ops ops = kFullOps;
    ops.settings = rows;
    return ops;
}
const vmm_transport_ops kRowsOps = with_rows(kRows);
const vmm_transport_ops kBadRowsOps = with_rows(kBadRows);

}  // namespace

// VMM_LOOP_FULL_TABLE: unset, the oldest table; "1" every member but `settings`; "rows" with
// its settings' rows; "bad-rows" with a malformed row.
extern "C" __attribute__((visibility("default"))) const vmm_transport_ops* vmm_transport_plugin_v1(void) {
    const char* full = std::getenv("VMM_LOOP_FULL_TABLE");
    std::string_view which = full != nullptr ? full : "";
    if (which == "rows") return &kRowsOps;
    if (which == "bad-rows") return &kBadRowsOps;
    return which == "1" ? &kFullOps : &kOps;
}
