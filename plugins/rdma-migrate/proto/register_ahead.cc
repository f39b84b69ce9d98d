#include "register_ahead.h"

#include <algorithm>

#include "wire.h"

namespace rdma_migrate {

RegisterAhead::RegisterAhead(size_t group) : group_(std::clamp<size_t>(group, 1, kMaxRepeat)) {}

void RegisterAhead::add(uint32_t block, const std::vector<Piece>& pieces, const Registered& registered) {
    for (const Piece& p : pieces) {
        queue_.push_back({block, p});
        ChunkKey k{block, p.chunk};
        if (!registered(k) && wanted_.insert(k).second) unasked_.push_back(k);
    }
}

std::vector<ChunkKey> RegisterAhead::take_ask() {
    size_t n = std::min(group_, unasked_.size());
    std::vector<ChunkKey> ask(unasked_.begin(), unasked_.begin() + static_cast<long>(n));
    unasked_.erase(unasked_.begin(), unasked_.begin() + static_cast<long>(n));
    return ask;
}

std::vector<QueuedPiece> RegisterAhead::take_ready(const Registered& registered) {
    std::vector<QueuedPiece> ready;
    while (!queue_.empty()) {
        ChunkKey k{queue_.front().block, queue_.front().piece.chunk};
        if (!registered(k)) break;
        wanted_.erase(k);
        ready.push_back(queue_.front());
        queue_.pop_front();
    }
    return ready;
}

}  // namespace rdma_migrate
