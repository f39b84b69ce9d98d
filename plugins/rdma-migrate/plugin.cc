// The rdma: transport's C table (include/vmm/plugin_abi.h). Everything here turns the C
// calls into SourceSession or DestinationSession calls and their errors into one line in
// vmm_err; no exception crosses. A call meant for the other side is refused, saying so.
//
// Parameters: rdma-chunk-size (power of two, default 1M), rdma-pin-limit (bytes registered at
// once per side, default 0 = unlimited), rdma-channels (queue pairs, 1..16; 1). Capability:
// rdma-pin-all (register all RAM up front on both sides). Environment, for tests only:
// VMM_RDMA_ANNOUNCE_VERSION makes a source announce another protocol version;
// VMM_RDMA_BASE_PROTOCOL=1 makes a source offer, and a destination grant, no vmm extension (the
// base protocol as QEMU speaks it: 8-byte private data, 1 MiB chunks, one channel, one entry per
// request).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "proto/memlock.h"
#include "destination_session.h"
#include "source_session.h"
#include "trace.h"
#include "vmm/common/units.h"
#include "vmm/plugin_abi.h"

using namespace rdma_migrate;

namespace {

constexpr uint64_t kMaxChannels = 16;

int fail(vmm_err* e, const std::string& text) {
    std::snprintf(e->text, sizeof(e->text), "%s", text.c_str());
    return -1;
}

template <typename F>
int guarded(vmm_err* e, F f) {
    try {
        Status s = f();
        return s ? 0 : fail(e, s.error().message());
    } catch (const std::exception& x) {
        return fail(e, std::string("rdma transport: ") + x.what());
    } catch (...) {
        return fail(e, "rdma transport: unexpected failure");
    }
}

Result<SessionConfig> config_from(const vmm_transport_args* a) {
    SessionConfig c;
    c.cancel_fd = a->cancel_fd;
    c.timeouts.connect_ms = static_cast<int>(a->connect_timeout_ms);
    c.timeouts.io_ms = static_cast<int>(a->io_timeout_ms);
    for (uint32_t i = 0; i < a->block_count; ++i) {
        const auto& b = a->blocks[i];
        c.blocks.push_back({b.name, static_cast<uint8_t*>(b.host), b.size, b.guest_addr});
    }
    assign_offsets(c.blocks);
    for (uint32_t i = 0; i < a->param_count; ++i) {
        std::string name = a->params[i].name;
        auto v = vmm::parse_size(a->params[i].value);
        if (!v) return Error(fmt::format("migration parameter '{}': {}", name, v.error().message()));
        if (name == "rdma-chunk-size") c.chunk_size = *v;
        else if (name == "rdma-pin-limit") c.pin_limit = *v;
        else if (name == "rdma-channels") {
            if (*v < 1 || *v > kMaxChannels) return Error(fmt::format("rdma-channels {}: use 1..{}", *v, kMaxChannels));
            c.channels = static_cast<uint32_t>(*v);
        }
    }
    for (uint32_t i = 0; i < a->cap_count; ++i)
        if (std::strcmp(a->caps[i].name, "rdma-pin-all") == 0) c.pin_all = std::strcmp(a->caps[i].value, "on") == 0;
    // Tests only: announce another protocol version, to check that a peer refuses it.
    if (const char* v = std::getenv("VMM_RDMA_ANNOUNCE_VERSION"); v != nullptr && *v != '\0') {
        c.announce_version = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    }
    if (const char* v = std::getenv("VMM_RDMA_BASE_PROTOCOL"); v != nullptr && std::strcmp(v, "1") == 0) c.base_protocol = true;
    if (auto g = ChunkGeometry::make(c.chunk_size); !g) return g.error();
    if (c.pin_limit != 0 && c.pin_limit < c.chunk_size) {
        return Error(fmt::format("rdma-pin-limit {} is smaller than one chunk ({}): raise it or lower rdma-chunk-size",
                                 c.pin_limit, c.chunk_size));
    }
    return c;
}

uint64_t ram_bytes(const SessionConfig& c) {
    uint64_t ram = 0;
    for (const auto& b : c.blocks) ram += b.size;
    return ram;
}

// What vmm holds for one migration connection: one side of it.
struct Handle {
    std::unique_ptr<SourceSession> source;
    std::unique_ptr<DestinationSession> destination;
    Connection& connection() const {
        return source ? static_cast<Connection&>(*source) : static_cast<Connection&>(*destination);
    }
};

struct Listener {
    std::unique_ptr<Endpoint> ep;
    SessionConfig cfg;
};

void* do_connect(const vmm_transport_args* a, vmm_err* e) {
    void* out = nullptr;
    guarded(e, [&]() -> Status {
        trace("source: connecting to {}:{}", a->host, a->port);
        auto cfg = config_from(a);
        if (!cfg) return cfg.error();
        if (auto s = check_source_memlock(memlock_budget(), ram_bytes(*cfg), cfg->pin_all, cfg->pin_limit); !s) return s;
        auto s = SourceSession::connect(a->host, a->port, std::move(*cfg));
        if (!s) return s.error();
        out = new Handle{std::move(*s), nullptr};
        return {};
    });
    return out;
}

void* do_listen(const vmm_transport_args* a, vmm_err* e) {
    void* out = nullptr;
    guarded(e, [&]() -> Status {
        auto cfg = config_from(a);
        if (!cfg) return cfg.error();
        auto ep = listen_endpoint(a->host, a->port, a->cancel_fd, cfg->timeouts);
        if (!ep) return ep.error();
        out = new Listener{std::move(*ep), std::move(*cfg)};
        return {};
    });
    return out;
}

void* do_accept(void* lp, vmm_err* e) {
    void* out = nullptr;
    guarded(e, [&]() -> Status {
        auto* l = static_cast<Listener*>(lp);
        // Grant rdma-pin-all only if all of this side's RAM can be pinned.
        auto s = DestinationSession::accept(*l->ep, l->cfg, pin_all_refusal(memlock_budget(), ram_bytes(l->cfg)));
        if (!s) return s.error();
        out = new Handle{nullptr, std::move(*s)};
        return {};
    });
    return out;
}

Handle& H(void* c) { return *static_cast<Handle*>(c); }
Connection& C(void* c) { return H(c).connection(); }
Result<SourceSession*> source(void* c, const char* call) {
    if (!H(c).source) return Error(fmt::format("rdma transport: {} is a source's call, made on a destination", call));
    return H(c).source.get();
}
Result<DestinationSession*> destination(void* c, const char* call) {
    if (!H(c).destination) return Error(fmt::format("rdma transport: {} is a destination's call, made on a source", call));
    return H(c).destination.get();
}

// On a failed RAM or stream call, tell the peer why (spec: "Error-handling").
template <typename F>
int session_call(void* c, vmm_err* e, F f) {
    int rc = guarded(e, f);
    if (rc != 0) C(c).abort(e->text);
    return rc;
}
// A source's call `f(SourceSession&)`, refused on a destination.
template <typename F>
int source_call(void* c, const char* call, vmm_err* e, F f) {
    return session_call(c, e, [&]() -> Status {
        auto s = source(c, call);
        return s ? f(**s) : Status(s.error());
    });
}

int do_write(void* c, const vmm_buf* bufs, uint32_t n, vmm_err* e) {
    return session_call(c, e, [&]() -> Status {
        for (uint32_t i = 0; i < n; ++i)
            if (auto s = C(c).write(bufs[i].data, bufs[i].len); !s) return s;
        return {};
    });
}
int do_flush(void* c, vmm_err* e) { return session_call(c, e, [&] { return C(c).flush(); }); }
int do_read(void* c, void* buf, size_t len, vmm_err* e) { return session_call(c, e, [&] { return C(c).read(buf, len); }); }
int ram_setup(void* c, vmm_err* e) { return source_call(c, "ram_setup", e, [](SourceSession& s) { return s.ram_setup(); }); }
int ram_begin(void* c, uint32_t round, vmm_err* e) {
    return source_call(c, "ram_begin_round", e, [&](SourceSession& s) { return s.ram_begin_round(round); });
}
int ram_send(void* c, uint32_t b, uint64_t off, uint64_t len, vmm_err* e) {
    return source_call(c, "ram_send", e, [&](SourceSession& s) { return s.ram_send(b, off, len); });
}
int ram_zero(void* c, uint32_t b, uint64_t off, uint64_t len, vmm_err* e) {
    return source_call(c, "ram_send_zero", e, [&](SourceSession& s) { return s.ram_send_zero(b, off, len); });
}
int ram_end(void* c, vmm_err* e) { return source_call(c, "ram_end_round", e, [](SourceSession& s) { return s.ram_end_round(); }); }
int ram_serve(void* c, uint32_t round, vmm_err* e) {
    return guarded(e, [&]() -> Status {
        auto d = destination(c, "ram_serve_round");
        return d ? (*d)->serve_round(round) : Status(d.error());
    });
}
uint64_t ram_in_flight(void* c) { return H(c).source ? H(c).source->ram_in_flight() : 0; }
void ram_on_arrival(void* c, void (*fn)(void*), void* ctx) {
    if (H(c).source) H(c).source->on_arrival(fn, ctx);
}
uint32_t ram_features(void* c) { return C(c).carries_sums() ? VMM_RAM_SUMS : 0u; }
int ram_sums(void* c, uint32_t b, uint64_t off, const uint64_t* sums, uint32_t count, vmm_err* e) {
    return source_call(c, "ram_sums", e, [&](SourceSession& s) { return s.ram_sums(b, off, {sums, count}); });
}
using SumsCallback = int (*)(void*, uint32_t, uint64_t, const uint64_t*, uint32_t, vmm_err*);
void ram_on_sums(void* c, SumsCallback fn, void* ctx) noexcept {
    DestinationSession* d = H(c).destination.get();
    if (d == nullptr) return;  // a source is given no sums
    if (fn == nullptr) return d->on_sums(nullptr);
    try {  // a std::function: nothing may be thrown across the C boundary, even bad_alloc
        d->on_sums([fn, ctx](uint32_t block, uint64_t offset, std::span<const uint64_t> sums) -> Status {
            vmm_err err{};
            if (fn(ctx, block, offset, sums.data(), static_cast<uint32_t>(sums.size()), &err) == 0) return {};
            std::string text(err.text, strnlen(err.text, sizeof err.text));
            return Error(text.empty() ? "vmm refused the verify-ram sums without saying why" : text);
        });
    } catch (...) {
        d->on_sums(nullptr);  // no callback: SUMS that arrive fail the round, saying so
    }
}
const char* do_describe(void* c) { return C(c).describe().c_str(); }
void do_close(void* c) { delete static_cast<Handle*>(c); }
void do_abort(void* c, const char* reason) noexcept {
    try {
        C(c).abort(reason != nullptr ? reason : "the migration failed");
    } catch (...) {
    }
}
void do_close_listener(void* l) { delete static_cast<Listener*>(l); }

const char* const kCaps[] = {"rdma-pin-all", nullptr};
const char* const kParams[] = {"rdma-chunk-size", "rdma-pin-limit", "rdma-channels", nullptr};

const vmm_transport_ops kOps = {
    VMM_TRANSPORT_ABI_VERSION, sizeof(vmm_transport_ops), "rdma", kCaps, kParams,
    do_connect, do_listen, do_accept, do_close_listener, do_write, do_flush, do_read,
    ram_begin, ram_send, ram_zero, ram_end, ram_serve, do_describe, do_close, ram_in_flight,
    ram_on_arrival, do_abort, ram_setup, ram_features, ram_sums, ram_on_sums,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const vmm_transport_ops* vmm_transport_plugin_v1(void) { return &kOps; }
