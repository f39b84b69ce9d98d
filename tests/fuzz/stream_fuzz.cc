// libFuzzer target for everything a destination decodes from its peer: the stream header,
// records (through the real StreamLoader writing into real RAM blocks), replies, the
// vCPU-state section, a saved guest's file header and the multifd hellos. Built with clang (-fsanitize=fuzzer,address,undefined) by tests/.
#include <cstdint>
#include <vector>

#include "vmm/machine/vcpu_state.h"
#include "vmm/memory/guest_memory.h"
#include "vmm/migration/wire/file_format.h"
#include "vmm/migration/wire/multifd_wire.h"
#include "vmm/migration/precopy/ram_loader.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/stream_format.h"

using namespace vmm;

namespace {

const memory::GuestMemory& fuzz_memory() {
    static memory::GuestMemory* mem = [] {
        auto m = memory::GuestMemory::create({{"pc.ram", 0, 1 << 20, memory::HugePages::none},
                                              {"high", 4 << 20, 256 << 10, memory::HugePages::none}});
        return new memory::GuestMemory(std::move(*m));
    }();
    return *mem;
}

Status decode_state(std::span<const uint8_t> blob) {
    ByteReader r(blob, "state");
    uint32_t n = 0;
    if (auto s = r.get(n); !s) return s;
    for (uint32_t i = 0; i < n && i < 8; ++i) {
        auto v = machine::decode_vcpu_state(r);
        if (!v) return v.error();
    }
    return {};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::vector<uint8_t> rest(data + 1, data + size);
    vmm::stream::MemoryStream in(rest);
    // Bit 2 of the first byte: a verify-ram stream (PAGES_SUMMED checked by a RamVerifier).
    std::vector<migration::BlockInfo> layout;
    for (const auto& b : fuzz_memory().blocks()) layout.push_back({b->name(), b->guest_addr(), b->size()});
    migration::RamVerifier verifier(layout);
    migration::RamVerifier* verify = (data[0] & 4) != 0 ? &verifier : nullptr;
    switch (data[0] % 3) {
        case 0: {  // a whole stream: header, then records into RAM
            auto h = migration::read_header(in);
            if (!h) return 0;
            std::vector<migration::BlockInfo> blocks;
            for (const auto& b : fuzz_memory().blocks()) blocks.push_back({b->name(), b->guest_addr(), b->size()});
            if (!migration::check_compatible(*h, {h->page_size, h->vcpu_count, blocks, h->ram_mode})) return 0;
            // A resumable source's SESSION, read as the destination reads it; the rounds the
            // pages arrive in are kept and described again, as for a resumption.
            if ((h->features & migration::kFeatureResumable) != 0) {
                auto session = migration::read_record(in, blocks, 4096);
                if (!session || session->type != migration::RecordType::session) return 0;
            }
            migration::ArrivalRounds arrivals(blocks);
            migration::StreamLoader loader(fuzz_memory(), in, nullptr, blocks, decode_state, verify);
            loader.track_arrivals(&arrivals);
            (void)loader.run();
            for (const auto& message : arrivals.encode())
                if (message.size() > 17 + 4 * size_t{migration::kMaxRoundsPages}) __builtin_trap();
            return 0;
        }
        case 1: {  // records alone
            std::vector<migration::BlockInfo> blocks;
            for (const auto& b : fuzz_memory().blocks()) blocks.push_back({b->name(), b->guest_addr(), b->size()});
            migration::StreamLoader loader(fuzz_memory(), in, nullptr, blocks, decode_state, verify);
            (void)loader.run();
            return 0;
        }
        default:  // replies, a state section, a saved guest's header, and a multifd preface or lane hello
            (void)migration::read_reply(in);
            (void)decode_state(rest);
            (void)migration::decode_file_header(rest);
            if (rest.size() >= migration::kHelloSize) {
                (void)migration::decode_hello(std::span<const uint8_t, migration::kHelloSize>(rest.data(), migration::kHelloSize));
            }
            return 0;
    }
}
