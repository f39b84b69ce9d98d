// vmm-snapshot: what a saved guest holds, and one full save from an incremental chain.
//
//   vmm-snapshot info FILE[,offset=N]    its format, machine shape, RAM blocks, data on disk,
//                                        device state, and the chain of saves it builds on
//   vmm-snapshot merge FILE OUT          OUT: a full save equal to FILE's chain (every page of
//                                        every save checked against its sum on the way)
//
// Both go through the file transport's own reading and writing (the same checks as a restore),
// never around it. Exit status 0, 1 on a damaged or unreadable file, 2 for a bad command line.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "vmm/common/mapping.h"
#include "vmm/common/zero_page.h"
#include "vmm/migration/transport/file_ram.h"
#include "vmm/migration/transport/file_transport.h"
#include "vmm/migration/wire/file_format.h"
#include "vmm/migration/wire/uri.h"

namespace {

using namespace vmm;
using namespace vmm::migration;

int usage() {
    std::fputs("usage: vmm-snapshot info FILE[,offset=N]\n"
               "       vmm-snapshot merge FILE[,offset=N] OUT\n",
               stderr);
    return 2;
}

int failed(const Error& e) {
    std::fprintf(stderr, "vmm-snapshot: %s\n", e.message().c_str());
    return 1;
}

Result<FileHeader> header_of(const Uri& u) {
    UniqueFd fd(::open(u.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return Error::from_errno(fmt::format("opening {}", u.path));
    std::vector<uint8_t> page(kFileHeaderSize);
    ssize_t n = ::pread(fd.get(), page.data(), page.size(), static_cast<off_t>(u.offset));
    if (n < 0) return Error::from_errno(fmt::format("reading {}", u.path));
    page.resize(static_cast<size_t>(n));
    auto h = decode_file_header(page);
    if (!h) return h.error().context(u.path);
    return h;
}

// Guest RAM of the saved machine's shape, untouched until a restore writes it.
struct Ram {
    std::vector<Mapping> maps;
    std::vector<RamBlockView> views;
};

Result<Ram> ram_for(const FileHeader& h) {
    Ram r;
    for (const auto& b : h.blocks) {
        auto m = Mapping::map(b.name.c_str(), b.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
        if (!m) return m.error();
        r.views.push_back({b.name, m->data(), b.size, b.guest_addr});
        r.maps.push_back(std::move(*m));
    }
    return r;
}

int info(const std::string& uri) {
    auto u = parse_uri(uri.starts_with("file:") ? uri : "file:" + uri);
    if (!u) return failed(u.error());
    for (int depth = 0; depth < 64; ++depth) {
        auto h = header_of(*u);
        if (!h) return failed(h.error());
        uint64_t ram = 0;
        for (const auto& b : h->blocks) ram += b.size;
        struct stat st {};
        ::stat(u->path.c_str(), &st);
        std::printf("%s: a saved guest (format %u, save id %016llx): %u vCPU(s), %llu MiB of RAM, %llu KiB on disk\n",
                    u->path.c_str(), kFileVersion, static_cast<unsigned long long>(h->save_id), h->vcpu_count,
                    static_cast<unsigned long long>(ram >> 20), static_cast<unsigned long long>(st.st_blocks / 2));
        for (const auto& b : h->blocks) {
            std::printf("  block '%s': guest %#llx, %llu MiB, pages at %llu, sums at %llu\n", b.name.c_str(),
                        static_cast<unsigned long long>(b.guest_addr), static_cast<unsigned long long>(b.size >> 20),
                        static_cast<unsigned long long>(u->offset + b.ram_offset),
                        static_cast<unsigned long long>(u->offset + b.sums_offset));
        }
        std::printf("  stream: %llu bytes (device state and rounds) at %llu\n",
                    static_cast<unsigned long long>(h->stream_length),
                    static_cast<unsigned long long>(u->offset + h->stream_offset));
        if (h->base_id == 0) {
            std::printf("  a full save\n");
            return 0;
        }
        std::printf("  incremental: builds on %s (save id %016llx)\n", h->base_path.c_str(),
                    static_cast<unsigned long long>(h->base_id));
        auto next = parse_uri("file:" + h->base_path);
        if (!next) return failed(next.error());
        auto base = header_of(*next);
        if (!base) return failed(base.error().context("its base"));
        if (base->save_id != h->base_id) return failed(Error(fmt::format("{} has been saved again since: the chain is broken", h->base_path)));
        *u = *next;
    }
    return failed(Error("a chain of more than 64 saves"));
}

// The chain restored into memory by the file transport (every page checked), then written as
// one full save: data pages in place, zero pages as holes, the newest save's stream.
int merge(const std::string& from, const std::string& to) {
    auto in = parse_uri(from.starts_with("file:") ? from : "file:" + from);
    auto out = parse_uri(to.starts_with("file:") ? to : "file:" + to);
    if (!in) return failed(in.error());
    if (!out) return failed(out.error());
    auto h = header_of(*in);
    if (!h) return failed(h.error());
    auto ram = ram_for(*h);
    if (!ram) return failed(ram.error());
    auto token = stream::CancelToken::create();
    if (!token) return failed(token.error());
    auto transport = make_file_transport();
    TransportContext ctx{*in, [] { return Options{}; }, ram->views, h->vcpu_count, &*token};
    auto listener = transport->listen(ctx);
    if (!listener) return failed(listener.error());
    auto loaded = (*listener)->accept();
    if (!loaded) return failed(loaded.error());
    if (auto s = (*loaded)->dest_ram()->serve_round(0); !s) return failed(s.error());
    std::vector<uint8_t> stream(h->stream_length);
    if (auto s = (*loaded)->stream().read_exact(stream); !s) return failed(s.error());
    ctx.uri = *out;
    auto saving = transport->connect(ctx);
    if (!saving) return failed(saving.error());
    SourceRamChannel* channel = (*saving)->source_ram();
    if (auto s = channel->begin_round(0); !s) return failed(s.error());
    constexpr uint64_t kRun = 4u << 20;  // pages written at once at most
    for (uint32_t i = 0; i < ram->views.size(); ++i) {
        const RamBlockView& b = ram->views[i];
        uint64_t run = 0;  // bytes of data pages before `at` not written yet
        for (uint64_t at = 0; at <= b.size; at += kStreamPageSize) {
            bool data = at < b.size && !is_zero_page(b.host + at);  // a zero page is a hole in the merged file (its sum: the save's)
            if (data && run < kRun) {
                run += kStreamPageSize;
                continue;
            }
            if (run != 0) {
                if (auto s = channel->send(i, at - run, run); !s) return failed(s.error());
            }
            run = data ? kStreamPageSize : 0;
        }
    }
    if (auto s = channel->end_round(); !s) return failed(s.error());
    if (auto s = (*saving)->stream().write(stream); !s) return failed(s.error());
    SaveTarget* save = (*saving)->save_target();
    if (save == nullptr) return failed(Error(fmt::format("internal: {} is no file save", (*saving)->describe())));
    if (auto s = save->commit(); !s) return failed(s.error());
    std::printf("%s: a full save of %s's chain\n", out->path.c_str(), in->path.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 2 && a[0] == "info") return info(a[1]);
    if (a.size() == 3 && a[0] == "merge") return merge(a[1], a[2]);
    return usage();
}
