// The plugin's pulling ops (plugin_pull.h).
#include "plugin_pull.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "abi_guard.h"
#include "pull_client.h"
#include "pull_server.h"

namespace rdma_migrate::pull_abi {

namespace {

Timeouts timeouts_of(const vmm_transport_args* a) {
    Timeouts t;
    if (a->connect_timeout_ms != 0) t.connect_ms = static_cast<int>(a->connect_timeout_ms);
    if (a->io_timeout_ms != 0) t.io_ms = static_cast<int>(a->io_timeout_ms);
    return t;
}

// Pulling has no authentication yet: a set tls-creds is refused, never ignored.
vmm::Status no_tls(const vmm_transport_args* a) {
    bool has = a->struct_size >= offsetof(vmm_transport_args, tls_creds) + sizeof a->tls_creds;
    if (has && a->tls_creds != nullptr && *a->tls_creds != '\0') {
        return vmm::Error("rdma-pull does not authenticate its peers yet: unset tls-creds to serve or pull (the pages "
                          "are still checked against the save's sums)");
    }
    return {};
}

}  // namespace

void* serve(const vmm_transport_args* a, const void* base, uint64_t length, vmm_err* e) {
    void* out = nullptr;
    guarded(e, [&]() -> vmm::Status {
        if (auto s = no_tls(a); !s) return s;
        auto server = PullServer::start(a->host != nullptr ? a->host : "", a->port, base, length, timeouts_of(a));
        if (!server) return server.error();
        out = server->release();
        return {};
    });
    return out;
}

uint32_t serve_clients(void* server, vmm_pull_client* out, uint32_t max) noexcept {
    try {
        auto clients = static_cast<PullServer*>(server)->clients();
        for (uint32_t i = 0; i < std::min<size_t>(max, clients.size()); ++i) {
            const auto& c = clients[i];
            vmm_pull_client& o = out[i];
            o = vmm_pull_client{};
            std::snprintf(o.peer, sizeof o.peer, "%s", c.peer.c_str());
            o.pulled = c.pulled;
            o.ms = c.ms;
            o.state = c.state == PullServer::Client::State::done   ? VMM_PULL_DONE
                      : c.state == PullServer::Client::State::gone ? VMM_PULL_GONE
                                                                   : VMM_PULL_CONNECTED;
            std::snprintf(o.why, sizeof o.why, "%s", c.why.c_str());
        }
        return static_cast<uint32_t>(clients.size());
    } catch (...) {
        return 0;
    }
}

void serve_stop(void* server) noexcept { delete static_cast<PullServer*>(server); }

void* pull_open(const vmm_transport_args* a, uint64_t* length, vmm_err* e) {
    void* out = nullptr;
    guarded(e, [&]() -> vmm::Status {
        if (auto s = no_tls(a); !s) return s;
        auto c = PullClient::open(a->host != nullptr ? a->host : "", a->port, a->cancel_fd, timeouts_of(a));
        if (!c) return c.error();
        *length = (*c)->length();
        out = c->release();
        return {};
    });
    return out;
}

int pull_read(void* pull, void* into, uint64_t length, uint64_t at, vmm_err* e) {
    return guarded(e, [&] { return static_cast<PullClient*>(pull)->read(into, length, at); });
}

void pull_close(void* pull) noexcept {
    try {
        delete static_cast<PullClient*>(pull);
    } catch (...) {
    }
}

}  // namespace rdma_migrate::pull_abi
