#include "vmm/config/config.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "vmm/config/toml_reader.h"

namespace vmm::config {

namespace {

using StatusFn = Status (*)(const TableReader&, Config&);

const toml::table* sub_table(const toml::table& root, std::string_view key, const std::string& file,
                             Status& status) {
    const toml::node* n = root.get(key);
    if (n == nullptr) return nullptr;
    if (!n->is_table()) {
        TableReader r(root, "", file);
        status = r.error_at(*n, key, fmt::format("expected a table [{}], found {}", key, type_name(*n)));
        return nullptr;
    }
    return n->as_table();
}

Status read_machine(const TableReader& r, Config& c) {
    if (auto s = r.only_keys({"name", "vcpus", "dirty_tracking", "start_paused"}); !s) return s;
    auto name = r.string("name");
    if (!name) return name.error();
    if (*name) c.name = **name;
    auto vcpus = r.integer("vcpus", 1, 256);
    if (!vcpus) return vcpus.error();
    if (*vcpus) c.vcpus = static_cast<uint32_t>(**vcpus);
    auto dirty = r.string("dirty_tracking");
    if (!dirty) return dirty.error();
    if (*dirty) {
        if (**dirty == "log") c.dirty_tracking = memory::DirtyBackend::log;
        else if (**dirty == "ring") c.dirty_tracking = memory::DirtyBackend::ring;
        else return r.error_at(*r.node("dirty_tracking"), "dirty_tracking", "expected \"log\" or \"ring\"");
    }
    auto paused = r.boolean("start_paused");
    if (!paused) return paused.error();
    if (*paused) c.start_paused = **paused;
    return {};
}

Result<memory::RamBlockSpec> read_ram_block(const TableReader& r) {
    if (auto s = r.only_keys({"name", "address", "size", "huge_pages", "prealloc"}); !s) return s.error();
    memory::RamBlockSpec b;
    auto name = r.string("name");
    if (!name) return name.error();
    if (!*name) return r.error_here("missing key 'name'");
    b.name = **name;
    auto addr = r.size("address");
    if (!addr) return addr.error();
    b.guest_addr = addr->value_or(0);
    auto size = r.size("size");
    if (!size) return size.error();
    if (!*size) return r.error_here("missing key 'size'");
    b.size = **size;
    auto huge = r.string("huge_pages");
    if (!huge) return huge.error();
    if (*huge) {
        if (**huge == "none") b.huge_pages = memory::HugePages::none;
        else if (**huge == "transparent") b.huge_pages = memory::HugePages::transparent;
        else if (**huge == "hugetlbfs") b.huge_pages = memory::HugePages::hugetlbfs;
        else return r.error_at(*r.node("huge_pages"), "huge_pages", "expected \"none\", \"transparent\" or \"hugetlbfs\"");
    }
    auto prealloc = r.boolean("prealloc");
    if (!prealloc) return prealloc.error();
    b.prealloc = prealloc->value_or(false);
    if (auto s = memory::validate_block_spec(b); !s) return r.error_here(s.error().message());
    return b;
}

Status read_ram(const toml::table& root, const std::string& file, Config& c) {
    const toml::node* n = root.get("ram");
    if (n == nullptr) return {};
    TableReader top(root, "", file);
    if (!n->is_array()) return top.error_at(*n, "ram", "expected [[ram]] tables");
    for (const toml::node& e : *n->as_array()) {
        if (!e.is_table()) return top.error_at(e, "ram", "expected [[ram]] tables");
        auto b = read_ram_block(TableReader(*e.as_table(), "ram", file));
        if (!b) return b.error();
        c.ram.push_back(std::move(*b));
    }
    return {};
}

Result<std::string> params_from_table(const TableReader& r, const toml::table& t) {
    std::string out;
    for (auto&& [key, value] : t) {
        std::string v;
        if (value.is_string()) v = value.as_string()->get();
        else if (value.is_integer()) v = std::to_string(value.as_integer()->get());
        else return r.error_at(value, key.str(), fmt::format("expected a string or integer, found {}", type_name(value)));
        out += (out.empty() ? "" : " ") + std::string(key.str()) + "=" + v;
    }
    return out;
}

Status read_guest(const TableReader& r, Config& c) {
    if (auto s = r.only_keys({"payload", "params", "prefill"}); !s) return s;
    auto prefill = r.size("prefill");
    if (!prefill) return prefill.error();
    if (*prefill) c.prefill = **prefill;
    auto payload = r.string("payload");
    if (!payload) return payload.error();
    if (*payload) c.payload = **payload;
    if (const toml::node* p = r.node("params")) {
        if (p->is_string()) {
            c.payload_params = p->as_string()->get();
        } else if (p->is_table()) {
            auto s = params_from_table(TableReader(*p->as_table(), r.section() + ".params", r.file()), *p->as_table());
            if (!s) return s.error();
            c.payload_params = *s;
        } else {
            return r.error_at(*p, "params", "expected a string \"k=v ...\" or a table { k = v }");
        }
        if (auto s = validate_payload_params(c.payload_params); !s) return r.error_at(*p, "params", s.error().message());
    }
    return {};
}

Status read_serial(const TableReader& r, Config& c) {
    if (auto s = r.only_keys({"output"}); !s) return s;
    auto out = r.string("output");
    if (!out) return out.error();
    if (!*out) return {};
    auto parsed = parse_serial_output(**out);
    if (!parsed) return r.error_at(*r.node("output"), "output", parsed.error().message());
    c.serial = *parsed;
    return {};
}

Status read_monitor(const TableReader& r, Config& c) {
    if (auto s = r.only_keys({"hmp", "qmp"}); !s) return s;
    for (auto [key, target, stdio] : {std::tuple{"hmp", &c.hmp, true}, std::tuple{"qmp", &c.qmp, false}}) {
        auto v = r.string(key);
        if (!v) return v.error();
        if (!*v) continue;
        auto e = parse_endpoint(**v, stdio);
        if (!e) return r.error_at(*r.node(key), key, e.error().message());
        *target = *e;
    }
    return {};
}

// One [migration] entry: a boolean is a capability, a string or an integer a parameter.
Status read_migration_entry(const TableReader& r, std::string_view key, const toml::node& value, bool capability,
                            Config& c) {
    MigrationSetting m{std::string(key), "", capability, r.where(value.source())};
    if (capability && value.is_boolean()) m.value = value.as_boolean()->get() ? "on" : "off";
    else if (!capability && value.is_string()) m.value = value.as_string()->get();
    else if (!capability && value.is_integer() && value.as_integer()->get() >= 0) m.value = std::to_string(value.as_integer()->get());
    else return r.error_at(value, key, capability ? "expected true or false" : "expected a string or a non-negative integer");
    c.migration.settings.push_back(std::move(m));
    return {};
}

// [migration]: any setting of the table by its monitor name (`downtime-limit = 50`,
// `auto-converge = true`, `x-rdma-chunk-size = "2M"`), or in the sub-tables `capabilities` and
// `parameters`; downtime_limit_ms and max_bandwidth are older spellings of two rows.
Status read_migration(const TableReader& r, Config& c) {
    static constexpr std::pair<std::string_view, std::string_view> kOlderSpellings[] = {
        {"downtime_limit_ms", "downtime-limit"}, {"max_bandwidth", "max-bandwidth"}};
    for (auto&& [key, value] : r.table()) {
        std::string_view name = key.str();
        if (name == "capabilities" || name == "parameters") {
            if (!value.is_table()) return r.error_at(value, name, "expected a table of name = value");
            TableReader sub(*value.as_table(), r.section() + "." + std::string(name), r.file());
            for (auto&& [k, v] : *value.as_table())
                if (auto s = read_migration_entry(sub, k.str(), v, name == "capabilities", c); !s) return s;
            continue;
        }
        for (auto [older, row] : kOlderSpellings)
            if (name == older) name = row;
        if (auto s = read_migration_entry(r, name, value, value.is_boolean(), c); !s) return s;
    }
    return {};
}

}  // namespace

Result<Config> parse_config(std::string_view text, const std::string& source) {
    toml::table root;
    try {
        root = toml::parse(text, source);
    } catch (const toml::parse_error& e) {
        return Error(fmt::format("{}:{}:{}: {}", source, e.source().begin.line, e.source().begin.column, e.description()));
    }
    Config c;
    c.source = source;
    TableReader top(root, "", source);
    if (auto s = top.only_keys({"machine", "ram", "guest", "serial", "monitor", "migration"}); !s) return s.error();
    if (auto s = read_ram(root, source, c); !s) return s.error();
    static constexpr std::pair<std::string_view, StatusFn> kSections[] = {
        {"machine", read_machine}, {"guest", read_guest},         {"serial", read_serial},
        {"monitor", read_monitor}, {"migration", read_migration},
    };
    for (const auto& [name, fn] : kSections) {
        Status status;
        const toml::table* t = sub_table(root, name, source, status);
        if (!status) return status.error();
        if (t == nullptr) continue;
        if (auto s = fn(TableReader(*t, std::string(name), source), c); !s) return s.error();
    }
    return c;
}

Result<Config> load_config_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Error::from_errno("cannot read config file " + path);
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return Error("error reading config file " + path);
    return parse_config(text.str(), path);
}

}  // namespace vmm::config
