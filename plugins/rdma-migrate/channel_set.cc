#include "channel_set.h"

namespace rdma_migrate {

Endpoint& ChannelSet::set_postcopy(std::unique_ptr<Endpoint> ep) {
    postcopy_ = std::move(ep);
    return *postcopy_;
}

void ChannelSet::hang_up() {
    for (Endpoint* e : all()) e->hang_up();
}

void ChannelSet::cut() {
    // As a failed network would: the waits that fail now are the link's. Said before the
    // disconnect, whose flush the migration's thread may see at once: otherwise it could take
    // the flush for the peer's fault and end the migration instead of pausing it.
    for (Endpoint* e : all()) {
        e->link_lost = true;
        if (e->id) (void)rdma_disconnect(e->id.get());
    }
}

bool ChannelSet::link_lost() const {
    for (Endpoint* e : all())
        if (e->link_lost) return true;
    return false;
}

std::vector<Endpoint*> ChannelSet::all() const {
    std::vector<Endpoint*> out{first_.get()};
    for (const auto& e : extra_) out.push_back(e.get());
    if (postcopy_) out.push_back(postcopy_.get());
    return out;
}

}  // namespace rdma_migrate
