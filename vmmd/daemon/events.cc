#include "vmmd/daemon/events.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vmm/common/log.h"
#include "vmmd/domain/domain_args.h"

namespace vmmd {

using rpc::Proc;

void EventHub::connected(uint64_t connection, std::shared_ptr<Outbox> outbox) { callbacks_.connected(connection, std::move(outbox)); }

void EventHub::disconnected(uint64_t connection) { callbacks_.disconnected(connection); }

void EventHub::send(int32_t event_id, const Uuid& domain, Proc proc, const std::vector<uint8_t>& body) {
    auto to = callbacks_.targets([&](const Callback& cb) { return cb.event_id == event_id && (!cb.domain || *cb.domain == domain); });
    for (const auto& [outbox, callback] : to) {
        xdr::Writer w;
        w.i32(callback);
        std::vector<uint8_t> bytes = w.bytes();
        bytes.insert(bytes.end(), body.begin(), body.end());
        rpc::Header h{rpc::kRemoteProgram, rpc::kRemoteVersion, rpc::number_of(proc), rpc::Type::message, 1, rpc::ReplyStatus::ok};
        outbox->send(rpc::encode_message(h, bytes));  // a client that cannot take it is closed by its own thread
    }
}

void EventHub::lifecycle(const DomainDef& def, int id, LifecycleEvent e) {
    xdr::Writer w;  // remote_domain_event_callback_lifecycle_msg, after the callback's id
    put_domain(w, DomainView{def, true, false, e.event == VIR_DOMAIN_EVENT_STOPPED ? -1 : id, {}});
    w.i32(e.event);
    w.i32(e.detail);
    send(VIR_DOMAIN_EVENT_ID_LIFECYCLE, def.uuid, Proc::DOMAIN_EVENT_CALLBACK_LIFECYCLE, w.bytes());
}

void EventHub::migration_iteration(const DomainDef& def, int id, int iteration) {
    xdr::Writer w;  // remote_domain_event_callback_migration_iteration_msg, after the callback's id
    put_domain(w, DomainView{def, true, false, id, {}});
    w.i32(iteration);
    send(VIR_DOMAIN_EVENT_ID_MIGRATION_ITERATION, def.uuid, Proc::DOMAIN_EVENT_CALLBACK_MIGRATION_ITERATION, w.bytes());
}

void EventHub::job_completed(const DomainDef& def, int id, const std::vector<rpc::TypedParam>& stats) {
    xdr::Writer w;  // remote_domain_event_callback_job_completed_msg, after the callback's id
    put_domain(w, DomainView{def, true, false, id, {}});
    rpc::encode_typed_params(w, stats);
    send(VIR_DOMAIN_EVENT_ID_JOB_COMPLETED, def.uuid, Proc::DOMAIN_EVENT_CALLBACK_JOB_COMPLETED, w.bytes());
}

rpc::Reply EventHub::register_any(rpc::Caller& caller, xdr::Reader& args) {
    auto event_id = args.i32();
    auto has_domain = args.boolean();
    if (!event_id || !has_domain) return undecodable("CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY");
    Callback cb;
    cb.event_id = *event_id;
    if (*has_domain) {
        auto name = args.string(rpc::kMaxString);
        Uuid uuid{};
        auto got = args.fixed_opaque(uuid);
        auto id = args.i32();
        if (!name || !got || !id) return undecodable("CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY");
        cb.domain = uuid;
    }
    if (*event_id < 0 || *event_id > VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE) {  // the last one this libvirt knows
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("unsupported event ID {}", *event_id));
    }
    int32_t id = 0;
    rpc::Reply r = callbacks_.add(caller.connection, cb, "event callbacks", &id);
    if (!r.error) vmm::log::info("vmmd: connection {} registered event callback {} (event {})", caller.connection, id, *event_id);
    return r;
}

rpc::Reply EventHub::deregister_any(rpc::Caller& caller, xdr::Reader& args) {
    auto callback = args.i32();
    if (!callback) return undecodable("CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY");
    return callbacks_.remove(caller.connection, *callback);
}

std::vector<rpc::Procedure> EventHub::procedures() {
    // Read-only connections may watch, as libvirt's own daemon allows.
    return {
        {Proc::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY, rpc::Access::read_only,
         [this](rpc::Caller& c, xdr::Reader& a) { return register_any(c, a); }},
        {Proc::CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY, rpc::Access::read_only,
         [this](rpc::Caller& c, xdr::Reader& a) { return deregister_any(c, a); }},
    };
}

}  // namespace vmmd
