// RegistrationCache: which chunks are registered (pinned) right now, in least-recently-used
// order, under a byte limit (rdma-pin-limit; spec TODO 1 and 4, seed 003). When a chunk must be
// registered over the limit, the least recently used registrations are released first.
// `Handle` is whatever keeps one registration alive (an MR owner in the plugin, an int in tests).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "wire.h"

namespace rdma_migrate {

struct ChunkKey {
    uint32_t block = 0;
    uint64_t chunk = 0;
    auto operator<=>(const ChunkKey&) const = default;
};

template <typename Handle>
class RegistrationCache {
public:
    explicit RegistrationCache(uint64_t limit_bytes) : limit_(limit_bytes) {}

    uint64_t limit() const { return limit_; }
    uint64_t used() const { return used_; }
    size_t size() const { return index_.size(); }

    // The registration of `k`, marked most recently used; null if none.
    Handle* find(const ChunkKey& k) {
        auto it = index_.find(k);
        if (it == index_.end()) return nullptr;
        lru_.splice(lru_.end(), lru_, it->second);
        return &it->second->handle;
    }

    bool contains(const ChunkKey& k) const { return index_.count(k) != 0; }

    // What must be released (oldest first) so `bytes` more fit under the limit.
    Result<std::vector<ChunkKey>> victims_for(uint64_t bytes) const {
        if (limit_ == 0) return std::vector<ChunkKey>{};
        if (bytes > limit_) {
            return Error(fmt::format("a registration of {} bytes exceeds rdma-pin-limit {}: raise the limit or lower "
                                     "x-rdma-chunk-size",
                                     bytes, limit_));
        }
        std::vector<ChunkKey> out;
        uint64_t freed = 0;
        for (auto it = lru_.begin(); it != lru_.end() && used_ - freed + bytes > limit_; ++it) {
            out.push_back(it->key);
            freed += it->bytes;
        }
        return out;
    }

    // Adds a registration as the most recently used (replacing one for the same key).
    void insert(const ChunkKey& k, uint64_t bytes, Handle h) {
        erase(k);
        lru_.push_back(Entry{k, bytes, std::move(h)});
        index_[k] = std::prev(lru_.end());
        used_ += bytes;
    }

    std::optional<Handle> erase(const ChunkKey& k) {
        auto it = index_.find(k);
        if (it == index_.end()) return std::nullopt;
        Handle h = std::move(it->second->handle);
        used_ -= it->second->bytes;
        lru_.erase(it->second);
        index_.erase(it);
        return h;
    }

    // Releases everything (end of migration, or abort).
    void clear() {
        index_.clear();
        lru_.clear();
        used_ = 0;
    }

private:
    struct Entry {
        ChunkKey key;
        uint64_t bytes;
        Handle handle;
    };
    uint64_t limit_;
    uint64_t used_ = 0;
    std::list<Entry> lru_;  // front = least recently used
    std::map<ChunkKey, typename std::list<Entry>::iterator> index_;
};

}  // namespace rdma_migrate
