// The plugin's pulling ops (plugin_abi.h: serve, serve_clients, serve_stop, pull_open,
// pull_read, pull_close) over PullServer and PullClient.
#pragma once

#include <cstdint>

#include "vmm/plugin_abi.h"

namespace rdma_migrate::pull_abi {

void* serve(const vmm_transport_args* a, const void* base, uint64_t length, vmm_err* e);
uint32_t serve_clients(void* server, vmm_pull_client* out, uint32_t max) noexcept;
void serve_stop(void* server) noexcept;
void* pull_open(const vmm_transport_args* a, uint64_t* length, vmm_err* e);
int pull_read(void* pull, void* into, uint64_t length, uint64_t at, vmm_err* e);
void pull_close(void* pull) noexcept;

}  // namespace rdma_migrate::pull_abi
