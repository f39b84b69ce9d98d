// FileServing (file_serving.h).
#include "vmm/migration/session/file_serving.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "vmm/common/log.h"
#include "vmm/migration/transport/file_io.h"
#include "vmm/migration/wire/file_format.h"
#include "vmm/migration/wire/uri.h"

namespace vmm::migration {

namespace {

// The file's header, checked: a save of this format, whole, and a full one (a clone has no
// base to read the rest from). Returns the bytes the save spans.
Result<uint64_t> check_saved(int fd, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return Error::from_errno("file:" + path);
    if (!S_ISREG(st.st_mode)) return Error(fmt::format("file:{} is not a regular file", path));
    auto size = static_cast<uint64_t>(st.st_size);
    if (size < kFileHeaderSize) return Error(fmt::format("file:{}: {} bytes, too short to be a saved guest", path, size));
    std::vector<uint8_t> page(kFileHeaderSize);
    if (auto s = file::read_at(fd, page, 0, "file:" + path); !s) return s.error();
    auto h = decode_file_header(page);
    if (!h) return h.error().context("file:" + path);
    if (size < file_end(*h)) {
        return Error(fmt::format("file:{} is truncated: it has {} bytes, the save needs {}", path, size, file_end(*h)));
    }
    if (h->base_id != 0) {
        return Error(fmt::format("file:{} is an incremental save (it builds on {}): serve a full one (vmm-snapshot merge "
                                 "makes one)",
                                 path, h->base_path));
    }
    return file_end(*h);
}

}  // namespace

Result<std::unique_ptr<FileServing>> FileServing::start(TransportRegistry& registry, const std::string& path,
                                                        const std::string& uri, std::function<Options()> options) {
    auto parsed = parse_uri(uri);
    if (!parsed) return parsed.error();
    auto transport = registry.get(parsed->scheme);
    if (!transport) return transport.error();
    if (!(*transport)->pulls()) {
        return Error(fmt::format("'{}:' cannot serve a saved guest for pulling (rdma can: x-pull-serve FILE "
                                 "rdma:HOST:PORT)",
                                 parsed->scheme));
    }
    auto cancel = stream::CancelToken::create();
    if (!cancel) return cancel.error();
    std::unique_ptr<FileServing> s(new FileServing(std::move(*cancel)));
    s->path_ = path;
    s->uri_ = uri;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return Error::from_errno(fmt::format("opening file:{}", path));
    auto size = check_saved(fd.get(), path);
    if (!size) return size.error();
    // Read into memory of its own rather than mapped: what is served cannot change under the
    // clones whatever happens to the file, and the adapter can pin it whatever the file system
    // (a file on 9p or FUSE cannot be pinned).
    auto map = Mapping::map("the served save", *size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    if (!map) return map.error().context("file:" + path);
    if (auto r = file::read_at(fd.get(), {map->data(), map->size()}, 0, "file:" + path); !r) return r.error();
    if (::mprotect(map->data(), map->size(), PROT_READ) != 0) return Error::from_errno("mprotect (the served save)");
    s->map_ = std::move(*map);
    TransportContext ctx;
    ctx.uri = *parsed;
    ctx.options = std::move(options);
    ctx.cancel = &s->cancel_;
    auto server = (*transport)->serve(ctx, s->map_.data(), s->map_.size());
    if (!server) return server.error();
    s->server_ = std::move(*server);
    log::info("serving file:{} ({} bytes) for clones to pull: vmm --incoming {}-pull:{}", path, *size, parsed->scheme,
              parsed->text.substr(parsed->scheme.size() + 1));
    return s;
}

FileServing::~FileServing() {
    cancel_.cancel();
    server_.reset();  // its threads end and its clients are cut before the mapping goes
}

}  // namespace vmm::migration
