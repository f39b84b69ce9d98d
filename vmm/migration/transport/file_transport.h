// The file transport (file:PATH[,offset=N]): `migrate file:PATH` saves a running guest live
// into a file laid out as wire/file_format.h says (RAM page for page, each page's slot, the
// stream), and `--incoming file:PATH` restores it. The source's rounds write dirtied pages over
// their earlier copies (file_save.cc); the save is written under a temporary name in the same
// directory, synced, its header written last, and only then renamed to PATH, so that a failed or
// interrupted save never leaves a file that looks whole. The destination checks the header, the
// machine's shape and every page's slot as it reads (file_restore.cc).
#pragma once

#include <memory>

#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

std::unique_ptr<Transport> make_file_transport();

}  // namespace vmm::migration
