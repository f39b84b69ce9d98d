// Writes a few valid inputs for stream_fuzz into the directory given as argv[1], so the fuzzer
// starts from streams that get past the header.
#include <fstream>
#include <string>
#include <vector>

#include "vmm/machine/vcpu_state.h"
#include "vmm/migration/stream_format.h"

using namespace vmm::migration;

static void write(const std::string& path, uint8_t mode, const std::vector<uint8_t>& body) {
    std::ofstream f(path, std::ios::binary);
    f.put(static_cast<char>(mode));
    f.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size()));
}

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    std::string dir = argv[1];
    StreamHeader h;
    h.vcpu_count = 1;
    h.blocks = {{"pc.ram", 0, 1 << 20}, {"high", 4 << 20, 256 << 10}};
    std::vector<uint8_t> s = encode_header(h);
    auto add = [&s](const std::vector<uint8_t>& b) { s.insert(s.end(), b.begin(), b.end()); };
    add(encode_record({RecordType::round_begin, 0, 0, 0, 0}));
    add(encode_record({RecordType::pages, 0, 4096, 4096, 0}));
    s.insert(s.end(), 4096, 0xab);
    add(encode_record({RecordType::zero, 1, 0, 8192, 0}));
    add(encode_record({RecordType::round_end, 0, 0, 0, 0}));
    vmm::ByteWriter state;
    state.put(uint32_t{1});
    vmm::machine::VcpuState v;
    v.xsave.assign(4096, 0);
    v.msrs = {{0x10, 0, 1}};
    vmm::machine::encode_vcpu_state(state, v);
    add(encode_record({RecordType::state, 0, 0, state.bytes().size(), 0}));
    add(state.bytes());
    add(encode_record({RecordType::end, 0, 0, 0, 0}));
    write(dir + "/stream", 0, s);
    write(dir + "/records", 1, std::vector<uint8_t>(s.begin() + static_cast<long>(encode_header(h).size()), s.end()));
    write(dir + "/reply", 2, encode_reply(ReplyType::refused, "because"));
    write(dir + "/state", 2, state.bytes());
    return 0;
}
