#include "vmm/migration/transport/pull_transport.h"

#include <fmt/format.h>

#include <chrono>

#include "vmm/common/log.h"
#include "vmm/common/units.h"

#include "vmm/migration/transport/file_io.h"
#include "vmm/migration/transport/pull.h"

namespace vmm::migration {

const char* pull_state_name(PullClient::State s) {
    switch (s) {
        case PullClient::State::pulling: return "pulling";
        case PullClient::State::done: return "done";
        case PullClient::State::gone: return "gone";
    }
    return "?";
}

Result<std::unique_ptr<FileServer>> Transport::serve(const TransportContext& ctx, const uint8_t* base, uint64_t size) {
    (void)base, (void)size;
    return Error(fmt::format("'{}:' cannot serve a saved guest for pulling (rdma can: x-pull-serve FILE rdma:HOST:PORT)",
                             ctx.uri.scheme));
}

Result<std::unique_ptr<PulledFile>> Transport::pull(const TransportContext& ctx) {
    return Error(fmt::format("'{}:' cannot pull a saved guest (rdma can: --incoming rdma-pull:HOST:PORT)", ctx.uri.scheme));
}

namespace {

class PullTransport final : public Transport {
public:
    explicit PullTransport(Transport& base) : base_(base) {}
    std::string scheme() const override { return base_.scheme() + "-pull"; }
    Result<std::unique_ptr<Connection>> connect(const TransportContext& ctx) override {
        return Error(fmt::format("{} is where a clone pulls a served guest from (vmm --incoming {}); a migration "
                                 "goes to {}:HOST:PORT",
                                 ctx.uri.text, ctx.uri.text, base_.scheme()));
    }
    Result<std::unique_ptr<Listener>> listen(const TransportContext& ctx) override {
        auto began = std::chrono::steady_clock::now();
        auto pulled = base_.pull(ctx);
        if (!pulled) return pulled.error();
        uint64_t size = (*pulled)->size();
        auto l = file::open_pulled(ctx, std::move(*pulled));
        if (l) {
            log::info("{}: connected, and the save it serves ({}) checked, in {:.1f} ms", ctx.uri.text, format_size(size),
                      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count());
        }
        return l;
    }

private:
    Transport& base_;
};

}  // namespace

std::unique_ptr<Transport> make_pull_transport(Transport& base) { return std::make_unique<PullTransport>(base); }

}  // namespace vmm::migration
