#include "vmm/config/cli.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <vector>

namespace vmm::config {

namespace {
Result<CommandLine> parse(std::vector<const char*> args) {
    args.insert(args.begin(), "vmm");
    return parse_command_line(static_cast<int>(args.size()), args.data());
}
}  // namespace

TEST(CommandLine, TheIssueExampleParses) {
    auto cl = parse({"--guest", "stress", "-m", "256M", "--smp", "2", "--monitor", "unix:/tmp/m.sock"});
    ASSERT_TRUE(cl) << cl.error().message();
    EXPECT_EQ(cl->config.payload, "stress");
    EXPECT_EQ(effective_ram(cl->config)[0].size, 256ull << 20);
    EXPECT_EQ(cl->config.vcpus, 2u);
    EXPECT_EQ(cl->config.hmp.path, "/tmp/m.sock");
    EXPECT_FALSE(cl->config.start_paused);
}

TEST(CommandLine, OverridesApplyOnTopOfTheConfigFile) {
    std::string path = ::testing::TempDir() + "/cli_test.toml";
    {
        std::ofstream f(path);
        f << "[machine]\nname = \"from-file\"\nvcpus = 4\n[[ram]]\nname = \"r0\"\nsize = \"64M\"\n[[ram]]\nname = \"r1\"\n"
             "address = \"1G\"\nsize = \"64M\"\n";
    }
    auto cl = parse({"--config", path.c_str(), "--smp", "1", "-m", "128M", "-S", "--name", "cli", "--mem-prealloc"});
    ASSERT_TRUE(cl) << cl.error().message();
    EXPECT_EQ(cl->config.name, "cli");
    EXPECT_EQ(cl->config.vcpus, 1u);
    EXPECT_TRUE(cl->config.start_paused);
    ASSERT_EQ(cl->config.ram.size(), 2u);
    EXPECT_EQ(cl->config.ram[0].size, 128ull << 20);  // -m sizes the first block
    EXPECT_EQ(cl->config.ram[1].size, 64ull << 20);
    EXPECT_TRUE(cl->config.ram[0].prealloc && cl->config.ram[1].prealloc) << "--mem-prealloc covers every block";
    std::remove(path.c_str());
}

TEST(CommandLine, BadValuesAreOneLineErrors) {
    for (auto args : std::vector<std::vector<const char*>>{{"--smp", "x"}, {"-m", "lots"}, {"--monitor", "tcp:x"},
                                                           {"--qmp", "stdio"}, {"--serial", "printer"},
                                                           {"--dirty-tracking", "magic"}, {"--bogus"},
                                                           {"--append", "noequals"}, {"--smp", "1000"},
                                                           {"--smp", "0"}, {"--smp", "-1"},
                                                           {"--monitor", "unix:/tmp/m.sock,mode=888"},
                                                           {"--monitor", "unix:/tmp/m.sock,mode=0066"},
                                                           {"--qmp", "unix:,mode=0600"}}) {
        auto cl = parse(args);
        ASSERT_FALSE(cl) << args[0];
        EXPECT_EQ(cl.error().message().find('\n'), std::string::npos) << cl.error().message();
    }
}

TEST(CommandLine, MonitorSocketsAreOwnerOnlyUnlessAModeIsGiven) {
    auto cl = parse({"--monitor", "unix:/tmp/m.sock", "--qmp", "unix:/tmp/q,x.sock,mode=660"});
    ASSERT_TRUE(cl) << cl.error().message();
    EXPECT_EQ(cl->config.hmp.path, "/tmp/m.sock");
    EXPECT_EQ(cl->config.hmp.mode, 0600u);
    EXPECT_EQ(cl->config.qmp.path, "/tmp/q,x.sock");
    EXPECT_EQ(cl->config.qmp.mode, 0660u);
    EXPECT_EQ(to_string(cl->config.qmp), "unix:/tmp/q,x.sock,mode=0660");
}

TEST(CommandLine, HelpAndVersionExitWithText) {
    auto h = parse({"--help"});
    ASSERT_TRUE(h);
    EXPECT_TRUE(h->exit_now);
    EXPECT_NE(h->text.find("--monitor"), std::string::npos);
    auto v = parse({"--version"});
    ASSERT_TRUE(v);
    EXPECT_EQ(v->text.rfind("vmm ", 0), 0u);
}

}  // namespace vmm::config
