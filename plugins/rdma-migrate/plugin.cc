// The rdma: transport's C table (include/vmm/plugin_abi.h). Everything here turns the C
// calls into SourceSession or DestinationSession calls and their errors into one line in
// vmm_err; no exception crosses. A call meant for the other side is refused, saying so.
//
// Settings: the rows of proto/settings.h (rdma-pin-all, x-rdma-chunk-size, rdma-pin-limit,
// rdma-channels), which vmm lists and checks as its own. Environment, for tests only:
// VMM_RDMA_ANNOUNCE_VERSION makes a source announce another protocol version;
// VMM_RDMA_BASE_PROTOCOL=1 makes a source offer, and a destination grant, no vmm extension (the
// base protocol as QEMU speaks it: 8-byte private data, 1 MiB chunks, one channel, one entry per
// request).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <chrono>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "proto/memlock.h"
#include "proto/settings.h"
#include "destination_session.h"
#include "source_session.h"
#include "trace.h"
#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/common/units.h"
#include "vmm/plugin_abi.h"
#include "abi_guard.h"
#include "plugin_pull.h"

using namespace rdma_migrate;

namespace {

// tls-creds (the members vmm appends for a transport that says VMM_TRANSPORT_TLS).
Status tls_from(const vmm_transport_args* a, SessionConfig& c) {
    if (a->struct_size < offsetof(vmm_transport_args, tls_rekey_records) + sizeof a->tls_rekey_records) return {};
    if (a->tls_creds == nullptr || *a->tls_creds == '\0') return {};
    vmm::stream::MigrationTls settings{.creds = a->tls_creds,
                                       .hostname = a->tls_hostname != nullptr ? a->tls_hostname : "",
                                       .uri_host = a->host != nullptr ? a->host : "",
                                       .authz = a->tls_authz != nullptr ? a->tls_authz : "",
                                       .connect_timeout = std::chrono::milliseconds(c.timeouts.connect_ms),
                                       .rekey_records = a->tls_rekey_records};
    // The sessions set the role: the source is the client, the destination the server.
    c.tls = vmm::stream::migration_tls_setup(vmm::stream::TlsRole::client, settings);
    return {};
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
    auto settings = read_settings(a->caps, a->cap_count, a->params, a->param_count);
    if (!settings) return settings.error();
    c.pin_all = settings->pin_all;
    c.chunk_size = settings->chunk_size;
    c.chunk_size_set = settings->chunk_size_set;
    c.pin_limit = settings->pin_limit;
    c.channels = settings->channels;
    // Tests only: announce another protocol version, to check that a peer refuses it.
    if (const char* v = std::getenv("VMM_RDMA_ANNOUNCE_VERSION"); v != nullptr && *v != '\0') {
        c.announce_version = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    }
    if (a->struct_size >= offsetof(vmm_transport_args, flags) + sizeof a->flags) {
        c.postcopy = (a->flags & VMM_ARGS_POSTCOPY) != 0;
        c.verify = (a->flags & VMM_ARGS_VERIFY) != 0;
    }
    c.postcopy_read = settings->postcopy_read;
    c.postcopy_read_push = settings->postcopy_read_push;
    c.postcopy_read_wait_us = settings->postcopy_read_wait_us;
    if (a->struct_size >= offsetof(vmm_transport_args, max_postcopy_bandwidth) + sizeof a->max_postcopy_bandwidth)
        c.pull_rate = a->max_postcopy_bandwidth;
    if (const char* v = std::getenv("VMM_RDMA_BASE_PROTOCOL"); v != nullptr && std::strcmp(v, "1") == 0) c.base_protocol = true;
    if (auto s = tls_from(a, c); !s) return s.error();
    if (auto g = ChunkGeometry::make(c.chunk_size); !g) return g.error();
    if (c.pin_limit != 0 && c.pin_limit < c.chunk_size) {
        return Error(fmt::format("rdma-pin-limit {} is smaller than one chunk ({}): raise it or lower x-rdma-chunk-size",
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
    PostcopyDestination::Arrival arrival;  // the destination's last, until pc_release
    PostcopyDestination::Arrival fetched;  // the fault thread's last from pc_fetch, until pc_release
    Connection& connection() const { return source ? source->link() : destination->link(); }
};

struct Listener {
    std::shared_ptr<Endpoint> ep;  // a connection it accepted gives its listening id back here when it ends
    SessionConfig cfg;
    bool pinning_tried = false;
};

// rdma-pin-all set here before listening: pin this side's RAM while waiting (pinned_ahead.h),
// if it may pin all of it, knows its device, and postcopy (whose recovery listens while
// userfaultfd guards the RAM) is off.
void pin_while_waiting(Listener& l, const std::string& pin_all_refusal) {
    if (l.pinning_tried || !l.cfg.pin_all || l.cfg.postcopy || !pin_all_refusal.empty() || !l.ep->listen_id) return;
    l.pinning_tried = true;
    ibv_context* device = l.ep->listen_id->verbs;
    if (device == nullptr) {
        vmm::log::info("rdma-pin-all: {} names no one RDMA device: the RAM is pinned when the source asks, not while "
                       "waiting (listen on the device's address to have it pinned ahead)", l.ep->describe);
        return;
    }
    auto ahead = PinnedAhead::start(device, l.cfg.blocks);
    if (!ahead) {
        vmm::log::warn("rdma-pin-all: not pinning while waiting: {}", ahead.error().message());
        return;
    }
    l.ep->ahead = std::move(*ahead);
}

void* do_connect(const vmm_transport_args* a, vmm_err* e) {
    void* out = nullptr;
    guarded(e, [&]() -> Status {
        trace("source: connecting to {}:{}", a->host, a->port);
        std::vector<TimedStep> checks;
        StepClock clock(checks);
        auto cfg = config_from(a);
        if (!cfg) return cfg.error();
        if (auto s = check_source_memlock(memlock_budget(), ram_bytes(*cfg), cfg->pin_all, cfg->pin_limit); !s) return s;
        clock.mark("checks");  // the settings read, the memlock limit against what will be pinned
        auto s = SourceSession::connect(a->host, a->port, std::move(*cfg));
        if (!s) {
            bool says = a->struct_size >= offsetof(vmm_transport_args, connect_errno) + sizeof a->connect_errno;
            if (says && a->connect_errno != nullptr) *a->connect_errno = s.error().sys_errno();
            return s.error();
        }
        (*s)->link().add_steps(checks, true);
        out = new Handle{std::move(*s), nullptr, {}, {}};
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
        out = new Listener{std::shared_ptr<Endpoint>(std::move(*ep)), std::move(*cfg)};
        return {};
    });
    return out;
}

// `wait_ms` -1: until a source comes or vmm cancels. `timed_out`: set when the wait ended.
void* accept_waiting(void* lp, int wait_ms, vmm_err* e, bool* timed_out = nullptr) {
    void* out = nullptr;
    guarded(e, [&]() -> Status {
        auto* l = static_cast<Listener*>(lp);
        if (!l->ep->listen_id) {
            return Error(fmt::format("{}: the listener is in use by a migration's connection (a second accept before it ended)",
                                     l->ep->describe));
        }
        // Grant rdma-pin-all only if all of this side's RAM can be pinned.
        std::string refusal = pin_all_refusal(memlock_budget(), ram_bytes(l->cfg));
        pin_while_waiting(*l, refusal);
        trace("{}: accepting (up to {} ms)", l->ep->describe, wait_ms);
        auto s = DestinationSession::accept(*l->ep, l->cfg, refusal, wait_ms, l->ep);
        if (!s) trace("{}: accept: {}", l->ep->describe, s.error().message());
        if (!s && timed_out != nullptr) *timed_out = wait_ms >= 0 && s.error().sys_errno() == ETIMEDOUT;
        if (!s) return s.error();
        out = new Handle{nullptr, std::move(*s), {}, {}};
        return {};
    });
    return out;
}
void* do_accept(void* lp, vmm_err* e) { return accept_waiting(lp, -1, e); }
// The wait's end with no source leaves err's text empty (the ABI's way of saying ETIMEDOUT).
void* do_accept_within(void* lp, uint32_t wait_ms, vmm_err* e) {
    bool timed_out = false;
    void* out = accept_waiting(lp, static_cast<int>(std::min<uint32_t>(wait_ms, INT32_MAX)), e, &timed_out);
    if (out == nullptr && timed_out) e->text[0] = '\0';
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
    // A lost link is not the peer's to hear about (an ERROR on a channel still up would end a
    // migration that resumes over a new connection).
    if (rc != 0 && !C(c).link_lost()) C(c).abort(e->text);
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
void ram_on_landed(void* c, void (*fn)(void*, uint32_t, uint64_t, uint64_t), void* ctx) {
    if (!H(c).source) return;
    if (fn == nullptr) return H(c).source->on_landed({});
    H(c).source->on_landed([fn, ctx](uint32_t block, uint64_t offset, uint64_t length) { fn(ctx, block, offset, length); });
}
void ram_on_arrival(void* c, void (*fn)(void*), void* ctx) {
    if (H(c).source) H(c).source->on_arrival(fn, ctx);
}
uint32_t ram_features(void* c) {
    // The postcopy channel's source takes answers on the return path's thread (PostcopySource::send);
    // authenticated, it tags every write, which stands in for verify-ram's sums there. Every
    // round served is whole in the destination's memory, and a new connection carries on
    // (VMM_RAM_RESUMABLE: link_broke and accept_within below).
    return VMM_RAM_RESUMABLE | (C(c).carries_sums() ? VMM_RAM_SUMS : 0u) | (C(c).authenticated() ? VMM_RAM_SUMS_KEYED : 0u) |
           (C(c).channels().has_postcopy() ? VMM_RAM_POSTCOPY | VMM_RAM_PC_ANSWERS : 0u) |
           (C(c).channels().has_postcopy() && C(c).authenticated() ? VMM_RAM_PC_TAGGED : 0u) |
           (C(c).channels().has_postcopy() && C(c).agreed(kCapPostcopyReadPush) ? VMM_RAM_PC_PULLS : 0u);
}
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
// Postcopy (pc_*): the source's and the destination's halves of the postcopy channel.
Result<PostcopySource*> pc_source(void* c, const char* call) {
    auto s = source(c, call);
    if (!s) return s.error();
    if ((*s)->postcopy() == nullptr) return Error("rdma transport: no postcopy channel was agreed (postcopy-ram on at both ends?)");
    return (*s)->postcopy();
}
Result<PostcopyDestination*> pc_destination(void* c, const char* call) {
    auto d = destination(c, call);
    if (!d) return d.error();
    if ((*d)->postcopy() == nullptr) return Error("rdma transport: no postcopy channel was agreed (postcopy-ram on at both ends?)");
    return (*d)->postcopy();
}
int pc_begin(void* c, vmm_err* e) {
    return session_call(c, e, [&]() -> Status {
        if (H(c).destination) return H(c).destination->begin_postcopy();
        auto s = pc_source(c, "pc_begin");
        return s ? (*s)->begin() : Status(s.error());
    });
}
int pc_next_request(void* c, uint32_t wait_ms, vmm_pc_request* out, vmm_err* e) {
    int got = 0;
    int rc = guarded(e, [&]() -> Status {
        auto s = pc_source(c, "pc_next_request");
        if (!s) return s.error();
        auto r = (*s)->next(static_cast<int>(std::min<uint32_t>(wait_ms, 60000)));
        if (!r) return r.error();
        if (!*r) return {};
        const auto& q = **r;
        *out = vmm_pc_request{q.done ? 1u : 0u, q.block, q.offset, q.held != 0 ? VMM_PC_HELD : q.slot, q.held};
        got = 1;
        return {};
    });
    return rc != 0 ? rc : got;
}
// 1: a push not sent, which the destination reads itself (VMM_RAM_PC_PULLS).
int pc_send(void* c, const vmm_pc_pages* p, vmm_err* e) {
    bool sent = true;
    int rc = guarded(e, [&]() -> Status {
        auto s = pc_source(c, "pc_send");
        if (!s) return s.error();
        if (p->kind != VMM_PC_DATA && p->kind != VMM_PC_ZERO) return Error(fmt::format("pc_send: page kind {}", p->kind));
        std::span<const uint64_t> sums(p->sums, p->sums != nullptr ? p->pages : 0);
        std::optional<uint32_t> answer;
        if (p->token != VMM_PC_PUSH) answer = p->token;
        auto r = (*s)->send(p->block, p->offset, p->pages, p->kind == VMM_PC_ZERO, sums, answer);
        if (!r) return r.error();
        sent = *r;
        return {};
    });
    return rc != 0 ? rc : (sent ? 0 : 1);
}
int pc_end(void* c, vmm_err* e) {
    return guarded(e, [&]() -> Status {
        auto s = pc_source(c, "pc_end");
        return s ? (*s)->end() : Status(s.error());
    });
}
int pc_request(void* c, uint32_t block, uint64_t offset, vmm_err* e) {
    return guarded(e, [&]() -> Status {
        auto d = pc_destination(c, "pc_request");
        return d ? (*d)->request(block, offset) : Status(d.error());
    });
}
int pc_next_arrival(void* c, vmm_pc_pages* out, vmm_err* e) {
    return guarded(e, [&]() -> Status {
        auto d = pc_destination(c, "pc_next_arrival");
        if (!d) return d.error();
        auto a = (*d)->next();
        if (!a) return a.error();
        auto& kept = H(c).arrival;
        kept = std::move(*a);
        uint32_t kind = kept.kind == PcKind::data ? VMM_PC_DATA : kept.kind == PcKind::zero ? VMM_PC_ZERO : VMM_PC_END;
        *out = vmm_pc_pages{kind, kept.block, kept.offset, kept.pages, kept.slot, kept.data,
                            kept.sums.empty() ? nullptr : kept.sums.data()};
        return {};
    });
}
// pc_fetch's pages carry this in their token, so that pc_release knows whose they are: each
// thread touches only its own kept arrival.
constexpr uint32_t kFetchedToken = 0x40000000u;

int pc_fetch(void* c, uint32_t block, uint64_t offset, vmm_pc_pages* out, vmm_err* e) {
    bool here = false;
    int rc = guarded(e, [&]() -> Status {
        auto d = pc_destination(c, "pc_fetch");
        if (!d) return d.error();
        auto a = (*d)->fetch(block, offset);
        if (!a) return a.error();
        if (!*a) return {};
        auto& kept = H(c).fetched;
        kept = std::move(**a);
        *out = vmm_pc_pages{VMM_PC_DATA, kept.block, kept.offset, kept.pages, kept.slot | kFetchedToken, kept.data, nullptr};
        here = true;
        return {};
    });
    return rc != 0 ? rc : (here ? 1 : 0);
}
int pc_release(void* c, const vmm_pc_pages* p, vmm_err* e) {
    return guarded(e, [&]() -> Status {
        auto d = pc_destination(c, "pc_release");
        if (!d) return d.error();
        bool fetched = (p->token & kFetchedToken) != 0;
        const auto& kept = fetched ? H(c).fetched : H(c).arrival;
        if ((p->token & ~kFetchedToken) != kept.slot || p->block != kept.block || p->offset != kept.offset) {
            return Error(fetched ? "pc_release: not the last pages pc_fetch gave"
                                 : "pc_release: not the last arrival pc_next_arrival gave");
        }
        return (*d)->release(kept);
    });
}
int pc_done(void* c, vmm_err* e) {
    return guarded(e, [&]() -> Status {
        auto d = pc_destination(c, "pc_done");
        return d ? (*d)->done() : Status(d.error());
    });
}

int ram_sums_key(void* c, uint8_t* key, uint32_t size, vmm_err* e) {
    return guarded(e, [&]() -> Status {
        auto k = C(c).sums_key(size);
        if (!k) return k.error();
        std::memcpy(key, k->data(), size);
        return {};
    });
}

int do_link_broke(void* c) noexcept { return C(c).link_lost() ? 1 : 0; }

int do_cut(void* c, vmm_err* e) {
    return guarded(e, [&]() -> Status {
        C(c).cut();
        return {};
    });
}

// librdmacm's first call in a process lists the RDMA devices, and libibverbs loads a driver for
// each: seconds on a slow machine (5 s of a first connection's setup in the nested VM). An event
// channel made and dropped does just that, here, on vmm's warming thread, which then makes the
// spare control buffers (control_buffers.h). Devices are not opened
// (librdmacm opens one when an id first uses it), so none is held from removal by an idle vmm.
void warm_up() noexcept try {
    std::error_code no_dir;
    if (std::filesystem::is_empty("/sys/class/infiniband", no_dir) || no_dir) return;  // no RDMA here: nothing to load
    auto start = vmm::SteadyClock::now();
    EventChannel ec(rdma_create_event_channel());
    trace("warm-up: librdmacm's device list {} in {} ms", ec ? "loaded" : "not loaded (no usable device)", vmm::ms_since(start));
    if (!ec) return;
    start = vmm::SteadyClock::now();
    ControlBuffers::make_spare();  // the first connection's control buffers, faulted in (control_buffers.h)
    trace("warm-up: control buffers made in {} ms", vmm::ms_since(start));
} catch (...) {
}

// No allocation can fail the caller here: a failure reports no step.
uint32_t setup_parts(void* c, vmm_time_part* out, uint32_t max) noexcept {
    try {
        auto steps = C(c).setup_steps();
        for (uint32_t i = 0; i < max && i < steps.size(); ++i) out[i] = {steps[i].name, steps[i].us};
        return static_cast<uint32_t>(steps.size());
    } catch (...) {
        return 0;
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

// The name lists an older vmm reads (one that knows no `settings`), made from the rows.
struct NameLists {
    std::vector<const char*> caps, params;
    NameLists() {
        for (const vmm_setting* r = setting_rows(); r->name != nullptr; ++r)
            (r->kind == VMM_SETTING_CAPABILITY ? caps : params).push_back(r->name);
        caps.push_back(nullptr);
        params.push_back(nullptr);
    }
};
const NameLists kNames;

const vmm_transport_ops kOps = {
    VMM_TRANSPORT_ABI_VERSION, sizeof(vmm_transport_ops), "rdma", kNames.caps.data(), kNames.params.data(),
    do_connect, do_listen, do_accept, do_close_listener, do_write, do_flush, do_read,
    ram_begin, ram_send, ram_zero, ram_end, ram_serve, do_describe, do_close, ram_in_flight,
    ram_on_arrival, do_abort, ram_setup, ram_features, ram_sums, ram_on_sums, pc_begin, pc_next_request,
    pc_send, pc_end, pc_request, pc_next_arrival, pc_release, pc_done, do_cut, VMM_TRANSPORT_TLS, ram_sums_key,
    setup_parts, warm_up, setting_rows(), do_link_broke, do_accept_within, ram_on_landed,
    pull_abi::serve, pull_abi::serve_clients, pull_abi::serve_stop, pull_abi::pull_open, pull_abi::pull_read,
    pull_abi::pull_close, pc_fetch,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const vmm_transport_ops* vmm_transport_plugin_v1(void) { return &kOps; }
