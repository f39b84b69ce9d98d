#include "vmm/migration/transport/file_transport.h"

#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "vmm/migration/transport/file_io.h"

namespace vmm::migration {

namespace file {

Status write_at(int fd, std::span<const uint8_t> data, uint64_t at, const std::string& what) {
    while (!data.empty()) {
        ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(at));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            return Error::from_errno(fmt::format("writing {}", what), errno,
                                     errno == ENOSPC ? "free space there, or save elsewhere" : "");
        }
        data = data.subspan(static_cast<size_t>(n));
        at += static_cast<uint64_t>(n);
    }
    return {};
}

Status read_at(int fd, std::span<uint8_t> out, uint64_t at, const std::string& what) {
    while (!out.empty()) {
        ssize_t n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(at));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error::from_errno(fmt::format("reading {}", what));
        if (n == 0) return Error(fmt::format("reading {}: the file ends {} bytes early (truncated?)", what, out.size()));
        out = out.subspan(static_cast<size_t>(n));
        at += static_cast<uint64_t>(n);
    }
    return {};
}

}  // namespace file

namespace {

class FileTransport final : public Transport {
public:
    std::string scheme() const override { return "file"; }
    bool has_peer() const override { return false; }
    std::vector<TransportSetting> settings() const override {
        return {{.name = file::kBaseParameter,
                 .help = "file: a save this vmm made last, by path: the next 'migrate file:PATH' writes only the pages "
                         "dirtied since it, and a restore reads the chain (empty = a full save)",
                 .kind = TransportSetting::Kind::text}};
    }
    Result<std::unique_ptr<Connection>> connect(const TransportContext& ctx) override { return file::open_save(ctx); }
    Result<std::unique_ptr<Listener>> listen(const TransportContext& ctx) override { return file::open_restore(ctx); }
};

}  // namespace

std::unique_ptr<Transport> make_file_transport() { return std::make_unique<FileTransport>(); }

}  // namespace vmm::migration
