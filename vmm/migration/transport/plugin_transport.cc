// A Transport backed by a plugin's C table (plugin_abi.h).
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>

#include "vmm/plugin_abi.h"
#include "vmm/migration/transport/plugin_settings.h"
#include "vmm/migration/transport/pull.h"
#include "vmm/migration/transport/registry.h"
#include "vmm/migration/wire/page_sums.h"

namespace vmm::migration {

namespace {

struct DlCloser {
    void operator()(void* h) const { ::dlclose(h); }
};
using Library = std::shared_ptr<void>;

Error plugin_error(const vmm_err& e, const char* what) {
    std::string text(e.text, strnlen(e.text, sizeof(e.text)));
    return Error(text.empty() ? std::string(what) + " failed (the plugin gave no reason)" : text);
}

// One call into the plugin: its error, if it failed, with the plugin's reason.
template <typename F>
Status call_plugin(const char* what, F f) {
    vmm_err e{};
    if (f(&e) != 0) return plugin_error(e, what);
    return {};
}

// The source's postcopy over the plugin's channel (pc_*): a run of at most
// PostcopyPages::kMaxPages goes as one vmm_pc_pages, with its sums under verify-ram.
class PluginPostcopySource final : public SourcePostcopyLink {
public:
    // `tagged`: the plugin authenticates every write (VMM_RAM_PC_TAGGED), so no sums go with them.
    // `pulls`: the destination fetches pushed pages itself (VMM_RAM_PC_PULLS): pc_send may say so.
    PluginPostcopySource(const vmm_transport_ops* ops, void* conn, bool beside, bool tagged, bool pulls,
                         PostcopyLinkConfig config)
        : ops_(ops), conn_(conn), beside_(beside), tagged_(tagged), pulls_(pulls), config_(std::move(config)) {}
    Status begin() override { return call_plugin("pc_begin", [&](vmm_err* e) { return ops_->pc_begin(conn_, e); }); }
    Result<std::optional<PostcopyRequest>> next_request(std::chrono::milliseconds wait) override {
        vmm_pc_request r{};
        vmm_err e{};
        int got = ops_->pc_next_request(conn_, static_cast<uint32_t>(wait.count()), &r, &e);
        if (got < 0) return plugin_error(e, "pc_next_request");
        if (got == 0) return std::optional<PostcopyRequest>{};
        if (r.done != 0) return std::optional<PostcopyRequest>{PostcopyRequest::all_placed()};
        if (r.token == VMM_PC_HELD) {
            PostcopyRequest held{false, r.block, r.offset / kStreamPageSize, r.pages, std::nullopt};
            held.held = true;
            return std::optional<PostcopyRequest>{held};
        }
        return std::optional<PostcopyRequest>{PostcopyRequest{false, r.block, r.offset / kStreamPageSize, 1, r.token}};
    }
    Result<uint64_t> send(Path path, const PageRun& run, std::optional<uint32_t> token) override {
        (void)path;  // one channel: the plugin keeps a push and an answer apart (VMM_RAM_PC_ANSWERS)
        if (run.count > PostcopyPages::kMaxPages) return Error("internal: a postcopy run longer than the channel carries");
        std::vector<uint64_t> sums;
        if (config_.verify && !tagged_ && !run.zero)
            for (uint64_t i = 0; i < run.count; ++i) sums.push_back(page_checksum(run.host + i * kStreamPageSize));
        vmm_pc_pages c{run.zero ? VMM_PC_ZERO : VMM_PC_DATA, run.block, run.first_page * kStreamPageSize,
                       static_cast<uint32_t>(run.count), token.value_or(VMM_PC_PUSH), nullptr,
                       sums.empty() ? nullptr : sums.data()};
        vmm_err e{};
        int rc = ops_->pc_send(conn_, &c, &e);
        if (rc == 1 && pulls_ && !token) return kHeld;
        if (rc != 0) return rc == 1 ? Error("the transport plugin held back an answer or a push it may not") : plugin_error(e, "pc_send");
        return (run.zero ? 0 : run.count * kStreamPageSize) + sums.size() * sizeof(uint64_t);
    }
    Status flush(Path path) override {
        (void)path;  // a page has gone once pc_send returned
        return {};
    }
    Status end() override { return call_plugin("pc_end", [&](vmm_err* e) { return ops_->pc_end(conn_, e); }); }
    // An answer from the return path's thread goes beside the push, and a page may land only
    // once: the destination frees a request when its page lands, so a second copy would answer
    // a request it no longer has.
    Answers answers() const override { return {.beside_push = beside_, .own_connection = false, .once = beside_}; }
    uint64_t longest_run() const override { return PostcopyPages::kMaxPages; }

private:
    const vmm_transport_ops* ops_;
    void* conn_;
    bool beside_;
    bool tagged_;
    bool pulls_;
    PostcopyLinkConfig config_;
};

// The destination's postcopy over the plugin's channel: one lane, pages placed from the slot
// they landed in, released once placed.
class PluginPostcopyDest final : public DestPostcopyLink {
public:
    // `fetch_op`: the plugin's pc_fetch, when its table has one.
    PluginPostcopyDest(const vmm_transport_ops* ops, void* conn, bool tagged, decltype(vmm_transport_ops::pc_fetch) fetch_op)
        : ops_(ops), conn_(conn), tagged_(tagged), fetch_(fetch_op) {}
    bool authenticates_pages() const override { return tagged_; }
    Status begin() override { return call_plugin("pc_begin", [&](vmm_err* e) { return ops_->pc_begin(conn_, e); }); }
    Status request(uint32_t block, uint64_t offset) override {
        return call_plugin("pc_request", [&](vmm_err* e) { return ops_->pc_request(conn_, block, offset, e); });
    }
    Result<std::optional<PostcopyPages>> fetch(uint32_t block, uint64_t offset) override {
        if (fetch_ == nullptr) return DestPostcopyLink::fetch(block, offset);
        vmm_pc_pages c{};
        vmm_err e{};
        int got = fetch_(conn_, block, offset, &c, &e);
        if (got < 0) return plugin_error(e, "pc_fetch");
        if (got == 0) return std::optional<PostcopyPages>{};
        auto p = pages_from(c);
        if (!p) return p.error();
        if (p->kind != PostcopyPages::Kind::data) return Error("the transport plugin's pc_fetch gave no pages");
        return std::optional<PostcopyPages>{*p};
    }
    Result<PostcopyPages> next(Lane lane) override {
        if (lane != Lane::main) return Error("internal: postcopy asked the plugin's channel for a lane it lacks");
        vmm_pc_pages c{};
        if (auto s = call_plugin("pc_next_arrival", [&](vmm_err* e) { return ops_->pc_next_arrival(conn_, &c, e); }); !s)
            return s.error();
        return pages_from(c);
    }
    Status release(const PostcopyPages& p) override {
        vmm_pc_pages c{};
        c.block = p.block, c.offset = p.offset, c.pages = p.pages, c.token = p.token;
        return call_plugin("pc_release", [&](vmm_err* e) { return ops_->pc_release(conn_, &c, e); });
    }
    Status done() override { return call_plugin("pc_done", [&](vmm_err* e) { return ops_->pc_done(conn_, e); }); }

private:
    static Result<PostcopyPages> pages_from(const vmm_pc_pages& c) {
        if (c.kind != VMM_PC_DATA && c.kind != VMM_PC_ZERO && c.kind != VMM_PC_END) {
            return Error(fmt::format("the transport plugin gave postcopy pages of kind {}", c.kind));
        }
        PostcopyPages p;
        p.kind = c.kind == VMM_PC_DATA ? PostcopyPages::Kind::data
                 : c.kind == VMM_PC_ZERO ? PostcopyPages::Kind::zero : PostcopyPages::Kind::end;
        p.block = c.block, p.offset = c.offset, p.pages = c.pages, p.token = c.token;
        p.data = static_cast<const uint8_t*>(c.data);
        if (c.sums != nullptr) p.sums = {c.sums, c.pages};
        if (p.kind == PostcopyPages::Kind::data && p.data == nullptr) return Error("the transport plugin gave postcopy data without pages");
        return p;
    }

    const vmm_transport_ops* ops_;
    void* conn_;
    bool tagged_;
    decltype(vmm_transport_ops::pc_fetch) fetch_;
};

// Keeps the C strings the args struct points to alive during one call.
struct Args {
    Args(const TransportContext& ctx) : options(ctx.options()) {
        for (const auto& b : ctx.blocks) blocks.push_back({b.name.c_str(), b.host, b.size, b.guest_addr});
        for (const auto& [k, v] : options.params.transport) params.push_back({k.c_str(), v.c_str()});
        for (const auto& [k, v] : options.caps.transport) caps.push_back({k.c_str(), v ? "on" : "off"});
        a.struct_size = sizeof(a);
        a.uri = ctx.uri.text.c_str();
        a.host = ctx.uri.host.c_str();
        a.port = ctx.uri.port;
        rest = ctx.uri.text.substr(ctx.uri.text.find(':') + 1);
        a.rest = rest.c_str();
        a.blocks = blocks.data();
        a.block_count = static_cast<uint32_t>(blocks.size());
        a.params = params.data();
        a.param_count = static_cast<uint32_t>(params.size());
        a.caps = caps.data();
        a.cap_count = static_cast<uint32_t>(caps.size());
        a.cancel_fd = ctx.cancel->fd();
        a.connect_timeout_ms = options.params.connect_timeout_ms;
        a.io_timeout_ms = options.params.io_timeout_ms;
        a.max_bandwidth = options.params.max_bandwidth;
        a.max_postcopy_bandwidth = options.params.max_postcopy_bandwidth;
        a.flags = (options.caps.postcopy_ram ? VMM_ARGS_POSTCOPY : 0u) | (options.caps.verify_ram ? VMM_ARGS_VERIFY : 0u);
        a.tls_creds = options.params.tls_creds.c_str();
        a.tls_hostname = options.params.tls_hostname.c_str();
        a.tls_authz = options.params.tls_authz.c_str();
        a.tls_rekey_records = options.params.tls_rekey_records;
        a.connect_errno = &connect_errno;
    }
    int32_t connect_errno = 0;
    Options options;
    vmm_transport_args a{};
    std::string rest;
    std::vector<vmm_ram_block> blocks;
    std::vector<vmm_kv> params, caps;
};

// At most this many setup steps are read from a plugin (a few are expected).
constexpr uint32_t kMaxSetupParts = 64;

// One connection of a plugin: its table and handle, and what it can do. The stream, the RAM
// channels and the connection itself are each a class over it.
struct PluginHandle {
    Library lib;
    const vmm_transport_ops* ops;
    void* conn;
    // Whether the plugin's table reaches the optional member at `offset` (read it only then).
    bool covers(size_t offset, size_t size) const { return ops->struct_size >= offset + size; }
    // Whether ram_features (optional) says `bit` (VMM_RAM_*) for this connection.
    bool has_feature(uint32_t bit) const;
    // link_broke (optional): whether the last failure was the link's.
    bool link_broke() const;
    std::vector<uint64_t> block_pages;  // the guest's RAM blocks, in pages
};

// An optional member of the plugin's table (read through covers()), or null when its table is
// too old to have it.
#define VMM_OPTIONAL_OP(name) \
    (plugin_.covers(offsetof(vmm_transport_ops, name), sizeof plugin_.ops->name) ? plugin_.ops->name : nullptr)

bool PluginHandle::has_feature(uint32_t bit) const {
    const PluginHandle& plugin_ = *this;
    auto features = VMM_OPTIONAL_OP(ram_features);
    return features != nullptr && (features(conn) & bit) != 0;
}

bool PluginHandle::link_broke() const {
    const PluginHandle& plugin_ = *this;
    auto fn = VMM_OPTIONAL_OP(link_broke);
    return fn != nullptr && fn(conn) != 0;
}

// The migration's byte stream, through the plugin's write, flush and read.
class PluginStream final : public stream::ByteStream {
public:
    explicit PluginStream(const PluginHandle& plugin) : plugin_(plugin) {}
    using stream::ByteStream::write;
    Status write(std::span<const std::span<const uint8_t>> buffers) override {
        std::vector<vmm_buf> bufs;
        for (auto b : buffers) bufs.push_back({b.data(), b.size()});
        return call_plugin("write", [&](vmm_err* e) {
            return plugin_.ops->write(plugin_.conn, bufs.data(), static_cast<uint32_t>(bufs.size()), e);
        });
    }
    Status flush() override {
        return call_plugin("flush", [&](vmm_err* e) { return plugin_.ops->flush(plugin_.conn, e); });
    }
    Status read_exact(std::span<uint8_t> out) override {
        size_t n = std::min(out.size(), back_.size());  // what unread() put back comes first
        std::copy_n(back_.begin(), n, out.begin());
        back_.erase(back_.begin(), back_.begin() + static_cast<long>(n));
        out = out.subspan(n);
        if (out.empty()) return {};
        return call_plugin("read", [&](vmm_err* e) { return plugin_.ops->read(plugin_.conn, out.data(), out.size(), e); });
    }
    Status unread(std::span<const uint8_t> bytes) override {
        back_.insert(back_.begin(), bytes.begin(), bytes.end());
        return {};
    }
    bool link_broke() const override { return plugin_.link_broke(); }

private:
    const PluginHandle& plugin_;
    std::vector<uint8_t> back_;
};

// The plugin's RAM channel, either side: the source's rounds (send, send_zero, the sums) and the
// destination's (serve_round, the arrivals and the sums it is handed).
class PluginRam final : public SourceRamChannel, public DestRamChannel {
public:
    explicit PluginRam(const PluginHandle& plugin) : plugin_(plugin) {}
    Status setup() override {
        auto fn = VMM_OPTIONAL_OP(ram_setup);
        if (fn == nullptr) return {};
        return call_plugin("ram_setup", [&](vmm_err* e) { return fn(plugin_.conn, e); });
    }
    Status begin_round(uint32_t round) override {
        return call_plugin("ram_begin_round", [&](vmm_err* e) { return plugin_.ops->ram_begin_round(plugin_.conn, round, e); });
    }
    Status send(uint32_t block, uint64_t offset, uint64_t length) override {
        return call_plugin("ram_send", [&](vmm_err* e) { return plugin_.ops->ram_send(plugin_.conn, block, offset, length, e); });
    }
    Status send_zero(uint32_t block, uint64_t offset, uint64_t length) override {
        return call_plugin("ram_send_zero",
                           [&](vmm_err* e) { return plugin_.ops->ram_send_zero(plugin_.conn, block, offset, length, e); });
    }
    Status end_round() override {
        return call_plugin("ram_end_round", [&](vmm_err* e) { return plugin_.ops->ram_end_round(plugin_.conn, e); });
    }
    uint64_t in_flight() const override {
        auto fn = VMM_OPTIONAL_OP(ram_in_flight);
        return fn != nullptr ? fn(plugin_.conn) : 0;
    }
    void on_arrival(std::function<void()> fn) override {
        arrival_ = std::move(fn);
        if (auto set = VMM_OPTIONAL_OP(ram_on_arrival)) set(plugin_.conn, arrival_ ? &PluginRam::arrived : nullptr, this);
    }
    Status serve_round(uint32_t round) override {
        Status s = call_plugin("ram_serve_round", [&](vmm_err* e) { return plugin_.ops->ram_serve_round(plugin_.conn, round, e); });
        // A round served to its end is whole here (VMM_RAM_RESUMABLE): its pages, and every
        // page it did not carry, which was whole already.
        if (s && landed_) {
            for (uint32_t b = 0; b < plugin_.block_pages.size(); ++b) landed_(b, 0, plugin_.block_pages[b], round);
        }
        return s;
    }
    // The plugin says it can resume, and has what that takes.
    bool resumable() const override {
        return VMM_OPTIONAL_OP(link_broke) != nullptr && VMM_OPTIONAL_OP(accept_within) != nullptr &&
               plugin_.has_feature(VMM_RAM_RESUMABLE);
    }
    bool on_landed(LandedFn fn) override {
        if (fn && !resumable()) return false;
        landed_ = std::move(fn);
        return true;
    }
    bool on_delivered(DeliveredFn fn) override {
        auto set = VMM_OPTIONAL_OP(ram_on_landed);
        if (set == nullptr) return !fn;
        delivered_ = std::move(fn);
        set(plugin_.conn, delivered_ ? &PluginRam::delivered : nullptr, this);
        return true;
    }
    // Both sides': the connection's (its stream and its RAM channel are one connection).
    bool link_broke() const override { return plugin_.link_broke(); }
    // Both SourceRamChannel's and DestRamChannel's: the connection's features, either side.
    bool carries_sums() const override {
        if (VMM_OPTIONAL_OP(ram_sums) == nullptr || VMM_OPTIONAL_OP(ram_on_sums) == nullptr) return false;
        return plugin_.has_feature(VMM_RAM_SUMS);
    }
    Status sums(uint32_t block, uint64_t offset, std::span<const uint64_t> page_sums) override {
        // Called only once carries_sums() said yes (the saver's mode): the member is there.
        auto fn = VMM_OPTIONAL_OP(ram_sums);
        if (fn == nullptr) return SourceRamChannel::sums(block, offset, page_sums);
        return call_plugin("ram_sums", [&](vmm_err* e) {
            return fn(plugin_.conn, block, offset, page_sums.data(), static_cast<uint32_t>(page_sums.size()), e);
        });
    }
    void on_sums(SumsFn fn) override {
        sums_ = std::move(fn);
        if (carries_sums()) plugin_.ops->ram_on_sums(plugin_.conn, sums_ ? &PluginRam::deliver_sums : nullptr, this);
    }

private:
    static void arrived(void* self) noexcept {  // called by the plugin: no exception may escape
        try {
            if (auto& fn = static_cast<PluginRam*>(self)->arrival_) fn();
        } catch (...) {
        }
    }
    // Called by the plugin: no exception may escape. Only whole pages of a block count.
    static void delivered(void* self, uint32_t block, uint64_t offset, uint64_t length) noexcept {
        try {
            auto* me = static_cast<PluginRam*>(self);
            const auto& pages = me->plugin_.block_pages;
            uint64_t first = (offset + kStreamPageSize - 1) / kStreamPageSize;
            uint64_t end = length > UINT64_MAX - offset ? 0 : (offset + length) / kStreamPageSize;
            if (!me->delivered_ || block >= pages.size() || end > pages[block] || end <= first) return;
            me->delivered_(block, first, end - first);
        } catch (...) {
        }
    }
    static int deliver_sums(void* self, uint32_t block, uint64_t offset, const uint64_t* sums, uint32_t count,
                            vmm_err* err) noexcept {  // called by the plugin: no exception may escape
        try {
            auto& fn = static_cast<PluginRam*>(self)->sums_;
            Status s = fn ? fn(block, offset, {sums, count}) : Status(Error("verify-ram sums arrived unasked"));
            if (s) return 0;
            std::snprintf(err->text, sizeof err->text, "%s", s.error().message().c_str());
        } catch (...) {
            std::snprintf(err->text, sizeof err->text, "verify-ram: checking the sums failed (out of memory?)");
        }
        return -1;
    }
    const PluginHandle& plugin_;
    std::function<void()> arrival_;
    SumsFn sums_;
    LandedFn landed_;
    DeliveredFn delivered_;
};

class PluginConnection final : public Connection {
public:
    PluginConnection(Library lib, const vmm_transport_ops* ops, void* conn, std::vector<uint64_t> block_pages)
        : plugin_{std::move(lib), ops, conn, std::move(block_pages)}, stream_(plugin_), ram_(plugin_) {}
    ~PluginConnection() override { plugin_.ops->close(plugin_.conn); }

    stream::ByteStream& stream() override { return stream_; }
    SourceRamChannel* source_ram() override { return plugin_.ops->ram_send != nullptr ? &ram_ : nullptr; }
    DestRamChannel* dest_ram() override { return plugin_.ops->ram_serve_round != nullptr ? &ram_ : nullptr; }
    std::unique_ptr<SourcePostcopyLink> source_postcopy(PostcopyLinkConfig config) override {
        if (!has_postcopy()) return Connection::source_postcopy(std::move(config));
        return std::make_unique<PluginPostcopySource>(plugin_.ops, plugin_.conn, plugin_.has_feature(VMM_RAM_PC_ANSWERS),
                                                      plugin_.has_feature(VMM_RAM_PC_TAGGED),
                                                      plugin_.has_feature(VMM_RAM_PC_PULLS), std::move(config));
    }
    std::unique_ptr<DestPostcopyLink> dest_postcopy(PostcopyLinkConfig config) override {
        if (!has_postcopy()) return Connection::dest_postcopy(std::move(config));
        return std::make_unique<PluginPostcopyDest>(plugin_.ops, plugin_.conn, plugin_.has_feature(VMM_RAM_PC_TAGGED),
                                                    VMM_OPTIONAL_OP(pc_fetch));
    }
    bool postcopy_channel() const override { return has_postcopy(); }
    std::string describe() const override {
        return plugin_.ops->describe ? plugin_.ops->describe(plugin_.conn) : plugin_.ops->scheme;
    }
    Status cut() override {
        auto fn = VMM_OPTIONAL_OP(cut);
        if (fn == nullptr) return Connection::cut();
        return call_plugin("cut", [&](vmm_err* e) { return fn(plugin_.conn, e); });
    }
    void abort(const std::string& reason) override {
        if (auto fn = VMM_OPTIONAL_OP(abort)) fn(plugin_.conn, reason.c_str());
    }
    std::vector<SetupPart> setup_parts() const override;
    Result<std::optional<PageSumKey>> sums_key() override;

private:
    // Whether the plugin has every pc_* member and agreed postcopy with its peer.
    bool has_postcopy() const {
        const vmm_transport_ops* ops = plugin_.ops;
        if (VMM_OPTIONAL_OP(pc_done) == nullptr) return false;
        if (!ops->pc_begin || !ops->pc_next_request || !ops->pc_send || !ops->pc_end || !ops->pc_request ||
            !ops->pc_next_arrival || !ops->pc_release || !ops->pc_done)
            return false;
        return plugin_.has_feature(VMM_RAM_POSTCOPY);
    }
    PluginHandle plugin_;
    PluginStream stream_;
    PluginRam ram_;
};

std::vector<SetupPart> PluginConnection::setup_parts() const {
    auto fn = VMM_OPTIONAL_OP(setup_parts);
    if (fn == nullptr) return {};
    std::vector<vmm_time_part> got(kMaxSetupParts);
    uint32_t n = std::min<uint32_t>(fn(plugin_.conn, got.data(), kMaxSetupParts), kMaxSetupParts);
    std::vector<SetupPart> out;
    for (uint32_t i = 0; i < n; ++i) {
        std::string name = got[i].name != nullptr ? got[i].name : "?";
        out.push_back({std::move(name), static_cast<double>(got[i].us) / 1000.0, {}});
    }
    return out;
}

Result<std::optional<PageSumKey>> PluginConnection::sums_key() {
    auto fn = VMM_OPTIONAL_OP(ram_sums_key);
    if (fn == nullptr || !plugin_.has_feature(VMM_RAM_SUMS_KEYED)) return std::optional<PageSumKey>{};
    PageSumKey key{};
    auto s = call_plugin("ram_sums_key",
                         [&](vmm_err* e) { return fn(plugin_.conn, key.data(), static_cast<uint32_t>(key.size()), e); });
    if (!s) return s.error();
    return std::optional<PageSumKey>(key);
}

class PluginListener final : public Listener {
public:
    PluginListener(Library lib, const vmm_transport_ops* ops, void* l, std::string what, std::vector<uint64_t> block_pages)
        : lib_(std::move(lib)), ops_(ops), l_(l), what_(std::move(what)), block_pages_(std::move(block_pages)) {}
    ~PluginListener() override { ops_->close_listener(l_); }
    Result<std::unique_ptr<Connection>> accept() override {
        vmm_err e{};
        void* c = ops_->accept(l_, &e);
        if (c == nullptr) return plugin_error(e, "accept");
        return std::unique_ptr<Connection>(new PluginConnection(lib_, ops_, c, block_pages_));
    }
    Result<std::unique_ptr<Connection>> accept_until(std::chrono::steady_clock::time_point deadline) override {
        bool has = ops_->struct_size >= offsetof(vmm_transport_ops, accept_within) + sizeof ops_->accept_within;
        if (!has || ops_->accept_within == nullptr) return Listener::accept_until(deadline);
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        vmm_err e{};
        void* c = ops_->accept_within(l_, static_cast<uint32_t>(std::clamp<int64_t>(left.count(), 0, UINT32_MAX)), &e);
        if (c == nullptr) {
            // The wait's end is ETIMEDOUT, as a socket listener's: no text (an older plugin's
            // text, at the deadline); a text before it is the listener's failure.
            if (e.text[0] == '\0') {
                return Error::with_errno(fmt::format("{}: no source came within {} ms", what_, left.count()), ETIMEDOUT);
            }
            Error err = plugin_error(e, "accept");
            return std::chrono::steady_clock::now() >= deadline ? Error::with_errno(err.message(), ETIMEDOUT) : err;
        }
        return std::unique_ptr<Connection>(new PluginConnection(lib_, ops_, c, block_pages_));
    }
    std::string describe() const override { return what_; }

private:
    Library lib_;
    const vmm_transport_ops* ops_;
    void* l_;
    std::string what_;
    std::vector<uint64_t> block_pages_;
};

std::vector<uint64_t> pages_of(const std::vector<RamBlockView>& blocks) {
    std::vector<uint64_t> out;
    for (const auto& b : blocks) out.push_back(b.size / kStreamPageSize);
    return out;
}

// Pulling through the plugin (serve, serve_clients, serve_stop; pull_open, pull_read, pull_close).
class PluginPulledFile final : public PulledFile {
public:
    PluginPulledFile(Library lib, const vmm_transport_ops* ops, void* pull, uint64_t size, std::string name)
        : lib_(std::move(lib)), ops_(ops), pull_(pull), size_(size), name_(std::move(name)) {}
    ~PluginPulledFile() override { ops_->pull_close(pull_); }
    uint64_t size() const override { return size_; }
    Status read(std::span<uint8_t> into, uint64_t at) override {
        if (at > size_ || into.size() > size_ - at) {
            return Error(fmt::format("{}: a read of {} bytes at {} past the {} served", name_, into.size(), at, size_));
        }
        return call_plugin("pull_read", [&](vmm_err* e) { return ops_->pull_read(pull_, into.data(), into.size(), at, e); });
    }
    std::string describe() const override { return name_; }

private:
    Library lib_;
    const vmm_transport_ops* ops_;
    void* pull_;
    uint64_t size_;
    std::string name_;
};

class PluginFileServer final : public FileServer {
public:
    PluginFileServer(Library lib, const vmm_transport_ops* ops, void* server)
        : lib_(std::move(lib)), ops_(ops), server_(server) {}
    ~PluginFileServer() override { ops_->serve_stop(server_); }
    std::vector<PullClient> clients() const override {
        std::vector<vmm_pull_client> raw(16);
        for (;;) {
            uint32_t n = ops_->serve_clients(server_, raw.data(), static_cast<uint32_t>(raw.size()));
            if (n <= raw.size()) {
                raw.resize(n);
                break;
            }
            raw.resize(n);  // more came than room: ask again with room for them
        }
        std::vector<PullClient> out;
        for (const auto& c : raw) {
            PullClient p;
            p.peer.assign(c.peer, strnlen(c.peer, sizeof c.peer));
            p.pulled = c.pulled;
            p.ms = c.ms;
            p.state = c.state == VMM_PULL_DONE ? PullClient::State::done
                      : c.state == VMM_PULL_GONE ? PullClient::State::gone
                                                 : PullClient::State::pulling;
            p.why.assign(c.why, strnlen(c.why, sizeof c.why));
            out.push_back(std::move(p));
        }
        return out;
    }

private:
    Library lib_;
    const vmm_transport_ops* ops_;
    void* server_;
};

class PluginTransport final : public Transport {
public:
    PluginTransport(Library lib, const vmm_transport_ops* ops, std::vector<TransportSetting> settings)
        : lib_(std::move(lib)), ops_(ops), settings_(std::move(settings)) {}
    std::string scheme() const override { return ops_->scheme; }
    std::vector<TransportSetting> settings() const override { return settings_; }
    bool listener_reads_settings_late() const override { return false; }  // vmm_transport_args, at listen
    bool carries_tls() const override {
        bool has = ops_->struct_size >= offsetof(vmm_transport_ops, features) + sizeof ops_->features;
        return has && (ops_->features & VMM_TRANSPORT_TLS) != 0;
    }

    Result<std::unique_ptr<Connection>> connect(const TransportContext& ctx) override {
        Args args(ctx);
        vmm_err e{};
        void* c = ops_->connect(&args.a, &e);
        if (c == nullptr) {
            Error err = plugin_error(e, "connect");
            return args.connect_errno != 0 ? Error::with_errno(err.message(), args.connect_errno) : err;
        }
        return std::unique_ptr<Connection>(new PluginConnection(lib_, ops_, c, pages_of(ctx.blocks)));
    }
    void warm_up() override {
        bool has = ops_->struct_size >= offsetof(vmm_transport_ops, warm_up) + sizeof ops_->warm_up;
        if (has && ops_->warm_up != nullptr) ops_->warm_up();
    }
    Result<std::unique_ptr<Listener>> listen(const TransportContext& ctx) override {
        Args args(ctx);
        vmm_err e{};
        void* l = ops_->listen(&args.a, &e);
        if (l == nullptr) return plugin_error(e, "listen");
        return std::unique_ptr<Listener>(new PluginListener(lib_, ops_, l, ctx.uri.text, pages_of(ctx.blocks)));
    }
    bool pulls() const override {
        bool has = ops_->struct_size >= offsetof(vmm_transport_ops, pull_close) + sizeof ops_->pull_close;
        return has && ops_->serve && ops_->serve_clients && ops_->serve_stop && ops_->pull_open && ops_->pull_read &&
               ops_->pull_close;
    }
    Result<std::unique_ptr<FileServer>> serve(const TransportContext& ctx, const uint8_t* base, uint64_t size) override {
        if (!pulls()) return Transport::serve(ctx, base, size);
        Args args(ctx);
        vmm_err e{};
        void* s = ops_->serve(&args.a, base, size, &e);
        if (s == nullptr) return plugin_error(e, "serve");
        return std::unique_ptr<FileServer>(new PluginFileServer(lib_, ops_, s));
    }
    Result<std::unique_ptr<PulledFile>> pull(const TransportContext& ctx) override {
        if (!pulls()) return Transport::pull(ctx);
        Args args(ctx);
        vmm_err e{};
        uint64_t size = 0;
        void* p = ops_->pull_open(&args.a, &size, &e);
        if (p == nullptr) return plugin_error(e, "pull_open");
        return std::unique_ptr<PulledFile>(new PluginPulledFile(lib_, ops_, p, size, ctx.uri.text));
    }

private:
    Library lib_;
    const vmm_transport_ops* ops_;
    std::vector<TransportSetting> settings_;
};

Status check_table(const vmm_transport_ops* ops, const std::string& path, const std::string& scheme) {
    if (ops == nullptr) return Error(path + ": " VMM_TRANSPORT_ENTRY "() returned no table");
    if (ops->abi_version != VMM_TRANSPORT_ABI_VERSION) {
        return Error(fmt::format("{}: plugin ABI version {}, this vmm speaks {}: rebuild the plugin", path, ops->abi_version,
                                 VMM_TRANSPORT_ABI_VERSION));
    }
    if (ops->struct_size < VMM_TRANSPORT_OPS_V1_MIN_SIZE) return Error(path + ": the plugin's table is too small for ABI 1");
    if (ops->scheme == nullptr || scheme != ops->scheme) {
        return Error(fmt::format("{}: serves '{}:', not '{}:'", path, ops->scheme ? ops->scheme : "(null)", scheme));
    }
    if (!ops->connect || !ops->listen || !ops->accept || !ops->close_listener || !ops->write || !ops->flush ||
        !ops->read || !ops->close) {
        return Error(path + ": the plugin's table lacks a required function");
    }
    bool src = ops->ram_begin_round && ops->ram_send && ops->ram_send_zero && ops->ram_end_round;
    bool any = ops->ram_begin_round || ops->ram_send || ops->ram_send_zero || ops->ram_end_round || ops->ram_serve_round;
    if (any && !(src && ops->ram_serve_round)) return Error(path + ": the plugin's RAM channel is incomplete");
    return {};
}

#undef VMM_OPTIONAL_OP

}  // namespace

Result<std::unique_ptr<Transport>> load_transport_plugin(const std::string& path, const std::string& scheme) {
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return Error(fmt::format("cannot load transport plugin {}: {}", path, ::dlerror()));
    Library lib(h, DlCloser{});
    auto entry = reinterpret_cast<vmm_transport_entry_fn>(::dlsym(h, VMM_TRANSPORT_ENTRY));
    if (entry == nullptr) return Error(path + ": exports no " VMM_TRANSPORT_ENTRY "(): not a vmm transport plugin");
    const vmm_transport_ops* ops = entry();
    if (auto s = check_table(ops, path, scheme); !s) return s.error();
    auto settings = plugin_settings(*ops, path);
    if (!settings) return settings.error();
    return std::unique_ptr<Transport>(new PluginTransport(std::move(lib), ops, std::move(*settings)));
}

}  // namespace vmm::migration
