// Files vmmd keeps (definitions, the records of running domains) are replaced whole: a
// temporary file beside the target, fsync, rename over it, fsync of the directory. A crash leaves
// the old file or the new one, never half of either. They live in directories only vmmd's user
// can enter, made so whatever the umask, and a file read back at start-up must be that user's and
// writable by nobody else: vmmd runs what a definition names, so a file another user could plant
// or change would hand them what vmmd can do.
#pragma once

#include <sys/types.h>

#include <string>

#include "vmm/common/result.h"

namespace vmmd {

// Writes `text` to `path` (mode 0600) as above.
vmm::Status write_file_atomically(const std::string& path, const std::string& text);

// The whole of a file (at most `max_bytes`: a larger one is refused, not read).
vmm::Result<std::string> read_small_file(const std::string& path, size_t max_bytes = 1 << 20);
// The same for a file vmmd wrote and now trusts: refused unless it is a regular file (not a
// symbolic link) owned by vmmd's effective user and not writable by group or others.
vmm::Result<std::string> read_own_file(const std::string& path, size_t max_bytes = 1 << 20);

// Makes `dir` and any missing parent, each with `mode` whatever the umask; existing ones are
// left as they are.
vmm::Status make_directories(const std::string& dir, mode_t mode);
// A directory only vmmd's user may use: made as above with 0700, or an existing one that must
// be a directory owned by that user (else refused, naming the owner) and is set to 0700.
vmm::Status make_private_directory(const std::string& dir);

}  // namespace vmmd
