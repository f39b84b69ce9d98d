#include "vmm/migration/transport/plugin_settings.h"

#include <fmt/format.h>

#include <bit>
#include <cstddef>
#include <cstring>

namespace vmm::migration {

namespace {

using PluginKind = TransportSetting::Kind;

// The longest name and help a row may have (a name is typed; a help is one line).
constexpr size_t kMaxName = 64;
constexpr size_t kMaxHelp = 1024;

bool covers_settings(const vmm_transport_ops& ops) {
    return ops.struct_size >= offsetof(vmm_transport_ops, settings) + sizeof ops.settings && ops.settings != nullptr;
}

Result<PluginKind> kind_of(uint32_t k) {
    switch (k) {
        case VMM_SETTING_CAPABILITY: return PluginKind::capability;
        case VMM_SETTING_INTEGER: return PluginKind::integer;
        case VMM_SETTING_SIZE: return PluginKind::size;
        case VMM_SETTING_TEXT: return PluginKind::text;
        default: return Error(fmt::format("kind {} is none of VMM_SETTING_*", k));
    }
}

// One row, checked: a name that starts with the scheme and a dash, a known kind, a fallback within
// its bounds (for a power of two: itself one).
Result<TransportSetting> row_from(const vmm_setting& s, const std::string& scheme) {
    if (s.name == nullptr || std::strlen(s.name) > kMaxName) return Error("a row without a name, or one over 64 bytes");
    std::string name = s.name;
    auto fail = [&](const std::string& why) { return Error(fmt::format("setting '{}': {}", name, why)); };
    bool scoped = name.rfind(scheme + "-", 0) == 0 || name.rfind("x-" + scheme + "-", 0) == 0;
    if (!scoped) return fail(fmt::format("its name must start with '{}-' or 'x-{}-'", scheme, scheme));
    if (s.help == nullptr || std::strlen(s.help) > kMaxHelp) return fail("no help, or a help over 1024 bytes");
    auto kind = kind_of(s.kind);
    if (!kind) return fail(kind.error().message());
    if ((s.flags & ~VMM_SETTING_F_POWER_OF_TWO) != 0) return fail(fmt::format("unknown flags {:#x}", s.flags));
    TransportSetting row{name, s.help, *kind, s.min, s.max, (s.flags & VMM_SETTING_F_POWER_OF_TWO) != 0, s.fallback};
    bool number = *kind == PluginKind::integer || *kind == PluginKind::size;
    if (*kind == PluginKind::capability && s.fallback > 1) return fail("a capability's fallback must be 0 or 1");
    if (number && (s.min > s.max || s.fallback < s.min || s.fallback > s.max)) {
        return fail(fmt::format("its fallback {} is outside {}..{}", s.fallback, s.min, s.max));
    }
    if (number && row.power_of_two && !std::has_single_bit(s.fallback)) return fail("its fallback is not a power of two");
    return row;
}

// A plugin built before `settings`: its name lists, as rows vmm knows nothing more of.
std::vector<TransportSetting> rows_from_names(const vmm_transport_ops& ops) {
    std::vector<TransportSetting> out;
    auto add = [&](const char* const* list, PluginKind kind) {
        for (size_t i = 0; list != nullptr && list[i] != nullptr && i < VMM_MAX_SETTINGS; ++i)
            out.push_back({list[i], "(the plugin gives no help: built before vmm_setting)", kind});
    };
    add(ops.capabilities, PluginKind::capability);
    add(ops.parameters, PluginKind::text);
    return out;
}

}  // namespace

Result<std::vector<TransportSetting>> plugin_settings(const vmm_transport_ops& ops, const std::string& path) {
    if (!covers_settings(ops)) return rows_from_names(ops);
    std::vector<TransportSetting> out;
    for (size_t i = 0; ops.settings[i].name != nullptr; ++i) {
        if (i == VMM_MAX_SETTINGS) return Error(fmt::format("{}: more than {} settings", path, VMM_MAX_SETTINGS));
        auto row = row_from(ops.settings[i], ops.scheme);
        if (!row) return row.error().context(path);
        for (const auto& seen : out)
            if (seen.name == row->name) return Error(fmt::format("{}: setting '{}' twice", path, row->name));
        out.push_back(std::move(*row));
    }
    return out;
}

}  // namespace vmm::migration
