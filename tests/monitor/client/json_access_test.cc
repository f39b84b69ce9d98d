// Reading a client's JSON without throwing, and a QMP session's protocol over a real dispatcher.
#include <gtest/gtest.h>

#include <string>

#include "vmm/monitor/client/json_access.h"
#include "vmm/monitor/qmp_session.h"

namespace vmm::monitor {

TEST(JsonAccess, WrongTypesAndMissingMembersAreNulloptNeverAThrow) {
    Json j = Json::parse(R"({"s":"x","n":-3,"u":7,"f":1.5,"b":true,"o":{"k":1}})");
    EXPECT_EQ(string_member(j, "s"), "x");
    EXPECT_EQ(string_member(j, "n"), std::nullopt);
    EXPECT_EQ(uint_member(j, "u"), 7u);
    EXPECT_EQ(uint_member(j, "n"), std::nullopt) << "a negative number is not unsigned";
    EXPECT_EQ(int_member(j, "n"), -3);
    EXPECT_EQ(number_member(j, "f"), 1.5);
    EXPECT_EQ(number_member(j, "u"), 7.0);
    EXPECT_EQ(bool_member(j, "b"), true);
    EXPECT_EQ(bool_member(j, "s"), std::nullopt);
    EXPECT_EQ(member(j, "missing"), nullptr);
    EXPECT_EQ(member(Json(42), "s"), nullptr) << "not an object";
    EXPECT_TRUE(child(child(j, "missing"), "deeper").is_null());
    EXPECT_EQ(u64(child(j, "o"), "k"), 1u);
    EXPECT_EQ(str(Json::array(), "s", "fallback"), "fallback");
}

TEST(JsonAccess, ParseRequestRefusesTooDeepAndTooLongBeforeAnythingRecursesOverIt) {
    auto nested = [](size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
    EXPECT_TRUE(parse_request(nested(kMaxJsonDepth)));
    auto deep = parse_request(nested(kMaxJsonDepth + 1));
    ASSERT_FALSE(deep);
    EXPECT_EQ(deep.error().message(), "request nests deeper than 1024 levels");
    EXPECT_FALSE(parse_request("{\"id\":" + nested(100000) + "}"));
    EXPECT_FALSE(parse_request(R"({"a":)" + std::string(kMaxRequestBytes, ' ') + "1}"));
    EXPECT_EQ(parse_request("{not json").error().message(), "JSON parse error");
    EXPECT_FALSE(parse_request("\"\xff\"")) << "not UTF-8";
}

// As QEMU's parser: a key twice in one object is an error, not "the last one wins".
TEST(JsonAccess, ParseRequestRefusesAKeyTwiceInOneObject) {
    auto twice = parse_request(R"({"execute": "query-status", "execute": "quit"})");
    ASSERT_FALSE(twice);
    EXPECT_EQ(twice.error().message(), "the key 'execute' appears twice in one object");
    EXPECT_FALSE(parse_request(R"({"execute": "x", "arguments": {"a": 1, "b": [{"c": 1, "c": 2}]}})"));
    // The same key in sibling or nested objects is fine.
    EXPECT_TRUE(parse_request(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}], "c": {"a": {"a": 3}}})"));
}

TEST(JsonAccess, AGuestsBytesThatAreNotUtf8AreReplacedInAReplyLine) {
    Json j{{"last-message", std::string("ok \xff\xfe end")}};
    std::string line = to_line(j);
    EXPECT_NE(line.find("ok \xEF\xBF\xBD"), std::string::npos) << line;
    EXPECT_EQ(line.back(), '\n');
}

class QmpSessionTest : public ::testing::Test {
protected:
    void SetUp() override {
        dispatcher.table().add({"", "echo", {{"text", ArgType::string}, {"n", ArgType::integer, true}}, "echo",
                                [](const Json& a) -> Result<Json> { return Json{{"text", str(a, "text")}, {"n", u64(a, "n")}}; },
                                {}});
        dispatcher.table().add({"", "poke", {}, "emits an event", [this](const Json&) -> Result<Json> {
                                    dispatcher.emit("POKED");
                                    return Json::object();
                                },
                                {}});
    }
    Json reply(QmpSession& s, const std::string& line) { return Json::parse(s.handle(line)); }
    Dispatcher dispatcher;
    std::vector<std::string> events;
};

TEST_F(QmpSessionTest, NegotiationFirstThenCommandsWithTheirIdsAndEvents) {
    QmpSession s(dispatcher, [this](const std::string& e) { events.push_back(e); });
    EXPECT_EQ(reply(s, R"({"execute":"echo","arguments":{"text":"a"}})")["error"]["class"], "CommandNotFound");
    EXPECT_EQ(reply(s, R"({"execute":42,"id":1})")["error"]["class"], "CommandNotFound");
    EXPECT_EQ(reply(s, R"({"execute":"qmp_capabilities","id":"n"})"), Json::parse(R"({"id":"n","return":{}})"));
    EXPECT_EQ(reply(s, R"({"execute":42,"id":1})"), Json::parse(R"({"id":1,"error":{"class":"GenericError","desc":"expected an object with \"execute\" naming a command"}})"));
    EXPECT_EQ(reply(s, R"({"execute":"qmp_capabilities"})")["error"]["class"], "CommandNotFound");
    EXPECT_EQ(reply(s, R"({"execute":"echo","arguments":{"text":"a","n":2},"id":[1]})"),
              Json::parse(R"({"id":[1],"return":{"text":"a","n":2}})"));
    EXPECT_EQ(reply(s, R"({"execute":"echo","arguments":{"text":5}})")["error"]["desc"], "parameter 'text' has the wrong type");
    EXPECT_EQ(reply(s, R"({"execute":"echo","arguments":{"text":"a","n":-1}})")["error"]["desc"], "parameter 'n' has the wrong type");
    EXPECT_EQ(reply(s, R"({"execute":"echo","arguments":"x"})")["error"]["desc"], "'arguments' must be an object");
    EXPECT_EQ(reply(s, R"({"execute":"echo"})")["error"]["desc"], "parameter 'text' is missing");
    EXPECT_EQ(reply(s, R"([])")["error"]["class"], "GenericError");
    EXPECT_EQ(s.handle("   "), "");
    EXPECT_TRUE(events.empty());
    EXPECT_TRUE(reply(s, R"({"execute":"poke"})").contains("return"));
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(Json::parse(events[0])["event"], "POKED");
}

TEST_F(QmpSessionTest, AClosedSessionNoLongerGetsEvents) {
    {
        QmpSession s(dispatcher, [this](const std::string& e) { events.push_back(e); });
        EXPECT_TRUE(reply(s, R"({"execute":"qmp_capabilities"})").contains("return"));
    }
    QmpSession other(dispatcher, [](const std::string&) {});
    EXPECT_TRUE(reply(other, R"({"execute":"qmp_capabilities"})").contains("return"));
    EXPECT_TRUE(reply(other, R"({"execute":"poke"})").contains("return"));
    EXPECT_TRUE(events.empty());
}

TEST(QmpSessionLimits, TheOverLongAnswerIsAnErrorLine) {
    Json j = Json::parse(QmpSession::too_long(65536));
    EXPECT_EQ(j["error"]["desc"], "request line longer than 65536 bytes: the session is closed");
}

}  // namespace vmm::monitor
