// ChannelSet: one side's RDMA channels of a migration. Channel 0 carries the control channel
// and owns the protection domain; with rdma-channels, channels 1..N-1 share its PD (one rkey
// serves them all), and with postcopy a channel of its own (kCapPostcopy) does too.
#pragma once

#include <memory>
#include <vector>

#include "endpoint.h"

namespace rdma_migrate {

class ChannelSet {
public:
    explicit ChannelSet(std::unique_ptr<Endpoint> first) : first_(std::move(first)) {}
    ~ChannelSet() { hang_up(); }
    ChannelSet(const ChannelSet&) = delete;
    ChannelSet& operator=(const ChannelSet&) = delete;

    Endpoint& first() const { return *first_; }
    void add(std::unique_ptr<Endpoint> ep) { extra_.push_back(std::move(ep)); }
    size_t count() const { return 1 + extra_.size(); }  // lanes: without the postcopy channel
    Endpoint& set_postcopy(std::unique_ptr<Endpoint> ep);
    bool has_postcopy() const { return postcopy_ != nullptr; }
    // What a second queue pair on this side would need to write into its RAM (the hostile-peer
    // tests play one): the protection domain.
    ibv_pd* protection_domain() const { return first_->protection_domain(); }
    // "destination" or "source", for traces.
    const char* side() const { return first_->listen_id ? "destination" : "source"; }

    // Breaks every channel's connection (rdma_disconnect): each side's queue pairs go to the
    // error state and flush, so every wait at both ends fails. The QPs stay until hang_up, so
    // a thread inside a call on them is safe.
    void cut();
    // Whether any channel's link was lost (Endpoint::link_lost).
    bool link_lost() const;
    // Stops all DMA on every channel (disconnect, destroy the QPs), so buffers and MRs may go.
    void hang_up();

private:
    std::vector<Endpoint*> all() const;  // first_ first

    std::unique_ptr<Endpoint> first_;               // first: destroyed last, after every MR
    std::vector<std::unique_ptr<Endpoint>> extra_;  // channels 1..N-1 (on first_'s PD)
    std::unique_ptr<Endpoint> postcopy_;            // kCapPostcopy: the postcopy channel (on first_'s PD)
};

}  // namespace rdma_migrate
