#include "vmmd/domain/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "vmm/common/fd.h"

namespace vmmd {

using vmm::Error;
using vmm::Result;
using vmm::Status;
using vmm::UniqueFd;

namespace {

Status write_fully(int fd, const std::string& text, const std::string& path) {
    size_t done = 0;
    while (done < text.size()) {
        ssize_t w = ::write(fd, text.data() + done, text.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return Error::from_errno("write " + path);
        done += static_cast<size_t>(w);
    }
    return {};
}

std::string directory_of(const std::string& path) {
    size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status write_file_atomically(const std::string& path, const std::string& text) {
    std::string tmp = path + ".new";
    {
        UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        if (!fd.valid()) return Error::from_errno("create " + tmp);
        if (auto s = write_fully(fd.get(), text, tmp); !s) return s;
        if (::fsync(fd.get()) != 0) return Error::from_errno("fsync " + tmp);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) return Error::from_errno("rename " + tmp);
    std::string dir = directory_of(path);
    UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!d.valid() || ::fsync(d.get()) != 0) return Error::from_errno("fsync " + dir);
    return {};
}

Result<std::string> read_small_file(const std::string& path, size_t max_bytes) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return Error::from_errno("open " + path);
    // Read to the end rather than trust st_size: /proc files say 0.
    std::string text;
    char chunk[4096];
    for (;;) {
        ssize_t r = ::read(fd.get(), chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Error::from_errno("read " + path);
        if (r == 0) return text;
        if (text.size() + static_cast<size_t>(r) > max_bytes) {
            return Error(fmt::format("{} is larger than the {} bytes a file of vmmd's can be: not read", path, max_bytes));
        }
        text.append(chunk, static_cast<size_t>(r));
    }
}

}  // namespace vmmd
