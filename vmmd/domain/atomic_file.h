// Files vmmd keeps (definitions, the records of running domains) are replaced whole: a
// temporary file beside the target, fsync, rename over it, fsync of the directory. A crash leaves
// the old file or the new one, never half of either.
#pragma once

#include <string>

#include "vmm/common/result.h"

namespace vmmd {

// Writes `text` to `path` (mode 0600) as above.
vmm::Status write_file_atomically(const std::string& path, const std::string& text);

// The whole of a file vmmd wrote (at most `max_bytes`: a larger one is refused, not read).
vmm::Result<std::string> read_small_file(const std::string& path, size_t max_bytes = 1 << 20);

}  // namespace vmmd
