#include "vmm/monitor/command_table.h"

#include <fmt/format.h>

#include "vmm/common/units.h"
#include "vmm/monitor/client/json_access.h"

namespace vmm::monitor {

void CommandTable::add(Command c) { commands_.push_back(std::move(c)); }

const Command* CommandTable::find_qmp(std::string_view name) const {
    if (name.empty()) return nullptr;
    for (const auto& c : commands_)
        if (c.qmp == name) return &c;
    return nullptr;
}

const Command* CommandTable::find_hmp(std::string_view name) const {
    if (name.empty()) return nullptr;
    for (const auto& c : commands_)
        if (c.hmp == name) return &c;
    return nullptr;
}

Result<std::vector<std::string>> tokenize(std::string_view line) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < line.size()) {
        if (line[i] == ' ' || line[i] == '\t') {
            ++i;
            continue;
        }
        std::string tok;
        if (line[i] == '"') {
            size_t end = line.find('"', i + 1);
            if (end == std::string_view::npos) return Error("unterminated quote");
            tok = std::string(line.substr(i + 1, end - i - 1));
            i = end + 1;
        } else {
            while (i < line.size() && line[i] != ' ' && line[i] != '\t') tok += line[i++];
        }
        out.push_back(std::move(tok));
    }
    return out;
}

static Result<Json> convert(const ArgSpec& spec, const std::string& text) {
    switch (spec.type) {
        case ArgType::string: return Json(text);
        case ArgType::integer: {
            auto v = parse_uint(text);
            if (!v) return Error(fmt::format("argument '{}': {}", spec.name, v.error().message()));
            return Json(*v);
        }
        case ArgType::size: {
            auto v = parse_size(text);
            if (!v) return Error(fmt::format("argument '{}': {}", spec.name, v.error().message()));
            return Json(*v);
        }
        case ArgType::boolean:
            if (text == "on" || text == "true" || text == "yes") return Json(true);
            if (text == "off" || text == "false" || text == "no") return Json(false);
            return Error(fmt::format("argument '{}': expected on or off, got '{}'", spec.name, text));
        case ArgType::flag: return Json(true);
        case ArgType::json: {
            auto j = parse_request(text);
            if (!j) return Error(fmt::format("argument '{}': {}", spec.name, j.error().message()));
            return std::move(*j);
        }
    }
    return Error("unknown argument type");
}

Result<std::pair<const Command*, Json>> CommandTable::parse_hmp(std::string_view line) const {
    auto tokens = tokenize(line);
    if (!tokens) return tokens.error();
    if (tokens->empty()) return Error("empty command");
    const Command* cmd = nullptr;
    size_t used = 0;
    if (tokens->size() >= 2) {
        cmd = find_hmp((*tokens)[0] + " " + (*tokens)[1]);
        used = 2;
    }
    if (cmd == nullptr) {
        cmd = find_hmp((*tokens)[0]);
        used = 1;
    }
    if (cmd == nullptr) {
        std::string what = (*tokens)[0] == "info" && tokens->size() >= 2 ? "info " + (*tokens)[1] : (*tokens)[0];
        return Error(fmt::format("unknown command: '{}'; type 'help' for the list", what));
    }
    Json args = Json::object();
    // Flags ("-d") come first.
    while (used < tokens->size() && (*tokens)[used].size() > 1 && (*tokens)[used][0] == '-') {
        const ArgSpec* flag = nullptr;
        for (const auto& a : cmd->args)
            if (a.type == ArgType::flag && a.hmp_flag == (*tokens)[used]) flag = &a;
        if (flag == nullptr) return Error(fmt::format("'{}' has no option '{}'; type 'help'", cmd->hmp, (*tokens)[used]));
        args[flag->name] = true;
        ++used;
    }
    std::vector<const ArgSpec*> positional;
    for (const auto& a : cmd->args)
        if (a.type != ArgType::flag) positional.push_back(&a);
    size_t n = tokens->size() - used;
    if (n > positional.size()) return Error(fmt::format("'{}' takes at most {} argument(s); type 'help'", cmd->hmp, positional.size()));
    for (size_t i = 0; i < positional.size(); ++i) {
        const ArgSpec& spec = *positional[i];
        if (i >= n) {
            if (!spec.optional) return Error(fmt::format("'{}' needs the argument '{}'; type 'help'", cmd->hmp, spec.name));
            continue;
        }
        auto v = convert(spec, (*tokens)[used + i]);
        if (!v) return v.error();
        args[spec.name] = std::move(*v);
    }
    return std::make_pair(cmd, std::move(args));
}

static bool json_matches(ArgType t, const Json& v) {
    switch (t) {
        case ArgType::string: return v.is_string();
        case ArgType::integer:
        case ArgType::size: return as_uint(v).has_value();
        case ArgType::boolean:
        case ArgType::flag: return v.is_boolean();
        case ArgType::json: return true;
    }
    return false;
}

Result<Json> CommandTable::check_qmp_args(const Command& c, const Json& args) const {
    if (!args.is_object()) return Error("'arguments' must be an object");
    if (c.any_args) return args;
    for (const auto& [key, value] : args.items()) {
        const ArgSpec* spec = nullptr;
        for (const auto& a : c.args)
            if (a.name == key) spec = &a;
        if (spec == nullptr) return Error(fmt::format("parameter '{}' is unexpected", key));
        if (!json_matches(spec->type, value)) return Error(fmt::format("parameter '{}' has the wrong type", key));
    }
    for (const auto& a : c.args)
        if (!a.optional && !args.contains(a.name)) return Error(fmt::format("parameter '{}' is missing", a.name));
    return args;
}

std::string CommandTable::help_text() const {
    std::string out;
    for (const auto& c : commands_) {
        if (c.hmp.empty()) continue;
        std::string usage = c.hmp;
        for (const auto& a : c.args) {
            if (a.type == ArgType::flag) usage += fmt::format(" [{}]", a.hmp_flag);
            else usage += a.optional ? fmt::format(" [{}]", a.name) : fmt::format(" {}", a.name);
        }
        out += fmt::format("{:<40} -- {}\n", usage, c.help);
    }
    return out;
}

HmpOutcome execute_hmp_full(const CommandTable& table, std::string_view line) {
    auto parsed = table.parse_hmp(line);
    if (!parsed) return {"Error: " + parsed.error().message() + "\n", {}};
    const Command* cmd = parsed->first;
    Json args = std::move(parsed->second);
    auto result = cmd->run(args);
    if (!result) return {"Error: " + result.error().message() + "\n", {}};
    HmpOutcome out{cmd->text ? cmd->text(*result) : std::string(), {}};
    if (cmd->follow) {
        out.follow = [follow = cmd->follow, args](const std::function<bool(const std::string&)>& write) { follow(args, write); };
    }
    return out;
}

std::string execute_hmp(const CommandTable& table, std::string_view line) { return execute_hmp_full(table, line).text; }

Json qmp_error(std::string_view desc, std::string_view cls) {
    return Json{{"error", {{"class", cls}, {"desc", desc}}}};
}

Json execute_qmp(const CommandTable& table, const Json& request) {
    Json reply;
    auto name = string_member(request, "execute");
    const Json* arguments = member(request, "arguments");
    if (!name) {
        reply = qmp_error("expected an object with \"execute\" naming a command");
    } else if (const Command* cmd = table.find_qmp(*name); cmd == nullptr) {
        reply = qmp_error(fmt::format("The command {} has not been found", *name), "CommandNotFound");
    } else {
        auto args = table.check_qmp_args(*cmd, arguments != nullptr ? *arguments : Json::object());
        auto result = args ? cmd->run(*args) : Result<Json>(args.error());
        reply = result ? Json{{"return", *result}} : qmp_error(result.error().message());
    }
    if (const Json* id = member(request, "id")) reply["id"] = *id;
    return reply;
}

}  // namespace vmm::monitor
