// Migration capabilities and parameters, with QEMU's names where QEMU has them: one table
// (setting_rows(), params.cc) holds every setting the core knows, a row each (name, help, type and
// bounds, the field that holds it, whether it reaches a migration under way); setting, listing
// and the monitors' help all read it. Adding a setting is one row there plus the code that uses
// it. A transport adds rows of its own (TransportSetting, options.h: the RDMA plugin's through its
// ABI, the file transport's file-base): checked, listed and explained as the core's are, and
// handed to the transport as canonical text.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/core/live_settings.h"
#include "vmm/migration/transport/options.h"

namespace vmm::migration {

struct SettingRow {
    enum class Kind { capability, integer, size, text };  // size: an integer that takes k/m/g
    std::string_view name;
    std::string_view help;
    Kind kind;
    bool Capabilities::*cap = nullptr;  // capability rows
    uint64_t Parameters::*param = nullptr;  // integer and size rows
    uint64_t min = 0, max = UINT64_MAX;
    // When a change takes effect: when a migration starts (on a destination, when its source
    // connects), or, with a slot, also in the migration under way, which reads the slot as it
    // goes (live_settings.h; QEMU's max-bandwidth).
    std::optional<Live> live;
    // A transport's listener is given it (vmm_transport_args: a plugin takes it when it starts
    // listening, so a waiting destination cannot change it; transport.h).
    bool listener_reads = false;
    std::string Parameters::*text = nullptr;  // text rows
    // A text row's check (one line saying what it takes), or none: any text.
    Status (*check)(std::string_view value) = nullptr;
    // A credentials setting (tls-creds): refused on a destination that waits on a transport
    // without TLS, and its files read ahead when set (so the first handshake only shakes hands).
    bool credentials = false;
};

// Every setting of the core, capabilities first, in the order the monitors list them.
const std::vector<SettingRow>& setting_rows();
// The row named `name`, or null.
const SettingRow* find_setting(std::string_view name);

// The values (Options: caps, params) with their names: what the monitors set and list. A
// source takes a copy when it starts, a destination when its source connects; the `live` rows
// reach a migration under way too (MigrationManager).
class Settings : public Options {
public:
    // A transport's row (the manager adds a transport's rows when it first meets it). Listed with
    // its fallback until set; the transport is handed only the values a user set (caps.transport,
    // params.transport), so it can tell a size it was told from its own default.
    void declare_transport_setting(const TransportSetting& row);

    Status set_capability(std::string_view name, bool on);
    // `value` as typed: sizes for max-bandwidth ("40g"), integers elsewhere.
    Status set_parameter(std::string_view name, std::string_view value);
    std::vector<std::pair<std::string, bool>> capability_list() const;
    std::vector<std::pair<std::string, std::string>> parameter_list() const;

    // Every row, the core's then the transports', as the monitors explain them
    // (`info migrate_settings`).
    struct Described {
        std::string name, kind, value, range, help;
        bool live = false;  // reaches a migration under way
    };
    std::vector<Described> describe() const;

private:
    const TransportSetting* transport_row(std::string_view name) const;
    std::string did_you_mean(std::string_view name) const;
    std::vector<TransportSetting> transport_rows_;
};

// The one object the monitors write settings to and every migration reads them from: a
// destination when its source connects (not when it started listening), a source when it starts,
// and for the live rows while it runs (live(), which every change updates). Its own lock, taken
// last: a transport may read it while the manager holds its own.
class SharedSettings {
public:
    SharedSettings() { publish(); }
    Settings get() const {
        std::lock_guard lock(mutex_);
        return settings_;
    }
    // Runs `f(Settings&)` under the lock and returns what it returns; the live rows' values
    // are published before the lock goes.
    template <class F>
    auto change(F&& f) {
        std::lock_guard lock(mutex_);
        struct Publish {
            SharedSettings& s;
            ~Publish() { s.publish(); }
        } publish_after{*this};
        return f(settings_);
    }
    // The live rows' values as they are now, for the migrations under way.
    std::shared_ptr<const LiveSettings> live() const { return live_; }

private:
    void publish();  // under mutex_
    mutable std::mutex mutex_;
    Settings settings_;
    std::shared_ptr<LiveSettings> live_ = std::make_shared<LiveSettings>();
};

}  // namespace vmm::migration
