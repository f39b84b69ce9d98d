#include "vmm/monitor/command_table.h"

#include <gtest/gtest.h>

#include "vmm/monitor/machine_commands.h"

namespace vmm::monitor {

namespace {
CommandTable sample_table(Json* last_args) {
    CommandTable t;
    t.add({"info status", "query-status", {}, "status", [](const Json&) -> Result<Json> { return Json{{"status", "running"}}; },
           [](const Json& r) { return "VM status: " + r["status"].get<std::string>() + "\n"; }});
    t.add({"info", "query-info", {}, "info", [](const Json&) -> Result<Json> { return Json::object(); }, {}});
    t.add({"migrate_set_parameter", "migrate-set-parameters",
           {{"name", ArgType::string}, {"value", ArgType::size}}, "set",
           [last_args](const Json& a) -> Result<Json> {
               *last_args = a;
               return Json::object();
           },
           {}});
    t.add({"migrate_set_capability", "migrate-set-capabilities",
           {{"capability", ArgType::string}, {"state", ArgType::boolean}, {"extra", ArgType::integer, true}}, "cap",
           [last_args](const Json& a) -> Result<Json> {
               *last_args = a;
               return Json::object();
           },
           {}});
    t.add({"fail", "fail", {}, "fails", [](const Json&) -> Result<Json> { return Error("it broke: do X"); }, {}});
    return t;
}
}  // namespace

TEST(Tokenize, SplitsOnBlanksAndKeepsQuotedText) {
    auto t = tokenize("  migrate  -d \"rdma:host name:1\"\t x ");
    ASSERT_TRUE(t);
    EXPECT_EQ(*t, (std::vector<std::string>{"migrate", "-d", "rdma:host name:1", "x"}));
    EXPECT_FALSE(tokenize("say \"unterminated"));
}

TEST(Hmp, LongestSpellingWinsAndArgumentsAreTyped) {
    Json args;
    CommandTable t = sample_table(&args);
    EXPECT_EQ(execute_hmp(t, "info status"), "VM status: running\n");
    EXPECT_EQ(execute_hmp(t, "migrate_set_parameter max-bandwidth 40g"), "");
    EXPECT_EQ(args["name"], "max-bandwidth");
    EXPECT_EQ(args["value"].get<uint64_t>(), 40ull << 30);
    EXPECT_EQ(execute_hmp(t, "migrate_set_capability auto-converge on"), "");
    EXPECT_EQ(args["state"], true);
    EXPECT_FALSE(args.contains("extra"));
}

TEST(Hmp, MistakesAreOneLineErrors) {
    Json args;
    CommandTable t = sample_table(&args);
    EXPECT_EQ(execute_hmp(t, "frobnicate"), "Error: unknown command: 'frobnicate'; type 'help' for the list\n");
    EXPECT_EQ(execute_hmp(t, "migrate_set_parameter x"),
              "Error: 'migrate_set_parameter' needs the argument 'value'; type 'help'\n");
    EXPECT_EQ(execute_hmp(t, "migrate_set_parameter x 1 2"),
              "Error: 'migrate_set_parameter' takes at most 2 argument(s); type 'help'\n");
    EXPECT_EQ(execute_hmp(t, "migrate_set_capability x maybe"), "Error: argument 'state': expected on or off, got 'maybe'\n");
    EXPECT_EQ(execute_hmp(t, "fail"), "Error: it broke: do X\n");
}

TEST(Qmp, ExecutesChecksArgumentsAndEchoesId) {
    Json args;
    CommandTable t = sample_table(&args);
    EXPECT_EQ(execute_qmp(t, Json{{"execute", "query-status"}, {"id", 7}}),
              (Json{{"return", {{"status", "running"}}}, {"id", 7}}));
    Json r = execute_qmp(t, Json{{"execute", "nope"}});
    EXPECT_EQ(r["error"]["class"], "CommandNotFound");
    r = execute_qmp(t, Json{{"execute", "migrate-set-parameters"}, {"arguments", {{"name", "x"}}}});
    EXPECT_EQ(r["error"]["desc"], "parameter 'value' is missing");
    r = execute_qmp(t, Json{{"execute", "migrate-set-parameters"}, {"arguments", {{"name", "x"}, {"value", "big"}}}});
    EXPECT_EQ(r["error"]["desc"], "parameter 'value' has the wrong type");
    r = execute_qmp(t, Json{{"execute", "migrate-set-parameters"}, {"arguments", {{"name", "x"}, {"value", 5}, {"zz", 1}}}});
    EXPECT_EQ(r["error"]["desc"], "parameter 'zz' is unexpected");
    r = execute_qmp(t, Json{{"execute", "migrate-set-parameters"}, {"arguments", {{"name", "x"}, {"value", -5}}}});
    EXPECT_EQ(r["error"]["desc"], "parameter 'value' has the wrong type");
    r = execute_qmp(t, Json{{"execute", "fail"}});
    EXPECT_EQ(r["error"]["desc"], "it broke: do X");
    r = execute_qmp(t, Json::array());
    EXPECT_TRUE(r.contains("error"));
}

// QEMU's human-monitor-command: a line of the text monitor through QMP, its text (an error line
// included, as QEMU's) the return value; not itself a text command.
TEST(Qmp, HumanMonitorCommandRunsOneTextLine) {
    Json args;
    CommandTable t = sample_table(&args);
    add_human_monitor_command(t);
    auto hmp = [&](const std::string& line) {
        return execute_qmp(t, Json{{"execute", "human-monitor-command"}, {"arguments", {{"command-line", line}}}, {"id", 1}});
    };
    EXPECT_EQ(hmp("info status"), (Json{{"return", "VM status: running\n"}, {"id", 1}}));
    EXPECT_EQ(hmp("migrate_set_parameter downtime-limit 50"), (Json{{"return", ""}, {"id", 1}}));
    EXPECT_EQ(args["name"], "downtime-limit");
    EXPECT_EQ(hmp("fail"), (Json{{"return", "Error: it broke: do X\n"}, {"id", 1}}));
    Json r = execute_qmp(t, Json{{"execute", "human-monitor-command"}});
    EXPECT_EQ(r["error"]["desc"], "parameter 'command-line' is missing");
    EXPECT_EQ(execute_hmp(t, "human-monitor-command info"),
              "Error: unknown command: 'human-monitor-command'; type 'help' for the list\n");
    EXPECT_EQ(t.help_text().find("human-monitor-command"), std::string::npos);
}

TEST(Help, ListsEveryCommandWithItsArguments) {
    Json args;
    CommandTable t = sample_table(&args);
    std::string h = t.help_text();
    EXPECT_NE(h.find("migrate_set_capability capability state [extra]"), std::string::npos);
    EXPECT_NE(h.find("info status"), std::string::npos);
}

}  // namespace vmm::monitor
