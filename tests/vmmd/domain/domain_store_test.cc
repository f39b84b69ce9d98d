#include "vmmd/domain/domain_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "vmmd/domain/domain_xml.h"

namespace vmmd {
namespace {

Uuid counter_uuid() {
    static uint8_t n = 0;
    Uuid u{};
    u[15] = ++n;
    return u;
}

DomainDef def(const std::string& name, uint8_t id) {
    std::string xml = "<domain type='vmm'><name>" + name + "</name><memory>4096</memory><os><kernel>idle</kernel></os></domain>";
    Uuid u{};
    u[0] = id;
    return *parse_domain_xml(xml, u);
}

class DomainStoreTest : public ::testing::Test {
protected:
    std::string dir_ = "/tmp/vmmd-store-" + std::to_string(::getpid());
    std::vector<std::string> warnings_;
    std::unique_ptr<DomainStore> open() {
        auto s = DomainStore::open(dir_, counter_uuid, [this](const std::string& w) { warnings_.push_back(w); });
        EXPECT_TRUE(s) << s.error().message();
        return s ? std::move(*s) : nullptr;
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
};

TEST_F(DomainStoreTest, DefinitionsSurviveARestart) {
    {
        auto s = open();
        ASSERT_TRUE(s->define(def("a", 1)));
        ASSERT_TRUE(s->define(def("b", 2)));
        ASSERT_TRUE(s->undefine(def("b", 2).uuid));
    }
    auto s = open();
    ASSERT_EQ(s->list().size(), 1u);
    EXPECT_EQ(s->by_name("a")->def.uuid, def("a", 1).uuid);
    EXPECT_FALSE(s->by_name("b"));
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/domains/" + format_uuid(def("a", 1).uuid) + ".xml.new"));
}

TEST_F(DomainStoreTest, NamesAndUuidsStayPaired) {
    auto s = open();
    ASSERT_TRUE(s->define(def("a", 1)));
    auto clash = s->define(def("a", 9));
    ASSERT_FALSE(clash);
    EXPECT_NE(clash.error().message().find("already exists with uuid"), std::string::npos);
    auto renamed = s->define(def("z", 1));
    ASSERT_FALSE(renamed);
    EXPECT_NE(renamed.error().message().find("already has uuid"), std::string::npos);
    EXPECT_TRUE(s->define(def("a", 1))) << "a new definition of the same domain";
}

TEST_F(DomainStoreTest, AFileThatNoLongerParsesIsSkippedAndKept) {
    { open(); }
    std::string bad = dir_ + "/domains/broken.xml";
    std::ofstream(bad) << "<domain type='vmm'><name>x";
    auto s = open();
    EXPECT_TRUE(s->list().empty());
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("broken.xml: skipped"), std::string::npos) << warnings_[0];
    EXPECT_TRUE(std::filesystem::exists(bad));
}

TEST_F(DomainStoreTest, AutostartIsKeptAcrossARestartAndGoesWithTheDefinition) {
    auto s = open();
    ASSERT_TRUE(s->define(def("a", 1)));
    ASSERT_TRUE(s->set_autostart(def("a", 1).uuid, true));
    EXPECT_TRUE(s->by_name("a")->autostart);
    s = open();
    EXPECT_TRUE(s->by_name("a")->autostart);
    ASSERT_TRUE(s->set_autostart(def("a", 1).uuid, false));
    EXPECT_FALSE(open()->by_name("a")->autostart);
    ASSERT_TRUE(s->set_autostart(def("a", 1).uuid, true));
    ASSERT_TRUE(s->undefine(def("a", 1).uuid));
    EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/autostart"));
    ASSERT_TRUE(s->add_transient(def("t", 2)));
    auto refused = s->set_autostart(def("t", 2).uuid, true);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("transient"), std::string::npos);
}

TEST_F(DomainStoreTest, EditsGoLiveOrToTheNextStartAndARefusedOneChangesNothing) {
    auto s = open();
    DomainDef a = def("a", 1);
    ASSERT_TRUE(s->define(a));
    auto title = [](std::string t) { return [t](DomainDef& d) -> vmm::Status { d.title = t; return {}; }; };
    EXPECT_FALSE(s->edit(a.uuid, true, false, title("x")));  // not running
    ASSERT_TRUE(s->edit(a.uuid, false, true, title("stopped")));
    EXPECT_EQ(s->by_uuid(a.uuid)->def.title, "stopped");
    EXPECT_EQ(open()->by_uuid(a.uuid)->def.title, "stopped");  // on disk
    s->set_running(a.uuid, 7, {}, s->by_uuid(a.uuid)->def);
    ASSERT_TRUE(s->edit(a.uuid, true, false, title("live")));
    ASSERT_TRUE(s->edit(a.uuid, false, true, title("next")));
    EXPECT_EQ(s->by_uuid(a.uuid)->def.title, "live");
    EXPECT_EQ(s->config_of(a.uuid)->title, "next");
    EXPECT_FALSE(s->edit(a.uuid, true, true, [](DomainDef&) -> vmm::Status { return vmm::Error("no"); }));
    EXPECT_EQ(s->by_uuid(a.uuid)->def.title, "live");
    s->set_stopped(a.uuid, {});
    EXPECT_EQ(s->by_uuid(a.uuid)->def.title, "next");
    ASSERT_TRUE(s->add_transient(def("t", 2)));
    EXPECT_FALSE(s->edit(def("t", 2).uuid, false, true, title("x")));  // no persistent definition
    EXPECT_FALSE(s->config_of(def("t", 2).uuid));
}

TEST_F(DomainStoreTest, AGuardedDefinitionHoldsStillAndANewOneIsStillTaken) {
    auto s = open();
    DomainDef a = def("a", 1);
    ASSERT_TRUE(s->define(a));
    s->set_guard([&a](const Uuid& u) -> std::optional<std::string> {
        if (u == a.uuid) return "migrating";
        return std::nullopt;
    });
    EXPECT_FALSE(s->define(a));
    EXPECT_FALSE(s->undefine(a.uuid));
    EXPECT_FALSE(s->set_autostart(a.uuid, true));
    auto refused = s->edit(a.uuid, false, true, [](DomainDef& d) -> vmm::Status { d.title = "x"; return {}; });
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().message(), "migrating");
    EXPECT_TRUE(s->define(def("b", 2)));  // another domain
    s->set_guard(nullptr);
    EXPECT_TRUE(s->undefine(a.uuid));
}

TEST_F(DomainStoreTest, ATransientDomainIsForgottenWhenItStops) {
    auto s = open();
    ASSERT_TRUE(s->define(def("p", 1)));
    EXPECT_FALSE(s->add_transient(def("p", 2))) << "a name in use";
    EXPECT_FALSE(s->add_transient(def("q", 1))) << "a UUID in use";
    auto t = s->add_transient(def("t", 3));
    ASSERT_TRUE(t) << t.error().message();
    EXPECT_FALSE(t->persistent);
    s->set_running(def("t", 3).uuid, 7, {1, 1}, def("t", 3));
    EXPECT_EQ(s->by_id(7)->def.name, "t");
    s->set_stopped(def("t", 3).uuid, {5, 2});
    EXPECT_FALSE(s->by_name("t"));
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/domains/" + format_uuid(def("t", 3).uuid) + ".xml"));
}

TEST_F(DomainStoreTest, ADefinitionGivenWhileRunningWaitsForTheNextStart) {
    auto s = open();
    DomainDef first = def("a", 1), second = def("a", 1);
    second.vcpus = 4;
    ASSERT_TRUE(s->define(first));
    s->set_running(first.uuid, 1, {1, 1}, first);
    ASSERT_TRUE(s->define(second));
    EXPECT_EQ(s->by_uuid(first.uuid)->def.vcpus, 1u) << "the running process keeps its definition";
    s->set_state(first.uuid, {3, 1});
    EXPECT_EQ(s->by_uuid(first.uuid)->state, (DomainState{3, 1}));
    s->set_stopped(first.uuid, {5, 1});
    auto v = s->by_uuid(first.uuid);
    EXPECT_EQ(v->def.vcpus, 4u);
    EXPECT_EQ(v->state, (DomainState{5, 1}));
    EXPECT_FALSE(v->active());
    s->set_state(first.uuid, {1, 1});
    EXPECT_EQ(s->by_uuid(first.uuid)->state, (DomainState{5, 1})) << "a state change of a domain that does not run";
}

TEST_F(DomainStoreTest, ARunningDomainUndefinedBecomesTransient) {
    auto s = open();
    ASSERT_TRUE(s->define(def("a", 1)));
    s->set_running(def("a", 1).uuid, 2, {1, 1}, def("a", 1));
    ASSERT_TRUE(s->undefine(def("a", 1).uuid));
    EXPECT_FALSE(s->by_name("a")->persistent);
    s->set_stopped(def("a", 1).uuid, {5, 1});
    EXPECT_FALSE(s->by_name("a"));
}

TEST_F(DomainStoreTest, TwoFilesWithOneNameLoadOnceAndTheOtherIsNamed) {
    {
        auto s = open();
        ASSERT_TRUE(s->define(def("a", 1)));
    }
    // A second file for 'a' with another UUID, as a hand copy would make.
    std::string copy = dir_ + "/domains/" + format_uuid(def("a", 2).uuid) + ".xml";
    std::ofstream(copy) << format_domain_xml(def("a", 2));
    auto s = open();
    EXPECT_EQ(s->list().size(), 1u);
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("already defined with uuid"), std::string::npos) << warnings_[0];
    EXPECT_NE(warnings_[0].find(copy), std::string::npos) << warnings_[0];
}

TEST_F(DomainStoreTest, MakesItsDirectoriesPrivateWhateverTheUmaskAndReadsOnlyItsOwnFiles) {
    mode_t old = ::umask(0);
    {
        auto s = open();
        ASSERT_TRUE(s->define(def("a", 1)));
    }
    ::umask(old);
    for (const std::string& d : {dir_, dir_ + "/domains"})
        EXPECT_EQ(std::filesystem::status(d).permissions() & std::filesystem::perms::all, std::filesystem::perms::owner_all) << d;
    std::string file = dir_ + "/domains/" + format_uuid(def("a", 1).uuid) + ".xml";
    std::filesystem::permissions(file, std::filesystem::perms::group_write, std::filesystem::perm_options::add);
    auto s = open();
    EXPECT_TRUE(s->list().empty());
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("can be written by its group"), std::string::npos) << warnings_[0];
}

}  // namespace
}  // namespace vmmd
