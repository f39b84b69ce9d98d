// vmm-memwatch: the largest resident memory a process holds beyond its guest RAM, sampled
// while the benchmarks migrate. It sums Rss over every mapping in /proc/PID/smaps except those
// whose size is exactly the guest RAM's (the RAM block), and writes the maximum seen to OUTFILE
// each time it grows. It runs until PID exits or it is killed.
//   vmm-memwatch PID RAM_KIB OUTFILE [INTERVAL_MS]     (INTERVAL_MS: 50 by default)
// One process reading smaps in a loop: a shell loop forking awk and sleep 20 times a second
// took about a third of a core here, which the migration being measured then lacked.
#include <signal.h>
#include <sys/types.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

namespace {

bool parse_u64(std::string_view s, uint64_t& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

// The number of kB in a line "Name:   1234 kB".
uint64_t kib_field(std::string_view line) {
    size_t at = line.find_first_of("0123456789");
    if (at == std::string_view::npos) return 0;
    uint64_t v = 0;
    std::from_chars(line.data() + at, line.data() + line.size(), v);
    return v;
}

// Resident KiB outside the guest RAM mapping(s), or nothing when smaps cannot be read (gone).
bool overhead_kib(const std::string& smaps, uint64_t ram_kib, uint64_t& out) {
    std::ifstream in(smaps);
    if (!in) return false;
    uint64_t sum = 0;
    bool skip = false;
    for (std::string line; std::getline(in, line);) {
        std::string_view l(line);
        if (l.starts_with("Size:")) {
            skip = kib_field(l) == ram_kib;
        } else if (l.starts_with("Rss:") && !skip) {
            sum += kib_field(l);
        }
    }
    out = sum;
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    uint64_t pid = 0, ram_kib = 0, interval_ms = 50;
    if ((argc != 4 && argc != 5) || !parse_u64(argv[1], pid) || !parse_u64(argv[2], ram_kib) ||
        (argc == 5 && (!parse_u64(argv[4], interval_ms) || interval_ms == 0))) {
        std::fprintf(stderr, "usage: vmm-memwatch PID RAM_KIB OUTFILE [INTERVAL_MS]\n");
        return 2;
    }
    const std::string smaps = "/proc/" + std::to_string(pid) + "/smaps";
    uint64_t max = 0;
    for (uint64_t v = 0; ::kill(static_cast<pid_t>(pid), 0) == 0 && overhead_kib(smaps, ram_kib, v);) {
        if (v > max) {
            max = v;
            std::ofstream(argv[3], std::ios::trunc) << max << '\n';
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    }
    return 0;
}
