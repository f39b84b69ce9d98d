// A vmm domain as libvirt describes one (<domain type='vmm'>, docs/libvirt.md "Domain XML"):
// what vmmd keeps, turns into a vmm command line, and gives back as normalized XML.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vmmd {

using Uuid = std::array<uint8_t, 16>;

// An element of <metadata> in another application's namespace: kept whole, as given.
struct ForeignMetadata {
    std::string uri;  // its namespace
    std::string xml;  // the element, its namespace declared on it
    bool operator==(const ForeignMetadata&) const = default;
};

// When a migration must end (vmm's x-deadline, x-deadline-strategy, x-stall-timeout): unset
// parts come from elsewhere (vmmd/migration/deadline_settings.h).
struct MigrationDeadline {
    std::optional<std::string> deadline;  // "5m", "90s", "off": as vmm takes it
    std::optional<std::string> strategy;  // cancel, postcopy, downtime, throttle, dirty-limit
    std::optional<uint64_t> stall_timeout_ms;
    bool operator==(const MigrationDeadline&) const = default;
};
// Why `strategy` is not a list vmm takes: names it knows, in the order to try them, each once and
// cancel only last (nullopt: it is, or none is given).
std::optional<std::string> deadline_strategy_refusal(const std::optional<std::string>& strategy);

struct DomainDef {
    std::string name;
    Uuid uuid{};
    uint64_t memory_kib = 0;          // <memory>; <currentMemory> must equal it (no balloon)
    uint32_t vcpus = 1;               // <vcpu>
    std::string kernel;               // <os><kernel>: a payload name (idle, stress, pattern) or an ELF path
    std::string cmdline;              // <os><cmdline>: the payload's parameters
    std::optional<uint64_t> hard_limit_kib;  // <memtune><hard_limit>: RLIMIT_MEMLOCK for RDMA
    std::string on_poweroff = "destroy";
    std::string on_crash = "destroy";
    std::optional<std::string> serial_file;  // <serial type='file'><source path=…/>; none without one
    std::optional<std::string> emulator;     // <devices><emulator>: vmmd's own vmm, checked where a client gives it
    bool clock_utc = false;                  // <clock offset='utc'/> given (the guest's clock is UTC anyway)
    // <graphics>, <video> and <input> (what virt-install and virt-manager add by default on x86),
    // each element as given: kept and given back, not honoured, as vmm has no display.
    struct DisplayDevice {
        std::string xml;    // the element as given
        std::string label;  // "<graphics type='vnc'>", as the log names it
        bool operator==(const DisplayDevice&) const = default;
    };
    std::vector<DisplayDevice> display_devices;
    // <metadata><vmm:vmm xmlns:vmm="…">: what only vmm has.
    std::string dirty_tracking = "log";  // log or ring
    bool prealloc = false;
    MigrationDeadline migration;  // <vmm:migration-deadline>, -deadline-strategy, -stall-timeout
    std::optional<std::string> title, description;  // kept as given, change nothing
    std::vector<ForeignMetadata> metadata;           // others' elements of <metadata>, in order
    bool operator==(const DomainDef&) const = default;
};

// "<graphics type='vnc'>, <video>": the display devices `d` keeps but vmm does not honour, by name
// and type; empty when it has none.
std::string display_devices_named(const DomainDef& d);

std::string format_uuid(const Uuid& u);                  // 8-4-4-4-12 hex
std::optional<Uuid> parse_uuid(const std::string& text);  // with or without dashes

}  // namespace vmmd
