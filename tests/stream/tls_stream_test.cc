// TlsStream over a stream that is not a socket (two pipes): the handshake authenticates both
// sides, bytes cross both ways at once (the return path's case), put-back bytes come first,
// the writer renews its key without the reader writing, and a record changed in flight fails
// the read naming it. The PKI comes from scripts/make-test-pki.sh.
#include "vmm/stream/tls_stream.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>

#include "tests/support/pipe_stream.h"
#include "tests/support/require.h"
#include "tests/support/test_pki.h"

namespace vmm::stream {
namespace {

using vmm::test::pipe_stream_pair;

class TlsStreamTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = std::filesystem::temp_directory_path() / ("vmm-tls-unit." + std::to_string(::getpid()));
        dir_ = root_ + "/pki";  // a directory of its own: make-test-pki.sh counts the pool's keys in its parent
        made_ = std::system("command -v certtool >/dev/null") == 0 &&
                std::system(vmm::test::make_test_pki_command(dir_).c_str()) == 0;
    }
    static void TearDownTestSuite() { std::filesystem::remove_all(root_); }
    void SetUp() override {
        VMM_REQUIRE(need::certtool());
        ASSERT_TRUE(made_) << "make-test-pki.sh failed";
    }
    static TlsSetup setup(TlsRole role, uint64_t rekey = uint64_t{1} << 24) {
        TlsSetup s;
        s.role = role;
        s.creds_dir = dir_;
        s.hostname = "localhost";
        s.rekey_records = rekey;
        return s;
    }
    // Both ends of a TLS connection over `pair`, handshaken on two threads.
    static std::pair<Result<std::unique_ptr<ByteStream>>, Result<std::unique_ptr<ByteStream>>> connect(
        std::unique_ptr<ByteStream> client, std::unique_ptr<ByteStream> server, uint64_t rekey = uint64_t{1} << 24) {
        auto s = std::async(std::launch::async, [&] { return tls_handshake(std::move(server), setup(TlsRole::server, rekey)); });
        auto c = tls_handshake(std::move(client), setup(TlsRole::client, rekey));
        return {std::move(c), s.get()};
    }
    static inline std::string root_, dir_;
    static inline bool made_ = false;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + seed);
    return v;
}

TEST_F(TlsStreamTest, BytesCrossBothWaysAtOnceAndPutBackBytesComeFirst) {
    auto [a, b] = pipe_stream_pair();
    auto [client, server] = connect(std::move(a), std::move(b));
    ASSERT_TRUE(client) << client.error().message();
    ASSERT_TRUE(server) << server.error().message();
    auto up = pattern(3 << 20, 1), down = pattern(1 << 20, 2);
    // The source writes the stream while the destination writes its return path: one writer
    // and one reader on each session at once.
    std::thread source([&] {
        ASSERT_TRUE((*client)->write(up));
        ASSERT_TRUE((*client)->flush());
    });
    std::thread dest([&] {
        ASSERT_TRUE((*server)->write(down));
        ASSERT_TRUE((*server)->flush());
    });
    std::vector<uint8_t> got_up(up.size()), got_down(down.size());
    std::thread reader([&] { ASSERT_TRUE((*client)->read_exact(got_down)); });
    ASSERT_TRUE((*server)->read_exact(std::span<uint8_t>(got_up).first(16)));
    ASSERT_TRUE((*server)->unread(std::span<const uint8_t>(got_up).first(16)));
    ASSERT_TRUE((*server)->read_exact(got_up));
    source.join(), dest.join(), reader.join();
    EXPECT_EQ(got_up, up);
    EXPECT_EQ(got_down, down);
}

// A key renewed every record (but at most five a second: a receiver refuses more): the reader
// takes each new key without writing anything back.
TEST_F(TlsStreamTest, TheWriterRenewsItsKeyAndTheReaderFollowsWithoutWriting) {
    auto [a, b] = pipe_stream_pair();
    auto [client, server] = connect(std::move(a), std::move(b), 1);
    ASSERT_TRUE(client && server);
    auto data = pattern(16 << 10, 3);  // one record: within a pipe's buffer, as nothing reads meanwhile
    std::vector<uint8_t> got(data.size());
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE((*client)->write(data));
        ASSERT_TRUE((*client)->flush());
        ASSERT_TRUE((*server)->read_exact(got));
        EXPECT_EQ(got, data);
        std::this_thread::sleep_for(std::chrono::milliseconds(210));  // past the least time between updates
    }
    EXPECT_GE(tls_key_updates(**client), 2u);
    EXPECT_EQ(tls_key_updates(**server), 0u) << "the reader wrote a key update";
}

// A stream that changes one byte of what passes through it, at `at`: a man in the middle.
class Tamper final : public ByteStream {
public:
    Tamper(std::unique_ptr<ByteStream> inner, size_t at) : inner_(std::move(inner)), at_(at) {}
    using ByteStream::write;
    Status write(std::span<const std::span<const uint8_t>> buffers) override {
        for (auto b : buffers) {
            std::vector<uint8_t> copy(b.begin(), b.end());
            if (at_ >= seen_ && at_ < seen_ + copy.size()) copy[at_ - seen_] ^= 0x40;
            seen_ += copy.size();
            if (auto s = inner_->write(copy); !s) return s;
        }
        return {};
    }
    Status flush() override { return inner_->flush(); }
    Status read_exact(std::span<uint8_t> out) override { return inner_->read_exact(out); }
    Status await_readable(std::chrono::milliseconds within) override { return inner_->await_readable(within); }

private:
    std::unique_ptr<ByteStream> inner_;
    size_t at_, seen_ = 0;
};

// Counts what the client writes, to find where its handshake ends.
class Counter final : public ByteStream {
public:
    explicit Counter(std::unique_ptr<ByteStream> inner) : inner_(std::move(inner)) {}
    using ByteStream::write;
    Status write(std::span<const std::span<const uint8_t>> buffers) override {
        for (auto b : buffers) written += b.size();
        return inner_->write(buffers);
    }
    Status flush() override { return inner_->flush(); }
    Status read_exact(std::span<uint8_t> out) override { return inner_->read_exact(out); }
    Status await_readable(std::chrono::milliseconds within) override { return inner_->await_readable(within); }
    size_t written = 0;

private:
    std::unique_ptr<ByteStream> inner_;
};

TEST_F(TlsStreamTest, ARecordChangedInFlightFailsTheReadNamingIt) {
    // How many bytes the client's side of a handshake takes (within a few: the signature's
    // length varies), then a connection whose first data record has a byte changed 100 in.
    auto [a, b] = pipe_stream_pair();
    auto counting = std::make_unique<Counter>(std::move(a));
    Counter* counter = counting.get();
    auto [c1, s1] = connect(std::move(counting), std::move(b));
    ASSERT_TRUE(c1 && s1);
    size_t handshake = counter->written;
    auto [p, q] = pipe_stream_pair();
    auto [client, server] = connect(std::make_unique<Tamper>(std::move(p), handshake + 100), std::move(q));
    ASSERT_TRUE(client) << client.error().message();
    ASSERT_TRUE(server) << server.error().message();
    auto data = pattern(8192, 4);
    ASSERT_TRUE((*client)->write(data));
    ASSERT_TRUE((*client)->flush());
    std::vector<uint8_t> got(data.size());
    auto r = (*server)->read_exact(got);
    ASSERT_FALSE(r) << "a changed record was accepted";
    EXPECT_NE(r.error().message().find("failed authentication"), std::string::npos) << r.error().message();
}

TEST_F(TlsStreamTest, APlaintextPeerIsNamedAsSuch) {
    auto [a, b] = pipe_stream_pair();
    auto plain = std::async(std::launch::async, [&a] {
        std::string magic = "VMMIGRAT-and-the-rest-of-a-header";
        return a->write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(magic.data()), magic.size()));
    });
    auto server = tls_handshake(std::move(b), setup(TlsRole::server));
    ASSERT_FALSE(server);
    EXPECT_NE(server.error().message().find("plaintext migration stream where TLS was expected"), std::string::npos)
        << server.error().message();
    EXPECT_TRUE(plain.get());
}

TEST_F(TlsStreamTest, MissingCredentialsAreNamedWithWhatToDo) {
    auto [a, b] = pipe_stream_pair();
    TlsSetup s = setup(TlsRole::client);
    s.creds_dir = "/nonexistent/creds";
    auto client = tls_handshake(std::move(a), s);
    ASSERT_FALSE(client);
    EXPECT_NE(client.error().message().find("/nonexistent/creds/ca-cert.pem"), std::string::npos) << client.error().message();
    EXPECT_NE(client.error().message().find("make-test-pki.sh"), std::string::npos) << client.error().message();
}

// Credentials are read once and shared while their files stay as they were; a file replaced
// (a renewed certificate) is read again.
TEST_F(TlsStreamTest, CredentialsAreReadOnceUntilAFileChanges) {
    auto first = TlsCredentials::load(dir_, TlsRole::client);
    auto again = TlsCredentials::load(dir_, TlsRole::client);
    ASSERT_TRUE(first && again);
    EXPECT_EQ(first->get(), again->get());
    EXPECT_NE(TlsCredentials::load(dir_, TlsRole::server)->get(), first->get());
    std::string cert = dir_ + "/client-cert.pem", copy = dir_ + "/client-cert.pem.new";
    std::filesystem::copy_file(cert, copy);
    std::filesystem::rename(copy, cert);  // the same bytes in a new file, as a renewal installs one
    auto renewed = TlsCredentials::load(dir_, TlsRole::client);
    ASSERT_TRUE(renewed);
    EXPECT_NE(renewed->get(), first->get());
    // Still usable for a handshake after all that.
    auto [a, b] = pipe_stream_pair();
    auto [client, server] = connect(std::move(a), std::move(b));
    EXPECT_TRUE(client && server);
}

TEST(TlsAuthz, PatternsMatchTheDistinguishedNameOrTheCommonName) {
    EXPECT_TRUE(tls_authz_allows("", "CN=any,O=Lab", "any"));
    EXPECT_TRUE(tls_authz_allows("src-1;src-2", "CN=src-2,O=Lab", "src-2"));
    EXPECT_TRUE(tls_authz_allows("backup-*", "CN=backup-7,O=Lab", "backup-7"));
    EXPECT_TRUE(tls_authz_allows("CN=*,O=Lab", "CN=x,O=Lab", "x"));
    EXPECT_FALSE(tls_authz_allows("CN=*,O=Lab", "CN=x,O=Other", "x"));
    EXPECT_FALSE(tls_authz_allows("src-1", "CN=src-10,O=Lab", "src-10"));
    EXPECT_FALSE(tls_authz_allows(";", "CN=x", "x"));
}

}  // namespace
}  // namespace vmm::stream
