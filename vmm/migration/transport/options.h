// The values a migration runs with: capabilities and parameters, with QEMU's names where QEMU
// has them (their names and parsing are params.h, above the engine). Transports read them
// through TransportContext; the engine takes a copy when a migration starts.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace vmm::migration {

struct Capabilities {
    bool auto_converge = false;
    bool zero_blocks = true;  // zero pages travel as markers; off sends them as data
    bool events = true;       // MIGRATION events on the JSON monitor
    bool zero_copy_send = true;  // tcp/unix: guest RAM spliced into the socket, not copied (to a remote peer)
    bool zero_copy_local = false;  // ... also to a peer on this host, where copying measured faster
    bool multifd = false;        // tcp/unix: RAM over multifd-channels extra connections
    bool verify_ram = false;     // every page carries an XXH3-64 the destination checks (costs > 5 % on loopback)
    bool postcopy_ram = false;   // both sides: the migration may switch to postcopy
    // tcp/unix, both sides, with postcopy_ram: requested pages on a connection of their own (on
    // by default: measured better, docs/performance.md; a transport with its own postcopy
    // channel, rdma, keeps them apart already and ignores it)
    bool postcopy_preempt = true;
    // --incoming file:: map the saved RAM (MAP_PRIVATE) instead of reading it; checked in the background
    bool restore_mapped = false;
    // --incoming file:: run the guest at once and bring its RAM in through userfaultfd, faults first
    // (on by default: measured faster than reading it all first, docs/performance.md; a chain of
    // saves, or a machine without userfaultfd, is read instead)
    bool restore_lazy = true;
    // tcp with tls-creds: the kernel's TLS for what this side sends (kernel_tls.h)
    bool tls_kernel = false;
    std::map<std::string, bool> transport;  // e.g. rdma-pin-all
};

struct Parameters {
    uint64_t max_bandwidth = 0;          // bytes/s, 0 = unlimited
    uint64_t downtime_limit_ms = 300;
    uint64_t cpu_throttle_initial = 20;  // percent
    uint64_t cpu_throttle_increment = 10;
    uint64_t max_cpu_throttle = 99;
    uint64_t throttle_after_rounds = 2;  // dirty rounds that failed to converge before throttling
    uint64_t connect_timeout_ms = 10000;
    uint64_t io_timeout_ms = 30000;      // silence from the peer longer than this fails the migration
    // tcp/unix/rdma precopy: how long a broken link may take to come back; the source reconnects by
    // itself meanwhile (precopy-paused), and sends only what the destination lacks (0: fail at once)
    uint64_t resume_window_ms = 30000;
    // A resumable precopy's other way to its destination (e.g. tcp: beside rdma:), tried after a
    // break once its own has not come back for a while (source_resume.cc); empty: none
    std::string fallback_uri;
    // Fault injection for the switchover's tests (resumable precopy): this side cuts its own link
    // at step N of the hand-over: 1 after STATE, 2 after READY, 3 after GO, 4 after RUNNING (0: never)
    uint64_t switchover_cut = 0;
    uint64_t multifd_channels = 2;       // lanes when the multifd capability is on (QEMU's default)
    uint64_t postcopy_after_rounds = 0;  // with postcopy-ram: switch after this many rounds, bulk included (0 = on request)
    uint64_t max_postcopy_bandwidth = 0; // bytes/s for the background push after the switch, 0 = unlimited
    uint64_t postcopy_readahead = 1 << 20;  // bytes the push may send at once past requests in order (0 = none)
    std::string tls_creds;     // tcp/unix: x509 credentials directory (QEMU's layout), empty = plaintext
    std::string tls_hostname;  // source: the name the destination's certificate must carry (default: the URI's host)
    std::string tls_authz;     // destination: source certificate names accepted (tls_credentials.h; empty = any)
    uint64_t tls_rekey_records = uint64_t{1} << 24;  // TLS records a writer sends under one key (tls_stream.h)
    // x-deadline (precopy/deadline.h): "off", or the time the migration must end within, as typed
    // (checked when set); what to give up first when the plan misses it; the downtime ceiling.
    std::string deadline = "off";
    std::string deadline_strategy = "cancel";
    uint64_t deadline_max_downtime_ms = 2000;
    // x-stall-timeout (precopy/progress_watch.h): no new low of the data left for this long is a
    // stall, and x-deadline-strategy acts (0 = off).
    uint64_t stall_timeout_ms = 0;
    std::map<std::string, std::string> transport;  // e.g. x-rdma-chunk-size, as canonical text ("2097152")
};

// A setting a transport reads beyond the core's (rdma-pin-all, x-rdma-chunk-size, file-base): a row
// of the one settings table (params.h) that the transport declares (a plugin through its ABI's
// vmm_setting rows). The core checks a value against it before the transport sees it, lists it
// with its help (and its fallback until set), and hands the transport the values a user set.
struct TransportSetting {
    enum class Kind { capability, integer, size, text };  // size: an integer that takes k/m/g
    std::string name;
    std::string help;
    Kind kind = Kind::text;
    uint64_t min = 0, max = UINT64_MAX;
    bool power_of_two = false;  // integers and sizes: only powers of two
    uint64_t fallback = 0;      // the value when unset (capabilities: 0 or 1; text rows: "")
};

struct Options {
    Capabilities caps;
    Parameters params;
};

// Whether the settings ask for TLS (tls-creds is set).
inline bool tls_wanted(const Parameters& p) { return !p.tls_creds.empty(); }

}  // namespace vmm::migration
