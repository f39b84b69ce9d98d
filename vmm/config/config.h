// Config: what one vmm process runs, from a TOML file (configs/*.toml) and command-line
// overrides. Every error names the file, line and column and what was expected.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/memory/dirty_tracker.h"
#include "vmm/memory/ram_block.h"

namespace vmm::config {

// "stdio", "unix:PATH" or "none".
// "none", "stdio" or "unix:PATH[,mode=0660]": a unix socket gets `mode` (octal) whatever the
// umask; owner-only by default, since whoever connects drives the VM.
struct Endpoint {
    enum class Kind { none, stdio, unix_socket };
    Kind kind = Kind::none;
    std::string path;
    uint32_t mode = 0600;
    bool operator==(const Endpoint&) const = default;
};
Result<Endpoint> parse_endpoint(std::string_view text, bool allow_stdio);
std::string to_string(const Endpoint& e);

// "stdout", "file:PATH" or "none".
struct SerialOutput {
    enum class Kind { none, stdout_stream, file };
    Kind kind = Kind::stdout_stream;
    std::string path;
};
Result<SerialOutput> parse_serial_output(std::string_view text);

// A migration setting from the config file's [migration] table, applied as if typed at the
// monitor (migrate_set_capability / migrate_set_parameter): its name and value are checked
// against the one settings table then (migration/session/params.h, transports' rows included),
// and a bad one is reported at `where`, the file and line it was written on.
struct MigrationSetting {
    std::string name;
    std::string value;  // capabilities: "on" or "off"
    bool capability = false;
    std::string where;  // "vmm.toml:12:1"
};

struct MigrationDefaults {
    std::vector<MigrationSetting> settings;  // in the order the file gives them
};

struct Config {
    std::string source = "defaults";  // the file it came from, for messages
    std::string name = "vmm";
    uint32_t vcpus = 1;
    std::vector<memory::RamBlockSpec> ram;  // empty: one 256 MiB block "pc.ram" at 0
    memory::DirtyBackend dirty_tracking = memory::DirtyBackend::log;
    std::string payload = "idle";           // name (built by the project) or path
    std::string payload_params;             // "key=value key=value"
    uint64_t prefill = 0;                   // bytes of RAM the VMM fills with random data before boot (benchmarks)
    SerialOutput serial;
    Endpoint hmp;                           // text monitor
    Endpoint qmp;                           // JSON monitor
    bool start_paused = false;
    std::string incoming;                   // --incoming URI: wait for a migration instead of booting
    MigrationDefaults migration;
};

constexpr uint64_t kDefaultRam = 256ull << 20;

// Parses TOML text; `source` names it in errors.
Result<Config> parse_config(std::string_view text, const std::string& source);
Result<Config> load_config_file(const std::string& path);

// The RAM layout after defaults: `ram` if given, else one block of kDefaultRam.
std::vector<memory::RamBlockSpec> effective_ram(const Config& c);

// "key=value key=value": keys [a-z0-9_], values without spaces.
Status validate_payload_params(std::string_view params);

}  // namespace vmm::config
