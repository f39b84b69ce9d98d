// The vmm command line: an optional --config FILE, then overrides for the common cases.
#pragma once

#include <string>

#include "vmm/common/result.h"
#include "vmm/config/config.h"

namespace vmm::config {

struct CommandLine {
    Config config;
    bool exit_now = false;  // --help or --version: print `text` and exit 0
    std::string text;
    bool verbose = false;
};

// Never throws; a bad option is one line naming it and what was expected.
Result<CommandLine> parse_command_line(int argc, const char* const* argv);

}  // namespace vmm::config
