#include "vmmd/migration/cookie.h"

#include <fmt/format.h>

namespace vmmd {

using vmm::Error;
using vmm::monitor::Json;
namespace js = vmm::monitor;

namespace {
constexpr uint64_t kVersion = 1;
}

std::vector<uint8_t> encode_cookie(const MigrationCookie& c) {
    Json j{{"vmm-migration", kVersion}, {"hostname", c.hostname}, {"name", c.name}, {"uuid", format_uuid(c.uuid)}};
    if (c.stats) j["stats"] = job_to_json(*c.stats);
    std::string text = js::to_text(j);
    return {text.begin(), text.end()};
}

vmm::Result<std::optional<MigrationCookie>> decode_cookie(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return std::optional<MigrationCookie>();
    if (bytes.size() > kMaxCookie) return Error(fmt::format("migration cookie of {} bytes: more than {}", bytes.size(), kMaxCookie));
    auto j = js::parse_request(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), kMaxCookie);
    if (!j) return j.error().context("migration cookie");
    auto version = js::uint_member(*j, "vmm-migration");
    if (!version) return Error("the migration cookie is not vmm's: is the other side another driver?");
    if (*version != kVersion) return Error(fmt::format("migration cookie version {}: this vmmd speaks {}", *version, kVersion));
    auto hostname = js::string_member(*j, "hostname");
    auto name = js::string_member(*j, "name");
    auto uuid_text = js::string_member(*j, "uuid");
    if (!hostname || !name || !uuid_text) return Error("migration cookie: hostname, name or uuid is missing");
    auto uuid = parse_uuid(*uuid_text);
    if (!uuid) return Error(fmt::format("migration cookie: '{}' is not a UUID", *uuid_text));
    MigrationCookie c{*hostname, *name, *uuid, std::nullopt};
    if (const Json* s = js::member(*j, "stats")) {
        auto stats = job_from_json(*s);
        if (!stats) return stats.error().context("migration cookie");
        c.stats = *stats;
    }
    return std::optional<MigrationCookie>(std::move(c));
}

}  // namespace vmmd
