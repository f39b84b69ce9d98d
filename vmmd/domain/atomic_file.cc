#include "vmmd/domain/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
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

namespace {

Result<std::string> read_all(const UniqueFd& fd, const std::string& path, size_t max_bytes) {
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

}  // namespace

Result<std::string> read_small_file(const std::string& path, size_t max_bytes) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return Error::from_errno("open " + path);
    return read_all(fd, path, max_bytes);
}

Result<std::string> read_own_file(const std::string& path, size_t max_bytes) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd.valid()) return Error::from_errno("open " + path + " (a symbolic link is not followed)");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Error::from_errno("stat " + path);
    if (!S_ISREG(st.st_mode)) return Error(fmt::format("{} is not a regular file: not read", path));
    if (st.st_uid != ::geteuid()) {
        return Error(fmt::format("{} belongs to uid {}, not to vmmd's user (uid {}): not read", path, st.st_uid, ::geteuid()));
    }
    if ((st.st_mode & 022) != 0) {
        return Error(fmt::format("{} can be written by {} (mode {:04o}): not read; 'chmod go-w' it once you know its "
                                 "content is yours",
                                 path, (st.st_mode & 002) != 0 ? "anyone" : "its group", st.st_mode & 07777));
    }
    return read_all(fd, path, max_bytes);
}

Status make_directories(const std::string& dir, mode_t mode) {
    if (dir.empty()) return Error("make a directory: no path");
    for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
        std::string part = dir.substr(0, end);
        if (::mkdir(part.c_str(), mode) == 0) {
            if (::chmod(part.c_str(), mode) != 0) return Error::from_errno("chmod " + part);  // past the umask
        } else if (errno != EEXIST) {
            return Error::from_errno("create " + part);
        }
        if (end == std::string::npos) return {};
    }
}

Status make_private_directory(const std::string& dir) {
    if (auto s = make_directories(dir, 0700); !s) return s;
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return Error::from_errno("open the directory " + dir + " (a symbolic link is not followed)");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Error::from_errno("stat " + dir);
    if (st.st_uid != ::geteuid()) {
        return Error(fmt::format("{} belongs to uid {}, not to vmmd's user (uid {}): refused; give it to uid {} or "
                                 "choose another --state-dir",
                                 dir, st.st_uid, ::geteuid(), ::geteuid()));
    }
    if ((st.st_mode & 07777) != 0700 && ::fchmod(fd.get(), 0700) != 0) return Error::from_errno("chmod 0700 " + dir);
    return {};
}

}  // namespace vmmd
