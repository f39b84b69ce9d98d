// libFuzzer target for vmmd's side of libvirt's RPC: the input is what a client sends on one
// connection, read as vmmd reads it (length word, then header and payload), each call answered
// by the connection-level procedures, the statistics ones, those that change a definition in
// part, and the QEMU program's monitor command and monitor event registrations (over a store that holds two domains whose UUIDs
// the seeds use: "fz", defined, and "fr", transient and marked running, whose "vmm" is a stand-in
// that answers every command but "fail"). Any crash, sanitizer report or reply of ours that does not
// decode is a bug; an input that does not frame ends the connection, as it does in vmmd. After
// each call, "fr"'s vmm emits an event, matched against whatever the input registered (names,
// expressions) and sent (to /dev/null).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <span>

#include <libvirt/libvirt.h>

#include "vmmd/daemon/config_procedures.h"
#include "vmmd/daemon/connect_procedures.h"
#include "vmmd/daemon/domain_capabilities.h"
#include "vmm/common/fd.h"
#include "vmmd/daemon/monitor_events.h"
#include "vmmd/daemon/qemu_procedures.h"
#include "vmmd/daemon/stats_procedures.h"
#include "vmmd/domain/domain_xml.h"
#include "vmmd/migration/legacy_steps.h"
#include "vmmd/rpc/typed_params.h"
#include "vmmd/rpc/message.h"

using namespace vmmd;

namespace {

constexpr Uuid kFuzzUuid = {0x0d, 0x9a, 0x3b, 0x2e, 0x2f, 0x7c, 0x4c, 0x59, 0x9e, 0x7e, 0x7a, 0x3c, 0x1a, 0x5b, 0x9f, 0x10};
constexpr Uuid kRunningUuid = {0x0d, 0x9a, 0x3b, 0x2e, 0x2f, 0x7c, 0x4c, 0x59, 0x9e, 0x7e, 0x7a, 0x3c, 0x1a, 0x5b, 0x9f, 0x11};

// A state directory of its own, removed when the fuzzer ends, holding the domain "fz".
struct FuzzStore {
    std::string dir;
    std::unique_ptr<DomainStore> store;
    FuzzStore() {
        char path[] = "/tmp/vmmd-fuzz.XXXXXX";
        if (::mkdtemp(path) == nullptr) std::abort();
        dir = path;
        auto s = DomainStore::open(dir, [] { return kFuzzUuid; }, [](const std::string&) {});
        if (!s) std::abort();
        store = std::move(*s);
        auto def = parse_domain_xml("<domain type='vmm'><name>fz</name><memory>4096</memory><vcpu>2</vcpu>"
                                    "<os><kernel>idle</kernel></os></domain>",
                                    kFuzzUuid);
        if (!def || !store->define(*def)) std::abort();
        auto running = parse_domain_xml("<domain type='vmm'><name>fr</name><memory>4096</memory><vcpu>1</vcpu>"
                                        "<os><kernel>idle</kernel></os></domain>",
                                        kRunningUuid);
        if (!running || !store->add_transient(*running)) std::abort();
        store->set_running(kRunningUuid, 1, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_BOOTED}, *running);
    }
    ~FuzzStore() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

// The older migration steps' arguments, rewritten as their _PARAMS twins' (legacy_steps.h): what
// comes out must decode as those (their typed parameters, at least).
void legacy_step(const rpc::Message& m) {
    using Translate = vmm::Result<std::vector<uint8_t>> (*)(xdr::Reader&);
    Translate t = nullptr;
    switch (m.header.procedure) {
        case 213: t = begin3_as_params; break;
        case 214: t = prepare3_as_params; break;
        case 216: t = perform3_as_params; break;
        case 217: t = finish3_as_params; break;
        case 218: t = confirm3_as_params; break;
        default: return;
    }
    xdr::Reader in(m.payload);
    auto out = t(in);
    if (!out) return;
    xdr::Reader twin(*out);
    if (m.header.procedure == 213 || m.header.procedure == 216 || m.header.procedure == 218) {  // a domain first
        (void)twin.string(rpc::kMaxString);
        Uuid u{};
        (void)twin.fixed_opaque(u);
        (void)twin.i32();
    }
    if (m.header.procedure == 216) (void)twin.optional_string(rpc::kMaxString);
    if (!rpc::decode_typed_params(twin)) __builtin_trap();
}

rpc::Dispatcher make_dispatcher(DomainStore& store, MonitorEventHub& hub) {
    const DriverIdentity id{"vmm:///system", 1000, "/usr/bin/vmm"};
    std::vector<rpc::Procedure> table = connect_procedures(id);
    for (auto& p : capability_procedures(id)) table.push_back(std::move(p));
    for (auto& p : config_procedures(store)) table.push_back(std::move(p));
    for (auto& p : stats_procedures(store, [](const Uuid&) { return std::optional<pid_t>(); })) table.push_back(std::move(p));
    MonitorCall vmm = [](const Uuid&, const std::string& command, const vmm::monitor::Json& args) -> vmm::Result<vmm::monitor::Json> {
        if (command == "fail") return vmm::Error("the stand-in vmm refuses 'fail'");
        if (command == "human-monitor-command") return vmm::monitor::Json("text");
        return vmm::monitor::Json{{"command", command}, {"args", args}};
    };
    for (auto& p : qemu_procedures(store, vmm)) table.push_back(std::move(p));
    for (auto& p : hub.procedures()) table.push_back(std::move(p));
    return rpc::Dispatcher(std::move(table));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzStore fuzz_store;
    static MonitorEventHub hub;
    static const rpc::Dispatcher dispatcher = make_dispatcher(*fuzz_store.store, hub);
    static const vmm::UniqueFd nowhere(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    static const auto running = fuzz_store.store->by_uuid(kRunningUuid);
    static const vmm::monitor::Json event = {{"event", "MIGRATION"}, {"data", {{"status", "precopy-paused"}}},
                                             {"timestamp", {{"seconds", 1}, {"microseconds", 2}}}};
    rpc::Caller caller;
    hub.connected(caller.connection, std::make_shared<Outbox>(nowhere.get()));
    struct Gone {
        uint64_t c;
        ~Gone() { hub.disconnected(c); }  // the connection's callbacks end with it
    } gone{caller.connection};
    std::span<const uint8_t> in(data, size);
    while (in.size() >= rpc::kLengthSize && !caller.closed) {
        auto n = rpc::decode_length(in.first<rpc::kLengthSize>());
        if (!n || *n > in.size() - rpc::kLengthSize) return 0;
        auto body = in.subspan(rpc::kLengthSize, *n);
        in = in.subspan(rpc::kLengthSize + *n);
        auto m = rpc::decode_message(body);
        if (!m) return 0;
        (void)rpc::decode_error(m->payload);  // what a client's error reply would go through
        if (!dispatcher.serves(m->header.program) || m->header.type != rpc::Type::call) continue;
        legacy_step(*m);
        auto reply = dispatcher.call(caller, *m);
        auto back = rpc::decode_message(std::span(reply).subspan(rpc::kLengthSize));
        if (!back) __builtin_trap();
        hub.relay(running->def, running->id, event);
        if (back->header.status == rpc::ReplyStatus::error && !rpc::decode_error(back->payload)) __builtin_trap();
    }
    return 0;
}
