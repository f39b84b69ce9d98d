#include "vmmd/domain/domain_xml.h"

#include <fmt/format.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "vmmd/domain/metadata_xml.h"
#include "vmmd/domain/xml_doc.h"

namespace vmmd {

using vmm::Error;
using vmm::Result;
using vmm::Status;

namespace {

constexpr size_t kMaxDisplayDevices = 8;  // virt-install adds three; a definition gets a few more

// Element children of `n`, each checked against `allowed`: anything else is refused by name.
Result<std::vector<const xmlNode*>> children(const xmlNode* n, const std::set<std::string>& allowed, const std::string& where) {
    std::vector<const xmlNode*> out;
    for (const xmlNode* c = n->children; c != nullptr; c = c->next) {
        if (c->type != XML_ELEMENT_NODE) continue;
        if (!allowed.contains(name_of(c))) {
            return Error(fmt::format("<{}> in <{}> (line {}) is not supported by the vmm driver: remove it", name_of(c), where,
                                     xmlGetLineNo(c)));
        }
        out.push_back(c);
    }
    return out;
}

Result<uint64_t> number(const std::string& text, const std::string& what) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19)
        return Error(fmt::format("<{}>: '{}' is not a number", what, text));
    return std::stoull(text);
}

Result<uint64_t> memory_kib(const xmlNode* n) {
    auto v = number(text_of(n), name_of(n));
    if (!v) return v.error();
    auto kib = to_kib(std::to_string(*v), attribute(n, "unit").value_or("KiB"));
    if (!kib) return kib.error().context(fmt::format("<{}>", name_of(n)));
    return kib;
}

Status parse_os(const xmlNode* os, DomainDef& d) {
    auto kids = children(os, {"type", "kernel", "cmdline"}, "os");
    if (!kids) return kids.error();
    for (const xmlNode* c : *kids) {
        std::string n = name_of(c), t = text_of(c);
        if (n == "type" && t != "hvm") return Error(fmt::format("<os><type>{}</type>: the vmm driver runs hvm guests", t));
        if (n == "kernel") d.kernel = t;
        if (n == "cmdline") d.cmdline = t;
    }
    return {};
}

// A display device: kept as given (dumpxml shows what the user asked for), not honoured.
Status keep_display_device(const xmlNode* c, DomainDef& d) {
    if (d.display_devices.size() >= kMaxDisplayDevices) {
        return Error(fmt::format("<devices> holds more than {} display devices (<graphics>, <video>, <input>)", kMaxDisplayDevices));
    }
    auto kept = foreign_metadata(c);  // the element standing alone, as others' metadata is kept
    if (!kept) return kept.error().context(fmt::format("<{}> in <devices>", name_of(c)));
    auto type = attribute(c, "type");
    std::string label = type ? fmt::format("<{} type='{}'>", name_of(c), *type) : fmt::format("<{}>", name_of(c));
    d.display_devices.push_back({std::move(kept->xml), std::move(label)});
    return {};
}

Status parse_devices(const xmlNode* devices, DomainDef& d) {
    auto kids = children(devices, {"emulator", "serial", "console", "graphics", "video", "input"}, "devices");
    if (!kids) return kids.error();
    for (const xmlNode* c : *kids) {
        std::string kind = name_of(c);
        if (kind == "graphics" || kind == "video" || kind == "input") {
            if (auto s = keep_display_device(c, d); !s) return s;
            continue;
        }
        // libvirt adds a console beside a serial (the same port); virt-install writes a pty one
        // alone: vmm has no console device, so it changes nothing (docs/libvirt.md).
        if (name_of(c) == "console") continue;
        if (name_of(c) == "emulator") {
            d.emulator = text_of(c);
            if (d.emulator->empty() || d.emulator->front() != '/') return Error("<emulator>: an absolute path to vmm");
            continue;
        }
        std::string type = attribute(c, "type").value_or("");
        if (type == "null") continue;
        if (type != "file") return Error(fmt::format("<serial type='{}'>: the vmm driver takes type 'file' or 'null'", type));
        for (const xmlNode* s = c->children; s != nullptr; s = s->next)
            if (s->type == XML_ELEMENT_NODE && name_of(s) == "source") d.serial_file = attribute(s, "path");
        if (!d.serial_file || d.serial_file->empty()) return Error("<serial type='file'> needs <source path='…'/>");
    }
    return {};
}

// <vmm:migration-deadline> and its kin (vmmd/migration/deadline_settings.h): the deadline as vmm
// takes it (vmm checks it when a migration sets it), a strategy vmm knows, a stall timeout in ms.
bool parse_migration_deadline(const std::string& n, const std::string& t, MigrationDeadline& m, std::string& why) {
    bool plain = !t.empty() && t.size() <= 32 &&
                 std::all_of(t.begin(), t.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)); });
    if (n == "migration-deadline") {
        if (!plain) why = fmt::format("<vmm:migration-deadline>{}</vmm:migration-deadline>: a time (30s, 5m, 2h) or off", t);
        else m.deadline = t;
    } else if (n == "migration-deadline-strategy") {
        if (auto refusal = deadline_strategy_refusal(t)) why = "<vmm:migration-deadline-strategy>: " + *refusal;
        else m.strategy = t;
    } else if (n == "migration-stall-timeout") {
        uint64_t ms = 0;
        auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), ms);
        if (t.empty() || ec != std::errc() || end != t.data() + t.size() || ms > 86'400'000) {
            why = fmt::format("<vmm:migration-stall-timeout>{}</vmm:migration-stall-timeout>: milliseconds, at most a "
                              "day (86400000), 0 = off",
                              t);
        } else {
            m.stall_timeout_ms = ms;
        }
    } else {
        return false;
    }
    return true;
}

Status parse_vmm_metadata(const xmlNode* vmm, DomainDef& d) {
    for (const xmlNode* c = vmm->children; c != nullptr; c = c->next) {
        if (c->type != XML_ELEMENT_NODE) continue;
        std::string n = name_of(c), t = text_of(c), why;
        if (n == "dirty-tracking" && (t == "log" || t == "ring")) d.dirty_tracking = t;
        else if (n == "prealloc" && (t == "on" || t == "off")) d.prealloc = t == "on";
        else if (parse_migration_deadline(n, t, d.migration, why)) {
            if (!why.empty()) return Error(why);
        } else {
            return Error(fmt::format("<vmm:{}>{}</vmm:{}>: vmm knows dirty-tracking (log, ring), prealloc (on, off), "
                                     "migration-deadline, migration-deadline-strategy and migration-stall-timeout",
                                     n, t, n));
        }
    }
    return {};
}

Status parse_metadata(const xmlNode* metadata, DomainDef& d) {
    for (const xmlNode* c = metadata->children; c != nullptr; c = c->next) {
        if (c->type != XML_ELEMENT_NODE) continue;
        if (c->ns != nullptr && std::strcmp(reinterpret_cast<const char*>(c->ns->href), kVmmNamespace) == 0) {
            if (name_of(c) != "vmm") return Error(fmt::format("<vmm:{}> in <metadata>: vmm's settings go in <vmm:vmm>", name_of(c)));
            if (auto s = parse_vmm_metadata(c, d); !s) return s;
            continue;
        }
        auto kept = foreign_metadata(c);  // others' metadata is theirs: kept as given
        if (!kept) return kept.error();
        if (d.metadata.size() >= kMaxMetadataElements) {
            return Error(fmt::format("<metadata> holds more than {} elements of others", kMaxMetadataElements));
        }
        d.metadata.push_back(std::move(*kept));
    }
    return {};
}

Status parse_memtune(const xmlNode* memtune, DomainDef& d) {
    auto kids = children(memtune, {"hard_limit"}, "memtune");
    if (!kids) return kids.error();
    for (const xmlNode* c : *kids) {
        auto kib = memory_kib(c);
        if (!kib) return kib.error();
        d.hard_limit_kib = *kib;
    }
    return {};
}

// <clock offset='utc'/>, which libvirt's tools write: a vmm guest's clock is UTC, and it has no
// timers to tune. Any other offset, or a timer, would change the guest: refused.
Status parse_clock(const xmlNode* c, DomainDef& d) {
    std::string offset = attribute(c, "offset").value_or("utc");
    if (offset != "utc") return Error(fmt::format("<clock offset='{}'>: a vmm guest's clock is UTC: use offset='utc'", offset));
    if (auto kids = children(c, {}, "clock"); !kids) return kids.error();
    d.clock_utc = true;
    return {};
}

Status lifecycle_action(const xmlNode* c, std::string& out) {
    std::string t = text_of(c);
    // A vmm whose guest powers off or crashes ends (a payload's CPU exception exits with 128 +
    // the vector): the domain is shut off (shutdown or crashed). Nothing is kept to preserve.
    if (t != "destroy") {
        return Error(fmt::format("<{}>{}</{}>: the vmm driver only destroys (its vmm ends with the guest); use destroy",
                                 name_of(c), t, name_of(c)));
    }
    out = t;
    return {};
}

// One top-level element into `d`; `current` collects <currentMemory>.
Status parse_element(const xmlNode* c, DomainDef& d, std::optional<uint64_t>& current, bool& has_uuid) {
    std::string n = name_of(c);
    if (n == "name") d.name = text_of(c);
    if (n == "title") d.title = text_of(c);
    if (n == "description") d.description = text_of(c);
    if (n == "uuid") {
        auto u = parse_uuid(text_of(c));
        if (!u) return Error(fmt::format("<uuid>{}</uuid> is not a UUID", text_of(c)));
        d.uuid = *u;
        has_uuid = true;
    }
    if (n == "memory" || n == "currentMemory") {
        auto kib = memory_kib(c);
        if (!kib) return kib.error();
        (n == "memory" ? d.memory_kib : current.emplace()) = *kib;
    }
    if (n == "vcpu") {
        auto v = number(text_of(c), "vcpu");
        if (!v || *v == 0 || *v > 255) return Error(fmt::format("<vcpu>{}</vcpu>: use 1..255", text_of(c)));
        d.vcpus = static_cast<uint32_t>(*v);
    }
    if (n == "os") return parse_os(c, d);
    if (n == "memtune") return parse_memtune(c, d);
    if (n == "devices") return parse_devices(c, d);
    if (n == "clock") return parse_clock(c, d);
    if (n == "metadata") return parse_metadata(c, d);
    if (n == "on_poweroff") return lifecycle_action(c, d.on_poweroff);
    if (n == "on_crash") return lifecycle_action(c, d.on_crash);
    return {};
}

Status check_domain(const DomainDef& d, const std::optional<uint64_t>& current) {
    if (d.name.empty()) return Error("<name> is missing");
    // Checked first, and the name not repeated: a newline in it would forge lines in vmmd's log
    // (and put one in its log file's name).
    for (unsigned char c : d.name)
        if (c < 0x20 || c == 0x7f) return Error("domain name: no control characters (newline, tab, ...)");
    if (d.name.find_first_of("/\\") != std::string::npos || d.name[0] == '.' || d.name.size() > 200)
        return Error(fmt::format("domain name '{}': no slashes, no leading dot, at most 200 characters", d.name));
    if (d.memory_kib == 0) return Error("<memory> is missing");
    if (d.kernel.empty()) return Error("<os><kernel> is missing: name a payload (idle, stress, pattern) or an ELF path");
    if (d.memory_kib % 4 != 0) return Error("<memory> must be whole 4 KiB pages");
    if (current && *current != d.memory_kib)
        return Error("<currentMemory> differs from <memory>: vmm has no balloon, so both must be equal");
    return {};
}

Result<DomainDef> parse_root(const xmlNode* root, const Uuid& random_uuid) {
    if (root == nullptr || name_of(root) != "domain") return Error("the document's root is not <domain>");
    std::string type = attribute(root, "type").value_or("");
    if (type != "vmm") return Error(fmt::format("<domain type='{}'>: this is the vmm driver, use type='vmm'", type));
    auto kids = children(root, {"name", "uuid", "title", "description", "memory", "currentMemory", "vcpu", "os",
                                "memtune", "clock", "on_poweroff", "on_reboot", "on_crash", "devices", "metadata"}, "domain");
    if (!kids) return kids.error();
    DomainDef d;
    d.uuid = random_uuid;
    std::optional<uint64_t> current;
    bool has_uuid = false;
    for (const xmlNode* c : *kids)
        if (auto s = parse_element(c, d, current, has_uuid); !s) return s.error();
    if (auto s = check_domain(d, current); !s) return s.error();
    return d;
}

}  // namespace

Result<DomainDef> parse_domain_xml(std::string_view xml, const Uuid& random_uuid) {
    auto doc = read_xml(xml, "the domain XML");
    if (!doc) return doc.error();
    return parse_root(xmlDocGetRootElement(doc->get()), random_uuid);
}

Result<uint64_t> to_kib(const std::string& value, const std::string& unit) {
    static const std::pair<const char*, uint64_t> kUnits[] = {
        {"b", 1}, {"bytes", 1}, {"KB", 1000}, {"k", 1024}, {"KiB", 1024}, {"MB", 1000000}, {"M", 1 << 20},
        {"MiB", 1 << 20}, {"GB", 1000000000}, {"G", 1 << 30}, {"GiB", 1 << 30}, {"TB", 1000000000000},
        {"T", 1ull << 40}, {"TiB", 1ull << 40}};
    auto n = number(value, "memory");
    if (!n) return n.error();
    for (const auto& [name, bytes] : kUnits) {
        if (unit != name) continue;
        if (*n != 0 && bytes > UINT64_MAX / *n) return Error(fmt::format("{} {} is too large", value, unit));
        uint64_t total = *n * bytes;
        if (total % 1024 != 0) return Error(fmt::format("{} {} is not a whole number of KiB", value, unit));
        return total / 1024;
    }
    return Error(fmt::format("unit '{}': use b, KB, KiB, MB, MiB, GB, GiB, TB or TiB", unit));
}

}  // namespace vmmd
