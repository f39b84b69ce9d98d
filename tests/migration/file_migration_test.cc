// Saving a guest to a file and restoring it (migrate file:PATH, --incoming file:PATH), through the
// real vmm binary: the restored RAM equals the saver's, the pattern guest's own check passes on
// the restored copy, the saver runs on, the file is as sparse as the guest, and every damaged or
// wrong file is refused in one line while a full disk leaves no file behind; mapped restores
// (x-restore-mapped): clones share what they did not write, a damaged page ends the guest.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "tests/support/kvm_fixture.h"
#include "tests/support/require.h"
#include "tests/support/vm_pair.h"
#include "vmm/migration/wire/file_format.h"

namespace vmm::test {

namespace {

using namespace std::chrono_literals;
using migration::kFileHeaderSize;

struct Refusal {
    std::optional<int> status;
    std::string log;
};

// vmm --incoming file:PATH for a machine of `mem`: how it ended, and what it said. `read_first`:
// with x-restore-lazy off (from a config file), every page read and checked before the guest runs.
Refusal restore_expecting_failure(const std::string& name, const std::string& uri, const std::string& mem = "64M",
                                  bool read_first = false) {
    std::string log = temp_path(name + ".log");
    std::vector<std::string> args{"-m", mem, "--smp", "1", "-S", "--incoming", uri, "--monitor", "none", "--serial", "none"};
    if (read_first) {
        std::string config = temp_path(name + ".toml");
        std::ofstream(config) << "[migration.capabilities]\nx-restore-lazy = false\n";
        args.insert(args.end(), {"--config", config});
    }
    auto p = VmmProcess::spawn(args, log);
    Refusal r;
    if (p) r.status = p->wait(60s);
    r.log = read_text_file(log);
    return r;
}

void expect_refused(const Refusal& r, const std::string& why) {
    ASSERT_TRUE(r.status) << "vmm did not end on a bad file:\n" << r.log;
    EXPECT_NE(*r.status, 0) << r.log;
    EXPECT_NE(r.log.find(why), std::string::npos) << r.log;
    size_t errors = 0;
    for (size_t at = r.log.find("error:"); at != std::string::npos; at = r.log.find("error:", at + 1)) ++errors;
    EXPECT_EQ(errors, 1u) << "one line says why:\n" << r.log;
}

// A paused 64 MiB guest saved to `path`: its RAM digest at the save.
std::string save_paused(const std::string& name, const std::string& uri) {
    auto src = Vm::start(name, {"--guest", "idle", "-m", "64M", "--smp", "1", "--prefill", "8M"});
    if (!src) return "";
    EXPECT_EQ(src->cmd("stop"), "");
    std::string out = src->cmd("migrate " + uri);
    EXPECT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    EXPECT_EQ(src->status(), "paused") << "a paused guest stays paused after its save";
    return src->ramhash();
}

void flip_byte(const std::string& path, uint64_t at) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(~c);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&c, 1);
}

}  // namespace

TEST(FileMigration, APatternGuestSavedWhileItRunsRestoresWithItsOwnCheckClean) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("pattern.save");
    auto src = Vm::start("file-pattern-src", {"--guest", "pattern", "-m", "128M", "--smp", "1", "--append",
                                              "bytes=32M check=512"});
    ASSERT_TRUE(src);
    ASSERT_TRUE(eventually([&] { return src->guest_value("results") >= 1; }, 60)) << src->cmd("info guest");
    std::string out = src->cmd("migrate file:" + path);
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    EXPECT_EQ(src->status(), "running") << "the saver runs on";
    uint64_t steps = src->guest_value("steps");
    EXPECT_TRUE(eventually([&] { return src->guest_value("steps") > steps; }, 60)) << "the saver's guest stopped";
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    std::cout << "saved a 128 MiB guest in " << st.st_blocks * 512 / 1024 << " KiB of disk (file size "
              << st.st_size / 1024 << " KiB); " << text_field(out, "total time") << "\n";
    EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 64ull << 20) << "the file is as sparse as the guest";
    auto dst = destination("file-pattern-dst", "file:" + path, "128M", "1");
    ASSERT_TRUE(dst);
    ASSERT_TRUE(eventually([&] { return dst->status() == "paused"; }, 30)) << dst->status() << dst->log();
    uint64_t results = dst->guest_value("results");
    ASSERT_EQ(dst->cmd("cont"), "");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("results") >= results + 2; }, 60))
        << "the pattern check did not pass again on the restored guest:\n" << dst->cmd("info guest");
    EXPECT_EQ(dst->guest_value("errors"), 0u) << dst->cmd("info guest");
    std::filesystem::remove(path);
}

TEST(FileMigration, ARestoredGuestsRamEqualsTheSaversAtItsPause) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("stress.save");
    auto src = Vm::start("file-stress-src", {"--guest", "stress", "-m", "128M", "--smp", "2", "--append", "bytes=16M"});
    ASSERT_TRUE(src);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
    std::string out = src->cmd("migrate file:" + path);  // live: rounds rewrite the pages the guest dirtied
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    ASSERT_EQ(src->cmd("stop"), "");
    out = src->cmd("migrate file:" + path);  // and again, over the first file, with the guest paused
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out;
    auto dst = destination("file-stress-dst", "file:" + path, "128M", "2");
    ASSERT_TRUE(dst);
    ASSERT_TRUE(eventually([&] { return dst->status() == "paused"; }, 30)) << dst->log();
    EXPECT_EQ(src->ramhash(), dst->ramhash());
    EXPECT_EQ(dst->migrate_status(), "completed") << dst->cmd("info migrate");
    uint64_t steps = dst->guest_value("steps");
    ASSERT_EQ(dst->cmd("cont"), "");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("steps") > steps + 1; }, 60)) << "the restored guest did not run";
    EXPECT_EQ(dst->guest_value("errors"), 0u);
    std::filesystem::remove(path);
}

TEST(FileMigration, ASaveAtAnOffsetLeavesTheBytesBeforeItAndRestoresFromThere) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("offset.save");
    std::ofstream(path) << "a header of someone else's, before the save";
    std::string hash = save_paused("file-offset-src", "file:" + path + ",offset=8192");
    std::ifstream in(path);
    std::string first;
    std::getline(in, first);
    EXPECT_EQ(first.substr(0, 43), "a header of someone else's, before the save");
    auto dst = destination("file-offset-dst", "file:" + path + ",offset=8192", "64M", "1");
    ASSERT_TRUE(dst);
    ASSERT_TRUE(eventually([&] { return dst->status() == "paused"; }, 30)) << dst->log();
    EXPECT_EQ(dst->ramhash(), hash);
    std::filesystem::remove(path);
}

TEST(FileMigration, AWrongOrDamagedFileIsRefusedInOneLine) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("good.save"), bad = temp_path("bad.save");
    ASSERT_FALSE(save_paused("file-refuse-src", "file:" + path).empty());
    auto variant = [&](auto&& change) {
        std::filesystem::copy_file(path, bad, std::filesystem::copy_options::overwrite_existing);
        change();
    };
    variant([] {});
    expect_refused(restore_expecting_failure("file-ram", "file:" + bad, "128M"), "holds a guest with 1 block(s), 64 MiB of RAM; this machine has 1 block(s), 128 MiB");
    variant([&] { std::filesystem::resize_file(bad, std::filesystem::file_size(bad) - 100); });
    expect_refused(restore_expecting_failure("file-short", "file:" + bad), "is truncated");
    variant([&] { flip_byte(bad, kFileHeaderSize + 3 * 4096 + 77); });  // a data page of the prefilled 8 MiB
    expect_refused(restore_expecting_failure("file-flip", "file:" + bad),
                   "block 'pc.ram', page at offset 0x3000: its contents do not match the sum saved with it");
    // Read first, in pieces on several threads: a page in a later piece, and one in the first.
    variant([&] { flip_byte(bad, kFileHeaderSize + 0x7ff000 + 1); });
    expect_refused(restore_expecting_failure("file-flip-read", "file:" + bad, "64M", true),
                   "block 'pc.ram', page at offset 0x7ff000: its contents do not match the sum saved with it");
    variant([&] {
        flip_byte(bad, kFileHeaderSize + 0x7ff000 + 1);
        flip_byte(bad, kFileHeaderSize + 0x2000);
    });
    // Before the guest runs: the incoming migration itself fails (a lazy restore's would complete).
    expect_refused(restore_expecting_failure("file-flip-read2", "file:" + bad, "64M", true),
                   "incoming migration failed: file:" + bad + ": block 'pc.ram', page at offset 0x2000: its contents do not match");
    variant([&] { flip_byte(bad, 8); });  // the version
    expect_refused(restore_expecting_failure("file-version", "file:" + bad), "saved guest of format version 254; this vmm reads version 1");
    variant([&] { flip_byte(bad, 40); });  // inside the header's body
    expect_refused(restore_expecting_failure("file-header", "file:" + bad), "its header is damaged");
    variant([&] { flip_byte(bad, std::filesystem::file_size(bad) - 20); });  // the device state
    expect_refused(restore_expecting_failure("file-state", "file:" + bad), "its stream (the device state) is damaged");
    std::ofstream(bad) << "hello";
    expect_refused(restore_expecting_failure("file-foreign", "file:" + bad), "too short to be a saved guest");
    std::filesystem::remove(path);
    std::filesystem::remove(bad);
}

// A pattern guest (`append`) that checked its memory once, paused and saved to `path`: the RAM
// digest it was saved with ("" when something failed, said by the test's expectations).
std::string save_pattern_guest(const std::string& name, const std::string& path, const std::string& mem,
                               const std::string& append, const std::string& prefill) {
    auto src = Vm::start(name, {"--guest", "pattern", "-m", mem, "--smp", "1", "--append", append, "--prefill", prefill});
    if (!src) return "";
    if (!eventually([&] { return src->guest_value("results") >= 1; }, 60)) return ADD_FAILURE() << src->cmd("info guest"), "";
    EXPECT_EQ(src->cmd("stop"), "");
    std::string out = src->cmd("migrate file:" + path);
    if (out.find("Migration status: completed") == std::string::npos) return ADD_FAILURE() << out, "";
    return src->ramhash();
}

// A restore that maps its file (x-restore-mapped), set on a destination that waits (--incoming defer).
std::unique_ptr<Vm> mapped_restore(const std::string& name, const std::string& path, const std::string& mem) {
    auto dst = Vm::start(name, {"-m", mem, "--smp", "1", "-S", "--incoming", "defer"});
    if (!dst) return nullptr;
    EXPECT_EQ(dst->cmd("migrate_set_capability x-restore-mapped on"), "");
    EXPECT_EQ(dst->cmd("migrate_incoming file:" + path), "");
    EXPECT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->log();
    return dst;
}

uint64_t smaps_kib(pid_t pid, const std::string& field) {
    std::string text = read_text_file("/proc/" + std::to_string(pid) + "/smaps_rollup");
    size_t at = text.find("\n" + field + ":");
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + field.size() + 2));
}

// Four clones of one file restored side by side, each mapping it: each starts with the saved
// RAM, runs its own pattern check clean with its own writes, and what none of them wrote is held
// once in the page cache, not four times.
TEST(FileMigration, FourClonesMappedFromOneFileRunApartAndShareWhatTheyDidNotWrite) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("clones.save");
    std::string saved = save_pattern_guest("file-clone-src", path, "128M", "bytes=8M check=512", "64M");
    ASSERT_FALSE(saved.empty());
    std::vector<std::unique_ptr<Vm>> clones;
    for (int i = 0; i < 4; ++i) {
        clones.push_back(mapped_restore("file-clone-" + std::to_string(i), path, "128M"));
        ASSERT_TRUE(clones.back());
        EXPECT_EQ(clones.back()->ramhash(), saved) << "clone " << i << " starts from the saved RAM";
    }
    for (auto& c : clones) {
        uint64_t results = c->guest_value("results");
        ASSERT_EQ(c->cmd("cont"), "");
        EXPECT_TRUE(eventually([&] { return c->guest_value("results") >= results + 2; }, 60)) << c->cmd("info guest");
        EXPECT_EQ(c->guest_value("errors"), 0u) << c->cmd("info guest");
    }
    uint64_t rss = 0, pss = 0, dirty = 0;
    for (auto& c : clones) {
        pid_t pid = c->process().pid();
        rss += smaps_kib(pid, "Rss");
        pss += smaps_kib(pid, "Pss");
        dirty += smaps_kib(pid, "Private_Dirty");
    }
    std::cout << "four clones of a 128 MiB guest (72 MiB of it data): Rss " << rss / 1024 << " MiB in all, Pss "
              << pss / 1024 << " MiB (what they hold between them), written by each " << dirty / 4 << " KiB\n";
    EXPECT_LT(pss * 2, rss) << "the clones share what they did not write";
    for (auto& c : clones) EXPECT_NE(c->log().find("matches its sum"), std::string::npos) << c->log();
    std::filesystem::remove(path);
}

// A mapped guest saved again: every page of it goes (pagemap cannot see file pages it never
// touched), and the second file restores to the same RAM.
TEST(FileMigration, AMappedGuestSavedAgainKeepsThePagesItNeverTouched) {
    VMM_REQUIRE(need::kvm());
    std::string first = temp_path("first.save"), second = temp_path("second.save");
    std::string hash = save_paused("file-again-src", "file:" + first);
    auto mapped = mapped_restore("file-again-mapped", first, "64M");
    ASSERT_TRUE(mapped);
    std::string out = mapped->cmd("migrate file:" + second);
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out;
    auto dst = destination("file-again-dst", "file:" + second, "64M", "1");
    ASSERT_TRUE(dst);
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->log();
    EXPECT_EQ(dst->ramhash(), hash);
    std::filesystem::remove(first);
    std::filesystem::remove(second);
}

// A damaged page under a mapped restore: the guest may already run, and the check ends it,
// naming the page, in one line.
TEST(FileMigration, AMappedRestoreOfADamagedFileEndsTheGuestNamingThePage) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("mapped-bad.save");
    ASSERT_FALSE(save_paused("file-mapbad-src", "file:" + path).empty());
    flip_byte(path, kFileHeaderSize + 5 * 4096 + 9);
    auto dst = Vm::start("file-mapbad-dst", {"-m", "64M", "--smp", "1", "-S", "--incoming", "defer"});
    ASSERT_TRUE(dst);
    EXPECT_EQ(dst->cmd("migrate_set_capability x-restore-mapped on"), "");
    dst->cmd("migrate_incoming file:" + path);
    auto ended = dst->process().wait(30s);
    ASSERT_TRUE(ended) << "the check did not end the guest: " << dst->log();
    EXPECT_EQ(*ended, 1);
    EXPECT_NE(dst->log().find("whose check found it damaged: file:" + path +
                              ": block 'pc.ram', page at offset 0x5000: its contents do not match"),
              std::string::npos)
        << dst->log();
    dst->forget_monitor();
    std::filesystem::remove(path);
}

// A command's standard output and error.
std::string run_tool(const std::string& command) {
    std::string out;
    if (FILE* p = ::popen((command + " 2>&1").c_str(), "r")) {
        char buf[4096];
        for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
        ::pclose(p);
    }
    return out;
}

// The file a guest's RAM is mapped from, truncated under it (by another process, as a tidy-up
// script would): vmm copies the RAM out of it before the truncation may go on, so the paused
// guest still holds exactly the saved RAM, nothing reads past the file's end (SIGBUS), and the
// guest runs on clean.
TEST(FileMigration, AMappedRestoreWhoseFileIsTruncatedKeepsTheSavedRam) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("mapped-cut.save");
    std::string saved = save_pattern_guest("file-mapcut-src", path, "64M", "bytes=4M check=256", "16M");
    ASSERT_FALSE(saved.empty());
    auto dst = mapped_restore("file-mapcut-dst", path, "64M");
    ASSERT_TRUE(dst);
    // truncate(2) waits while vmm copies (truncate(1) opens with O_NONBLOCK: it would be told to try again).
    EXPECT_EQ(::truncate(path.c_str(), 4096), 0) << std::strerror(errno);
    EXPECT_EQ(std::filesystem::file_size(path), 4096u);
    EXPECT_EQ(dst->ramhash(), saved) << "the guest's RAM changed with its file: " << dst->log();
    EXPECT_NE(dst->log().find("copying the RAM out of it first"), std::string::npos) << dst->log();
    uint64_t results = dst->guest_value("results");
    ASSERT_EQ(dst->cmd("cont"), "");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("results") >= results + 2; }, 60)) << dst->cmd("info guest");
    EXPECT_EQ(dst->guest_value("errors"), 0u) << dst->cmd("info guest");
    EXPECT_EQ(dst->status(), "running");
    std::filesystem::remove(path);
}

// A file that another process has open for writing could change under the guest at any time:
// it is not mapped, and the restore says so in one line.
TEST(FileMigration, AFileOpenForWritingElsewhereIsNotMapped) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("mapped-open.save");
    ASSERT_FALSE(save_paused("file-mapopen-src", "file:" + path).empty());
    pid_t writer = ::fork();
    ASSERT_GE(writer, 0);
    if (writer == 0) {  // another process, holding the file open for writing until killed
        int fd = ::open(path.c_str(), O_WRONLY);
        (void)fd;
        ::pause();
        ::_exit(0);
    }
    auto dst = Vm::start("file-mapopen-dst", {"-m", "64M", "--smp", "1", "-S", "--incoming", "defer"});
    ASSERT_TRUE(dst);
    ASSERT_TRUE(eventually([&] {
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(writer) + "/fd", ec))
            if (std::filesystem::read_symlink(e.path(), ec) == path) return true;
        return false;
    }, 10));
    EXPECT_EQ(dst->cmd("migrate_set_capability x-restore-mapped on"), "");
    dst->cmd("migrate_incoming file:" + path);
    auto ended = dst->process().wait(30s);
    ::kill(writer, SIGKILL);
    ::waitpid(writer, nullptr, 0);
    ASSERT_TRUE(ended) << dst->log();
    EXPECT_EQ(*ended, 1);
    EXPECT_NE(dst->log().find("another process has it open for writing"), std::string::npos) << dst->log();
    EXPECT_NE(dst->log().find("restore it without x-restore-mapped"), std::string::npos) << dst->log();
    dst->forget_monitor();
    std::filesystem::remove(path);
}


uint64_t disk_kib(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) / 2 : 0;
}

// Incremental saves (file-base): a full save, then two that hold only what the guest dirtied
// since the one before, the last with the guest paused; the chain restores to the same RAM as a
// full save made at that moment, and costs a fraction of it on disk.
TEST(FileMigration, AnIncrementalChainOfThreeRestoresAsAFullSaveAtTheSameMoment) {
    VMM_REQUIRE(need::kvm());
    std::string a = temp_path("chain-a.save"), b = temp_path("chain-b.save"), c = temp_path("chain-c.save"),
                full = temp_path("chain-full.save");
    auto src = Vm::start("file-chain-src", {"--guest", "stress", "-m", "128M", "--smp", "1", "--append", "bytes=4M",
                                            "--prefill", "48M"});
    ASSERT_TRUE(src);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
    auto save = [&](const std::string& path, const std::string& base) {
        EXPECT_EQ(src->cmd("migrate_set_parameter file-base " + (base.empty() ? std::string("\"\"") : base)), "");
        std::string out = src->cmd("migrate file:" + path);
        EXPECT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    };
    save(a, "");
    uint64_t steps = src->guest_value("steps");
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") > steps + 1; }, 60)) << "the guest dirties its pages";
    save(b, a);
    ASSERT_EQ(src->cmd("stop"), "");
    save(c, b);
    std::string hash = src->ramhash();
    save(full, "");
    std::cout << "on disk: full " << disk_kib(a) << " KiB, then increments of " << disk_kib(b) << " and " << disk_kib(c)
              << " KiB; a full save at the end " << disk_kib(full) << " KiB\n";
    EXPECT_LT(disk_kib(c) * 4, disk_kib(full)) << "an increment holds what changed, not the guest";
    // vmm-snapshot shows the chain, and merges it into one full save.
    std::string merged = temp_path("chain-merged.save");
    std::string shown = run_tool(std::string(VMM_SNAPSHOT_BINARY) + " info " + c);
    EXPECT_NE(shown.find("incremental: builds on " + b), std::string::npos) << shown;
    EXPECT_NE(shown.find("incremental: builds on " + a), std::string::npos) << shown;
    EXPECT_NE(shown.find("a full save"), std::string::npos) << shown;
    std::string said = run_tool(std::string(VMM_SNAPSHOT_BINARY) + " merge " + c + " " + merged);
    EXPECT_NE(said.find("a full save of"), std::string::npos) << said;
    EXPECT_NE(run_tool(std::string(VMM_SNAPSHOT_BINARY) + " info " + merged).find("a full save"), std::string::npos);
    for (const std::string& f : {c, full, merged}) {
        auto dst = destination("file-chain-dst", "file:" + f, "128M", "1");
        ASSERT_TRUE(dst);
        ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->log();
        EXPECT_EQ(dst->ramhash(), hash) << f;
        if (f == c) {  // a chain: read before the guest runs, not lazily (the default takes a full save)
            EXPECT_NE(dst->log().find("read before the guest runs (a lazy restore takes a full save)"), std::string::npos)
                << dst->log();
        }
    }
    // Built on a save that is not the last one this vmm made: refused, nothing written.
    ASSERT_EQ(src->cmd("migrate_set_parameter file-base " + a), "");
    std::string out = src->cmd("migrate file:" + temp_path("chain-bad.save"));
    EXPECT_NE(out.find("file-base names a save that is not the last this vmm made"), std::string::npos) << out;
    EXPECT_FALSE(std::filesystem::exists(temp_path("chain-bad.save")));
    // A chain whose middle is gone, or mapped: refused in one line.
    std::filesystem::rename(b, b + ".moved");
    expect_refused(restore_expecting_failure("file-chain-broken", "file:" + c, "128M"), "builds on " + b + ", which cannot be opened");
    std::filesystem::rename(b + ".moved", b);
    auto mapped = Vm::start("file-chain-mapped", {"-m", "128M", "--smp", "1", "-S", "--incoming", "defer"});
    ASSERT_TRUE(mapped);
    EXPECT_EQ(mapped->cmd("migrate_set_capability x-restore-mapped on"), "");
    mapped->cmd("migrate_incoming file:" + c);
    ASSERT_TRUE(mapped->process().wait(30s)) << mapped->log();
    EXPECT_NE(mapped->log().find("x-restore-mapped restores a full save"), std::string::npos) << mapped->log();
    mapped->forget_monitor();
    for (const std::string& f : {a, b, c, full, merged}) std::filesystem::remove(f);
}

// A save that runs out of room: the migration fails with one line, the guest runs on, and
// neither the file nor its temporary copy is left (a tmpfs of 4 MiB for a guest of 8).
TEST(FileMigration, AFullDiskFailsTheSaveLeavingNoFileAndTheGuestRunning) {
    VMM_REQUIRE(need::kvm());
    std::string dir = temp_path("full-disk");
    std::filesystem::create_directories(dir);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=4m") != 0) {
        std::filesystem::remove(dir);
        GTEST_SKIP() << "needs to mount a small tmpfs (root): " << std::strerror(errno);
    }
    auto src = Vm::start("file-full-src", {"--guest", "stress", "-m", "64M", "--smp", "1", "--prefill", "8M"});
    ASSERT_TRUE(src);
    std::string out = src->cmd("migrate file:" + dir + "/g.save");
    EXPECT_NE(out.find("Migration status: failed"), std::string::npos) << out;
    EXPECT_NE(out.find("No space left on device"), std::string::npos) << out;
    EXPECT_EQ(src->status(), "running");
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a failed save left " << std::filesystem::directory_iterator(dir)->path();
    ::umount2(dir.c_str(), MNT_DETACH);
    std::filesystem::remove(dir);
}

}  // namespace vmm::test
