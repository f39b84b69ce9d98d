#include "vmmd/migration/deadline_settings.h"

#include <fmt/format.h>

namespace vmmd {

vmm::Result<vmm::monitor::Json> deadline_parameters(const DomainDef& def, const std::vector<rpc::TypedParam>& params,
                                                    const DeadlineSettings& defaults) {
    auto deadline = rpc::string_param(params, kParamDeadline);
    auto strategy = rpc::string_param(params, kParamDeadlineStrategy);
    auto stall = rpc::uint_param(params, kParamStallTimeout);
    if (!deadline) return deadline.error();
    if (!strategy) return strategy.error();
    if (!stall) return stall.error();
    if (auto why = deadline_strategy_refusal(*strategy)) return vmm::Error(fmt::format("{}: {}", kParamDeadlineStrategy, *why));
    // The first that gives it: the migration's parameters, the domain's XML, vmmd's options.
    std::string d = deadline->value_or(def.migration.deadline.value_or(defaults.deadline.value_or("off")));
    std::string s = strategy->value_or(def.migration.strategy.value_or(defaults.strategy.value_or("cancel")));
    uint64_t t = stall->value_or(def.migration.stall_timeout_ms.value_or(defaults.stall_timeout_ms.value_or(0)));
    return vmm::monitor::Json{{"x-deadline", d}, {"x-deadline-strategy", s}, {"x-stall-timeout", t}};
}

}  // namespace vmmd
