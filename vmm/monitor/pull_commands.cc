#include "vmm/monitor/pull_commands.h"

#include <fmt/format.h>

#include "vmm/common/units.h"
#include "vmm/monitor/client/json_access.h"

namespace vmm::monitor {

namespace {

Json serving_json(const migration::MigrationManager& mgr) {
    auto s = mgr.serving();
    if (!s) return Json{{"serving", false}};
    Json clients = Json::array();
    for (const auto& c : s->clients) {
        clients.push_back(Json{{"peer", c.peer}, {"pulled", c.pulled}, {"ms", c.ms},
                               {"state", migration::pull_state_name(c.state)}, {"why", c.why}});
    }
    return Json{{"serving", true}, {"file", s->path}, {"uri", s->uri}, {"size", s->size}, {"clients", clients}};
}

std::string serving_text(const Json& j) {
    if (!bool_member(j, "serving").value_or(false)) return "serving no saved guest (x_pull_serve FILE URI starts)\n";
    uint64_t size = u64(j, "size");
    std::string out = fmt::format("serving file:{} ({}) at {}\n", str(j, "file"), format_size(size), str(j, "uri"));
    const Json* clients = member(j, "clients");
    if (clients == nullptr || !clients->is_array() || clients->empty()) return out + "  no clone has connected yet\n";
    for (const Json& c : *clients) {
        uint64_t pulled = u64(c, "pulled");
        std::string why = str(c, "why");
        out += fmt::format("  {:<24} {:<8} {:>10} pulled ({:5.1f} %) in {:.1f} s{}\n", str(c, "peer"), str(c, "state"),
                           format_size(pulled), size != 0 ? 100.0 * static_cast<double>(pulled) / static_cast<double>(size) : 0.0,
                           static_cast<double>(u64(c, "ms")) / 1000.0, why.empty() ? "" : ": " + why);
    }
    return out;
}

}  // namespace

void add_pull_commands(CommandTable& t, migration::MigrationManager& mgr) {
    t.add({"x_pull_serve", "x-pull-serve", {{"file", ArgType::string}, {"uri", ArgType::string}},
           "serve the guest saved in FILE (migrate file:FILE made it) at URI (rdma:HOST:PORT) for clones to pull: "
           "'vmm --incoming rdma-pull:HOST:PORT' elsewhere runs it at once and reads its pages from here by RDMA "
           "READ, without this side's CPU; any number at once",
           [&mgr](const Json& a) -> Result<Json> {
               if (auto s = mgr.serve(str(a, "file"), str(a, "uri")); !s) return s.error();
               return Json::object();
           },
           {}});
    t.add({"x_pull_serve_stop", "x-pull-serve-stop", {},
           "stop serving the saved guest (clones still pulling fail, each with a line naming this server)",
           [&mgr](const Json&) -> Result<Json> {
               if (auto s = mgr.stop_serving(); !s) return s.error();
               return Json::object();
           },
           {}});
    t.add({"info pull-clients", "x-query-pull-serve", {},
           "the saved guest served for pulling, and each clone that pulls it: how much it has read, how long it took",
           [&mgr](const Json&) -> Result<Json> { return serving_json(mgr); }, serving_text});
}

}  // namespace vmm::monitor
