// The one command table behind both monitors. A command has an HMP spelling ("info status"),
// a QMP name ("query-status"), typed arguments, a handler returning JSON, and a text rendering
// of that JSON for the human monitor.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vmm/common/result.h"

namespace vmm::monitor {

using Json = nlohmann::json;

// flag: HMP takes it as "-x" (ArgSpec::hmp_flag) anywhere before the positional arguments;
// json: any JSON value (QMP only).
enum class ArgType { string, integer, size, boolean, flag, json };

struct ArgSpec {
    std::string name;  // QMP key; HMP takes arguments positionally in this order
    ArgType type = ArgType::string;
    bool optional = false;
    std::string hmp_flag{};  // for ArgType::flag, e.g. "-d"
};

struct Command {
    std::string hmp;  // empty: not on the text monitor
    std::string qmp;  // empty: not on the JSON monitor
    std::vector<ArgSpec> args;
    std::string help;
    std::function<Result<Json>(const Json& args)> run;
    std::function<std::string(const Json& result)> text;  // empty: print nothing
    // Optional, HMP only: runs after a successful `run`, outside the command lock, and may
    // stream output (e.g. a progress bar) until it returns. `write` returns false once the
    // client is gone.
    std::function<void(const Json& args, const std::function<bool(const std::string&)>& write)> follow{};
    bool any_args = false;  // QMP: pass the arguments object through unchecked (the handler checks)
};

class CommandTable {
public:
    void add(Command c);
    const std::vector<Command>& commands() const { return commands_; }
    const Command* find_qmp(std::string_view name) const;
    const Command* find_hmp(std::string_view name) const;

    // Splits a line into the command (longest matching spelling) and typed arguments.
    Result<std::pair<const Command*, Json>> parse_hmp(std::string_view line) const;
    // Checks a QMP "arguments" object against the command's specs.
    Result<Json> check_qmp_args(const Command& c, const Json& args) const;
    std::string help_text() const;

private:
    std::vector<Command> commands_;
};

// Splits on blanks; "double quoted" tokens may hold blanks.
Result<std::vector<std::string>> tokenize(std::string_view line);

// Runs one HMP line; returns the text to print (possibly empty) or one error line.
std::string execute_hmp(const CommandTable& table, std::string_view line);

// The same, plus the command's follow-up (bound to its arguments), to run after the lock.
struct HmpOutcome {
    std::string text;
    std::function<void(const std::function<bool(const std::string&)>& write)> follow;
};
HmpOutcome execute_hmp_full(const CommandTable& table, std::string_view line);
// Runs one QMP request object; returns {"return": ...} or {"error": {...}}, echoing "id".
Json execute_qmp(const CommandTable& table, const Json& request);
Json qmp_error(std::string_view desc, std::string_view cls = "GenericError");

}  // namespace vmm::monitor
