#include "vmmd/daemon/monitor_events.h"

#include <fmt/format.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>
#include <strings.h>
#include <sys/time.h>

#include "vmm/common/log.h"
#include "vmmd/domain/domain_args.h"

namespace vmmd {

namespace {

using vmm::monitor::Json;

constexpr const char* kRegister = "QEMU_PROC_CONNECT_DOMAIN_MONITOR_EVENT_REGISTER";
constexpr const char* kDeregister = "QEMU_PROC_CONNECT_DOMAIN_MONITOR_EVENT_DEREGISTER";
constexpr int32_t kRegisterNumber = 4, kDeregisterNumber = 5, kEventNumber = 6;
constexpr uint32_t kKnownFlags =
    VIR_CONNECT_DOMAIN_QEMU_MONITOR_EVENT_REGISTER_REGEX | VIR_CONNECT_DOMAIN_QEMU_MONITOR_EVENT_REGISTER_NOCASE;
constexpr size_t kMaxEventName = 256;  // QEMU's are short words; a vmm's longer "name" is not one

// The event's time as the vmm stamped it ({"seconds", "microseconds"}), or now when it has none
// that reads.
std::pair<int64_t, uint32_t> stamp_of(const Json& event) {
    const Json& t = vmm::monitor::child(event, "timestamp");
    auto s = vmm::monitor::int_member(t, "seconds");
    auto us = vmm::monitor::uint_member(t, "microseconds");
    if (s && us && *us < 1000000) return {*s, static_cast<uint32_t>(*us)};
    timeval now{};
    ::gettimeofday(&now, nullptr);
    return {now.tv_sec, static_cast<uint32_t>(now.tv_usec)};
}

// qemu_domain_monitor_event_msg after its callback id: the domain, the name, the time, the data.
std::optional<std::vector<uint8_t>> event_body(const DomainDef& def, int id, const std::string& name, const Json& event) {
    std::optional<std::string> details;
    if (const Json* data = vmm::monitor::member(event, "data")) details = vmm::monitor::to_text(*data);
    if (details && details->size() > rpc::kMaxString) return std::nullopt;
    auto [seconds, micros] = stamp_of(event);
    xdr::Writer w;
    put_domain(w, DomainView{def, true, false, id, {}});
    w.string(name);
    w.i64(seconds);
    w.u32(micros);
    w.optional_string(details);
    return w.take();
}

}  // namespace

bool MonitorEventHub::Callback::matches(const Uuid& uuid, const std::string& name) const {
    if (domain && *domain != uuid) return false;
    if (!event) return true;
    if (pattern) return ::regexec(&pattern->re, name.c_str(), 0, nullptr, 0) == 0;
    if (nocase) return ::strcasecmp(name.c_str(), event->c_str()) == 0;
    return name == *event;
}

void MonitorEventHub::connected(uint64_t connection, std::shared_ptr<Outbox> outbox) {
    callbacks_.connected(connection, std::move(outbox));
}

void MonitorEventHub::disconnected(uint64_t connection) { callbacks_.disconnected(connection); }

void MonitorEventHub::relay(const DomainDef& def, int id, const Json& event) {
    auto name = vmm::monitor::string_member(event, "event");
    if (!name || name->empty() || name->size() > kMaxEventName || name->find('\0') != std::string::npos) return;
    auto to = callbacks_.targets([&](const Callback& cb) { return cb.matches(def.uuid, *name); });
    if (to.empty()) return;
    auto body = event_body(def, id, *name, event);
    if (!body) {
        vmm::log::warn("vmmd: domain '{}': event {} not relayed: its data is longer than libvirt's strings hold ({} bytes)",
                       def.name, *name, rpc::kMaxString);
        return;
    }
    for (const auto& [outbox, callback] : to) {
        xdr::Writer w;
        w.i32(callback);
        std::vector<uint8_t> bytes = w.take();
        bytes.insert(bytes.end(), body->begin(), body->end());
        rpc::Header h{rpc::kQemuProgram, rpc::kQemuVersion, kEventNumber, rpc::Type::message, 1, rpc::ReplyStatus::ok};
        outbox->send(rpc::encode_message(h, bytes));  // a client that cannot take it is closed by its own thread
    }
}

rpc::Reply MonitorEventHub::register_callback(rpc::Caller& caller, xdr::Reader& args) {
    auto has_domain = args.boolean();
    if (!has_domain) return undecodable(kRegister);
    Callback cb;
    if (*has_domain) {
        auto name = args.string(rpc::kMaxString);
        Uuid uuid{};
        auto got = args.fixed_opaque(uuid);
        auto id = args.i32();
        if (!name || !got || !id) return undecodable(kRegister);
        cb.domain = uuid;
    }
    auto event = args.optional_string(kMaxEventPattern);
    auto flags = args.u32();
    if (!event || !flags) return undecodable(kRegister);
    if ((*flags & ~kKnownFlags) != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("{}: unsupported flags ({:#x}): only REGEX (1) and NOCASE (2)",
                                                          kRegister, *flags & ~kKnownFlags));
    }
    cb.event = *event;
    cb.nocase = (*flags & VIR_CONNECT_DOMAIN_QEMU_MONITOR_EVENT_REGISTER_NOCASE) != 0;
    if (cb.event && cb.event->find('\0') != std::string::npos) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("{}: the event name holds a NUL byte", kRegister));
    }
    if (cb.event && (*flags & VIR_CONNECT_DOMAIN_QEMU_MONITOR_EVENT_REGISTER_REGEX) != 0) {
        cb.pattern = std::make_shared<Pattern>();
        int cflags = REG_EXTENDED | REG_NOSUB | (cb.nocase ? REG_ICASE : 0);
        if (int rc = ::regcomp(&cb.pattern->re, cb.event->c_str(), cflags); rc != 0) {
            char why[256];
            ::regerror(rc, &cb.pattern->re, why, sizeof why);
            return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("failed to compile regex '{}': {}", *cb.event, why));
        }
        cb.pattern->compiled = true;
    }
    std::string what = cb.event ? "event " + *cb.event : "every event";
    int32_t id = 0;
    rpc::Reply r = callbacks_.add(caller.connection, std::move(cb), "monitor event callbacks", &id);
    if (!r.error) vmm::log::info("vmmd: connection {} registered monitor event callback {} ({})", caller.connection, id, what);
    return r;
}

rpc::Reply MonitorEventHub::deregister_callback(rpc::Caller& caller, xdr::Reader& args) {
    auto callback = args.i32();
    if (!callback) return undecodable(kDeregister);
    return callbacks_.remove(caller.connection, *callback);
}

std::vector<rpc::Procedure> MonitorEventHub::procedures() {
    std::vector<rpc::Procedure> t;
    t.emplace_back(rpc::kQemuProgram, kRegisterNumber, kRegister, rpc::Access::write,
                   [this](rpc::Caller& c, xdr::Reader& a) { return register_callback(c, a); });
    t.emplace_back(rpc::kQemuProgram, kDeregisterNumber, kDeregister, rpc::Access::write,
                   [this](rpc::Caller& c, xdr::Reader& a) { return deregister_callback(c, a); });
    return t;
}

}  // namespace vmmd
