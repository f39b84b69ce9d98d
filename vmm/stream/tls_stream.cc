#include "vmm/stream/tls_stream.h"

#include <fmt/format.h>
#include <gnutls/x509.h>

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include <linux/tls.h>

#include "vmm/common/log.h"
#include "vmm/stream/kernel_tls.h"
#include "vmm/stream/tls_record.h"

namespace vmm::stream {

namespace {

constexpr size_t kRecordPlaintext = 16384;  // the most one record carries
constexpr const char* kPriority = "NORMAL:-VERS-ALL:+VERS-TLS1.3";
// A receiver takes at most 8 KeyUpdates a second (GnuTLS refuses more as a flood); AES-GCM's
// limit is 2^24.5 records, days of sending at any speed, so a key lives at least this long.
constexpr auto kLeastBetweenUpdates = std::chrono::milliseconds(200);

std::string peer_word(const TlsSetup& s) {
    if (!s.peer_word.empty()) return s.peer_word;
    return s.role == TlsRole::client ? "destination" : "source";
}

struct SessionDeleter {
    void operator()(gnutls_session_t s) const { gnutls_deinit(s); }
};
using Session = std::unique_ptr<gnutls_session_int, SessionDeleter>;

// GnuTLS's reading transport: whole records read off the stream below (tls_record.h) and handed
// to GnuTLS as it asks; a failure of the stream below kept for the one line the stream gives.
class RecordPull {
public:
    RecordPull(ByteStream& inner, gnutls_session_t session) : inner_(inner), session_(session) {}
    // This reader as the session's receiving transport.
    void install() {
        gnutls_transport_set_pull_function(session_, &RecordPull::pull);
        gnutls_transport_set_pull_timeout_function(session_, &RecordPull::pull_timeout);
    }
    // Bytes of a record read and not yet handed to GnuTLS.
    bool holds_data() const { return pos_ < record_.size(); }
    std::optional<Error>& error() { return error_; }

private:
    static ssize_t pull(gnutls_transport_ptr_t self, void* data, size_t size) noexcept;
    static int pull_timeout(gnutls_transport_ptr_t self, unsigned int ms) noexcept;
    Status next_record();  // reads one record from inner_ into record_

    ByteStream& inner_;
    gnutls_session_t session_;
    std::vector<uint8_t> record_;  // a record read from inner_, header included
    size_t pos_ = 0;
    std::optional<Error> error_;
};

class TlsStream final : public ByteStream {
public:
    TlsStream(std::unique_ptr<ByteStream> inner, TlsCredentials creds, Session session, uint64_t rekey_records)
        : inner_(std::move(inner)), creds_(std::move(creds)), session_(std::move(session)), rekey_records_(rekey_records),
          pull_(*inner_, session_.get()) {
        gnutls_session_set_ptr(session_.get(), this);
        gnutls_transport_set_ptr2(session_.get(), &pull_, this);
        pull_.install();
        gnutls_transport_set_vec_push_function(session_.get(), &TlsStream::push);
    }

    Status handshake(const TlsSetup& setup);

    using ByteStream::write;
    Status write(std::span<const std::span<const uint8_t>> buffers) override;
    Status flush() override;
    Status write_ram(std::span<const uint8_t> header, std::span<const uint8_t> ram) override;
    Status read_exact(std::span<uint8_t> out) override;
    Status await_readable(std::chrono::milliseconds within) override;
    Status unread(std::span<const uint8_t> bytes) override {
        unread_.insert(unread_.begin(), bytes.begin(), bytes.end());
        return {};
    }
    Status shutdown() override { return inner_->shutdown(); }
    bool link_broke() const override { return inner_->link_broke(); }
    void set_peer(std::string peer) override { inner_->set_peer(std::move(peer)); }
    uint64_t key_updates() const { return key_updates_; }
    Result<std::vector<uint8_t>> export_key(const std::string& label, size_t size) const;
    // x-tls-kernel: the sending side handed to the kernel (false: the stream below cannot take it).
    Result<bool> hand_sending_to_kernel();
    bool kernel_sends() const { return kernel_send_; }

private:
    // GnuTLS's sending transport: its records written to the stream below.
    static ssize_t push(gnutls_transport_ptr_t self, const giovec_t* iov, int count) noexcept;
    Status send_record(std::span<const uint8_t> plaintext);
    bool key_update_due() const;
    Result<KernelTlsKeys> sending_keys() const;
    Status send_by_kernel(uint64_t bytes, size_t pieces, const std::function<Status()>& send);
    Status renew_kernel_key();
    Status install_renewed_key();  // the KeyUpdate GnuTLS made, sent by the kernel, and its new key
    // After the hand-over GnuTLS writes nothing itself: its handshake messages (a KeyUpdate) and
    // alerts come here instead of the socket.
    static int handshake_out(gnutls_session_t session, gnutls_record_encryption_level_t level,
                             gnutls_handshake_description_t type, const void* data, size_t size) noexcept;
    static int alert_out(gnutls_session_t session, gnutls_record_encryption_level_t level, gnutls_alert_level_t alert_level,
                         gnutls_alert_description_t description) noexcept;
    Status check_peer(const TlsSetup& setup);
    Error tls_error(int rc, const char* doing, std::optional<Error>& below) const;

    std::unique_ptr<ByteStream> inner_;
    TlsCredentials creds_;  // the session's, alive as long as it is
    Session session_;
    uint64_t rekey_records_;
    // Reading side (one thread).
    RecordPull pull_;              // GnuTLS reads the records through it
    std::vector<uint8_t> unread_;  // plaintext put back (unread), read first
    // Writing side (one thread; the handshake's writes too).
    std::vector<uint8_t> staged_;  // plaintext gathered into a full record
    std::optional<Error> push_error_;
    uint64_t records_under_key_ = 0;
    std::chrono::steady_clock::time_point last_update_{};
    std::atomic<uint64_t> key_updates_{0};
    bool kernel_send_ = false;   // x-tls-kernel taken: the kernel encrypts what this side sends
    // GnuTLS produced a KeyUpdate for the kernel to send (handshake_out): in renew_kernel_key, or
    // on the reading thread when the peer asked for one (the writer sends it next).
    std::atomic<bool> key_update_out_{false};
};

ssize_t RecordPull::pull(gnutls_transport_ptr_t self, void* data, size_t size) noexcept {
    auto* r = static_cast<RecordPull*>(self);
    try {
        if (r->pos_ == r->record_.size()) {
            if (auto s = r->next_record(); !s) {
                r->error_ = s.error();
                gnutls_transport_set_errno(r->session_, EIO);
                return -1;
            }
        }
        size_t n = std::min(size, r->record_.size() - r->pos_);
        std::memcpy(data, r->record_.data() + r->pos_, n);
        r->pos_ += n;
        return static_cast<ssize_t>(n);
    } catch (...) {  // out of memory: no exception may cross GnuTLS
        r->error_ = Error("TLS: out of memory reading a record");
        gnutls_transport_set_errno(r->session_, ENOMEM);
        return -1;
    }
}

Status RecordPull::next_record() {
    std::array<uint8_t, kTlsRecordHeader> header{};
    if (auto s = inner_.read_exact(header); !s) return s;
    auto length = decode_tls_record_header(header);
    if (!length) return length.error();
    record_.assign(header.begin(), header.end());
    record_.resize(kTlsRecordHeader + *length);
    pos_ = 0;
    return inner_.read_exact(std::span<uint8_t>(record_).subspan(kTlsRecordHeader));
}

int RecordPull::pull_timeout(gnutls_transport_ptr_t self, unsigned int ms) noexcept {
    auto* r = static_cast<RecordPull*>(self);
    if (r->holds_data()) return 1;
    auto within = ms == GNUTLS_INDEFINITE_TIMEOUT ? std::chrono::milliseconds(-1) : std::chrono::milliseconds(ms);
    return r->inner_.await_readable(within) ? 1 : 0;
}

ssize_t TlsStream::push(gnutls_transport_ptr_t self, const giovec_t* iov, int count) noexcept {
    auto* t = static_cast<TlsStream*>(self);
    try {
        std::vector<std::span<const uint8_t>> parts;
        size_t total = 0;
        for (int i = 0; i < count; ++i) {
            parts.emplace_back(static_cast<const uint8_t*>(iov[i].iov_base), iov[i].iov_len);
            total += iov[i].iov_len;
        }
        Status s = t->inner_->write(std::span<const std::span<const uint8_t>>(parts));
        if (s) s = t->inner_->flush();
        if (!s) {
            t->push_error_ = s.error();
            gnutls_transport_set_errno(t->session_.get(), EIO);
            return -1;
        }
        return static_cast<ssize_t>(total);
    } catch (...) {
        t->push_error_ = Error("TLS: out of memory writing a record");
        gnutls_transport_set_errno(t->session_.get(), ENOMEM);
        return -1;
    }
}

// What went wrong, in one line: the stream below's own error when it failed (a timeout, a
// plaintext peer, a closed connection), else GnuTLS's.
Error TlsStream::tls_error(int rc, const char* doing, std::optional<Error>& below) const {
    if (below) return std::exchange(below, std::nullopt)->context(doing);
    if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED) {
        const char* alert = gnutls_alert_get_name(gnutls_alert_get(session_.get()));
        return Error(fmt::format("{}: the peer refused: {}", doing, alert != nullptr ? alert : "(unknown alert)"));
    }
    if (rc == GNUTLS_E_DECRYPTION_FAILED) {
        return Error(fmt::format("{}: a TLS record failed authentication (corrupted or forged in flight)", doing));
    }
    return Error(fmt::format("{}: {}", doing, gnutls_strerror(rc)));
}

bool TlsStream::key_update_due() const {
    return records_under_key_ >= rekey_records_ && std::chrono::steady_clock::now() - last_update_ >= kLeastBetweenUpdates;
}

Status TlsStream::send_record(std::span<const uint8_t> plaintext) {
    auto now = std::chrono::steady_clock::now();
    if (key_update_due()) {
        // Our sending key only (no request): the peer's reader just takes the new key.
        int rc;
        do rc = gnutls_session_key_update(session_.get(), 0);
        while (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED);
        if (rc < 0) return tls_error(rc, "TLS key update", push_error_);
        records_under_key_ = 0;
        last_update_ = now;
        ++key_updates_;
    }
    while (!plaintext.empty()) {
        ssize_t n = gnutls_record_send(session_.get(), plaintext.data(), plaintext.size());
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) continue;
        if (n < 0) return tls_error(static_cast<int>(n), "TLS send", push_error_);
        plaintext = plaintext.subspan(static_cast<size_t>(n));
        ++records_under_key_;
    }
    return {};
}

Status TlsStream::write(std::span<const std::span<const uint8_t>> buffers) {
    if (kernel_send_) {  // plaintext to the socket: the kernel makes the records
        uint64_t bytes = 0;
        for (auto b : buffers) bytes += b.size();
        return send_by_kernel(bytes, buffers.size(), [&] { return inner_->write(buffers); });
    }
    for (auto b : buffers) {
        while (!b.empty()) {
            if (staged_.empty() && b.size() >= kRecordPlaintext) {  // whole records straight from the caller
                if (auto s = send_record(b.first(kRecordPlaintext)); !s) return s;
                b = b.subspan(kRecordPlaintext);
                continue;
            }
            size_t n = std::min(b.size(), kRecordPlaintext - staged_.size());
            staged_.insert(staged_.end(), b.begin(), b.begin() + static_cast<ptrdiff_t>(n));
            b = b.subspan(n);
            if (staged_.size() == kRecordPlaintext) {
                if (auto s = send_record(staged_); !s) return s;
                staged_.clear();
            }
        }
    }
    return {};
}

Status TlsStream::flush() {
    if (kernel_send_) return inner_->flush();
    if (staged_.empty()) return {};
    Status s = send_record(staged_);
    staged_.clear();
    return s;
}

// Guest RAM: through the kernel's TLS it is spliced into the socket as without TLS; else copied
// into records here.
Status TlsStream::write_ram(std::span<const uint8_t> header, std::span<const uint8_t> ram) {
    if (!kernel_send_) return ByteStream::write_ram(header, ram);
    return send_by_kernel(header.size() + ram.size(), 2, [&] { return inner_->write_ram(header, ram); });
}

Result<KernelTlsKeys> TlsStream::sending_keys() const {
    gnutls_datum_t mac{}, iv{}, key{};
    KernelTlsKeys k;
    if (int rc = gnutls_record_get_state(session_.get(), 0, &mac, &iv, &key, k.seq.data()); rc < 0)
        return Error(fmt::format("kernel TLS: the session's sending key: {}", gnutls_strerror(rc)));
    gnutls_cipher_algorithm_t cipher = gnutls_cipher_get(session_.get());
    switch (cipher) {
        case GNUTLS_CIPHER_AES_128_GCM: k.cipher = TLS_CIPHER_AES_GCM_128; break;
        case GNUTLS_CIPHER_AES_256_GCM: k.cipher = TLS_CIPHER_AES_GCM_256; break;
        case GNUTLS_CIPHER_CHACHA20_POLY1305: k.cipher = TLS_CIPHER_CHACHA20_POLY1305; break;
        default:
            return Error(fmt::format("kernel TLS: the session's cipher {} is not one the kernel takes", gnutls_cipher_get_name(cipher)));
    }
    k.key.assign(key.data, key.data + key.size);
    k.iv.assign(iv.data, iv.data + iv.size);
    return k;
}

Result<bool> TlsStream::hand_sending_to_kernel() {
    if (auto s = flush(); !s) return s.error();  // nothing staged goes after what the kernel sends
    KernelTlsSender* kernel = inner_->kernel_tls();
    if (kernel == nullptr) return false;  // not a TCP socket below
    auto keys = sending_keys();
    if (!keys) return keys.error();
    auto taken = kernel->kernel_tls_start(*keys);
    if (!taken || !*taken) return taken;
    kernel_send_ = true;
    gnutls_handshake_set_read_function(session_.get(), &TlsStream::handshake_out);
    gnutls_alert_set_read_function(session_.get(), &TlsStream::alert_out);
    return true;
}

// `send` hands `bytes` in `pieces` to the kernel's TLS, after the KeyUpdate a peer asked for, if
// one waits. They make at most one record per 16 KiB and one more per piece (a send's end closes
// one); once that bound reaches the key's limit, the kernel's own record number says whether it has.
Status TlsStream::send_by_kernel(uint64_t bytes, size_t pieces, const std::function<Status()>& send) {
    if (key_update_out_.exchange(false))
        if (auto s = install_renewed_key(); !s) return s;
    if (auto s = send(); !s) return s;
    records_under_key_ += bytes / kRecordPlaintext + pieces + 1;
    if (records_under_key_ < rekey_records_) return {};
    auto exact = inner_->kernel_tls()->kernel_tls_records();  // kernel_send_: there is one
    if (!exact) return exact.error();
    records_under_key_ = *exact;
    return key_update_due() ? renew_kernel_key() : Status{};
}

// GnuTLS renews its sending key (its KeyUpdate message comes to handshake_out, not the socket),
// then the kernel sends the KeyUpdate under the old key and takes the new one.
Status TlsStream::renew_kernel_key() {
    if (!kernel_tls_support().renews) {
        return Error(fmt::format("TLS: {} records sent under one key (x-tls-rekey-records {}), and this kernel's TLS "
                                 "cannot renew a sending key (Linux 6.14 can): turn x-tls-kernel off for a migration this long",
                                 records_under_key_, rekey_records_));
    }
    int rc;
    do rc = gnutls_session_key_update(session_.get(), 0);
    while (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED);
    if (rc < 0) return tls_error(rc, "TLS key update", push_error_);
    if (!key_update_out_.exchange(false))
        return Error("internal: GnuTLS renewed its sending key without a KeyUpdate for the kernel to send");
    return install_renewed_key();
}

Status TlsStream::install_renewed_key() {
    if (!kernel_tls_support().renews) {
        return Error("TLS: the sending key must be renewed (the peer asked), and this kernel's TLS cannot renew one "
                     "(Linux 6.14 can): turn x-tls-kernel off");
    }
    auto keys = sending_keys();
    if (!keys) return keys.error();
    if (auto s = inner_->kernel_tls()->kernel_tls_renew(*keys); !s) return s;
    records_under_key_ = 0;
    last_update_ = std::chrono::steady_clock::now();
    ++key_updates_;
    return {};
}

int TlsStream::handshake_out(gnutls_session_t session, gnutls_record_encryption_level_t, gnutls_handshake_description_t type,
                             const void*, size_t) noexcept {
    // After the hand-over the only handshake message this side sends is its KeyUpdate, which the
    // kernel sends itself (install_renewed_key): GnuTLS has made it when it renews its sending
    // key, ours or the one a peer asked for.
    if (type != GNUTLS_HANDSHAKE_KEY_UPDATE) return GNUTLS_E_UNEXPECTED_HANDSHAKE_PACKET;
    static_cast<TlsStream*>(gnutls_session_get_ptr(session))->key_update_out_ = true;
    return 0;
}

// An alert GnuTLS would send after the hand-over (it is about to fail the stream) is dropped:
// the kernel holds the sending key now, and the connection closes anyway.
int TlsStream::alert_out(gnutls_session_t, gnutls_record_encryption_level_t, gnutls_alert_level_t,
                         gnutls_alert_description_t) noexcept {
    return 0;
}

Status TlsStream::read_exact(std::span<uint8_t> out) {
    size_t from_unread = std::min(out.size(), unread_.size());
    std::copy_n(unread_.begin(), from_unread, out.begin());
    unread_.erase(unread_.begin(), unread_.begin() + static_cast<ptrdiff_t>(from_unread));
    out = out.subspan(from_unread);
    while (!out.empty()) {
        ssize_t n = gnutls_record_recv(session_.get(), out.data(), out.size());
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) continue;
        if (n == 0) return Error("the peer closed its TLS session");
        if (n < 0) return tls_error(static_cast<int>(n), "TLS receive", pull_.error());
        out = out.subspan(static_cast<size_t>(n));
    }
    return {};
}

Status TlsStream::await_readable(std::chrono::milliseconds within) {
    if (!unread_.empty() || gnutls_record_check_pending(session_.get()) > 0 || pull_.holds_data()) return {};
    return inner_->await_readable(within);
}

// The server's check of the source's certificate against tls-authz (the CA's was the handshake's).
Status TlsStream::check_peer(const TlsSetup& setup) {
    if (setup.role != TlsRole::server || setup.authz.empty()) return {};
    unsigned count = 0;
    const gnutls_datum_t* certs = gnutls_certificate_get_peers(session_.get(), &count);
    if (certs == nullptr || count == 0) return Error(fmt::format("TLS: the {} sent no certificate", peer_word(setup)));
    gnutls_x509_crt_t crt = nullptr;
    if (gnutls_x509_crt_init(&crt) < 0) return Error("TLS: out of memory");
    std::unique_ptr<gnutls_x509_crt_int, void (*)(gnutls_x509_crt_t)> owned(crt, gnutls_x509_crt_deinit);
    if (int rc = gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER); rc < 0)
        return Error(fmt::format("TLS: the {}'s certificate: {}", peer_word(setup), gnutls_strerror(rc)));
    gnutls_datum_t dn{};
    if (int rc = gnutls_x509_crt_get_dn3(crt, &dn, 0); rc < 0)
        return Error(fmt::format("TLS: the {}'s certificate's name: {}", peer_word(setup), gnutls_strerror(rc)));
    std::string dn_text(reinterpret_cast<const char*>(dn.data), dn.size);
    gnutls_free(dn.data);
    char cn[256] = {};
    size_t cn_size = sizeof cn - 1;
    if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &cn_size) < 0) cn[0] = 0;
    if (tls_authz_allows(setup.authz, dn_text, cn)) return {};
    (void)gnutls_alert_send(session_.get(), GNUTLS_AL_FATAL, GNUTLS_A_ACCESS_DENIED);
    return Error(fmt::format("TLS: the {}'s certificate '{}' is not one {} accepts ({})", peer_word(setup), dn_text,
                             setup.authz_setting, setup.authz));
}

Status TlsStream::handshake(const TlsSetup& setup) {
    gnutls_handshake_set_timeout(session_.get(), GNUTLS_DEFAULT_HANDSHAKE_TIMEOUT);
    int rc;
    do rc = gnutls_handshake(session_.get());
    while (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED);
    // The peer learns why in an alert ("certificate required", "bad certificate", ...) rather
    // than from a connection closed without a word; best effort, and never in answer to its
    // own alert or over a stream that already failed.
    if (rc < 0 && rc != GNUTLS_E_FATAL_ALERT_RECEIVED && !pull_.error() && !push_error_) {
        (void)gnutls_alert_send_appropriate(session_.get(), rc);
    }
    if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
        unsigned status = gnutls_session_get_verify_cert_status(session_.get());
        gnutls_datum_t text{};
        std::string why = "not trusted";
        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) == 0) {
            why.assign(reinterpret_cast<const char*>(text.data), text.size);
            gnutls_free(text.data);
        }
        return Error(fmt::format("TLS: the {}'s certificate was refused: {}", peer_word(setup), why));
    }
    if (rc < 0) {
        std::optional<Error>& below = pull_.error() ? pull_.error() : push_error_;
        Error e = tls_error(rc, "TLS handshake", below);
        if (setup.role == TlsRole::client && rc != GNUTLS_E_FATAL_ALERT_RECEIVED) {
            return Error(e.message() + " (tls-creds is set here: the destination needs it too)");
        }
        return e;
    }
    return check_peer(setup);
}

bool is_address(const std::string& host) {
    unsigned char buf[sizeof(in6_addr)];
    return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

Result<Session> new_session(const TlsSetup& setup, const TlsCredentials& creds) {
    gnutls_session_t raw = nullptr;
    unsigned flags = (setup.role == TlsRole::server ? GNUTLS_SERVER : GNUTLS_CLIENT) | GNUTLS_NO_AUTO_REKEY |
                     GNUTLS_NO_TICKETS;
    if (int rc = gnutls_init(&raw, flags); rc < 0) return Error(fmt::format("TLS: {}", gnutls_strerror(rc)));
    Session s(raw);
    const char* at = nullptr;
    if (int rc = gnutls_priority_set_direct(raw, kPriority, &at); rc < 0)
        return Error(fmt::format("TLS priority '{}': {}", kPriority, gnutls_strerror(rc)));
    if (int rc = gnutls_credentials_set(raw, GNUTLS_CRD_CERTIFICATE, creds.get()); rc < 0)
        return Error(fmt::format("TLS credentials: {}", gnutls_strerror(rc)));
    if (setup.role == TlsRole::server) {
        gnutls_certificate_server_set_request(raw, GNUTLS_CERT_REQUIRE);
        gnutls_session_set_verify_cert(raw, nullptr, 0);
    } else {
        if (setup.hostname.empty()) return Error("TLS: no name to check the destination's certificate against: set tls-hostname");
        if (!is_address(setup.hostname))
            gnutls_server_name_set(raw, GNUTLS_NAME_DNS, setup.hostname.data(), setup.hostname.size());
        gnutls_session_set_verify_cert(raw, setup.hostname.c_str(), 0);
    }
    return s;
}

}  // namespace

Result<std::unique_ptr<ByteStream>> tls_handshake(std::unique_ptr<ByteStream> inner, const TlsSetup& setup) {
    auto creds = setup.files.ca.empty() ? TlsCredentials::load(setup.creds_dir, setup.role) : TlsCredentials::load(setup.files);
    if (!creds) return creds.error();
    auto session = new_session(setup, *creds);
    if (!session) return session.error();
    if (setup.role == TlsRole::server) {
        if (auto s = inner->await_readable(setup.first_words_within); !s)
            return s.error().context(fmt::format("TLS: the {} said nothing within {}", peer_word(setup), setup.first_words_setting));
    }
    auto tls = std::make_unique<TlsStream>(std::move(inner), std::move(*creds), std::move(*session), setup.rekey_records);
    if (auto s = tls->handshake(setup); !s) return s.error();
    if (setup.kernel_send) {
        auto taken = tls->hand_sending_to_kernel();
        if (!taken) return taken.error();
        if (!*taken) {
            static std::once_flag said;
            std::call_once(said, [] {
                log::warn("x-tls-kernel: {}: GnuTLS encrypts what this side sends instead",
                          kernel_tls_support().available ? "the connection is not TCP" : kernel_tls_support().why);
            });
        }
    }
    return std::unique_ptr<ByteStream>(std::move(tls));
}

Result<std::vector<uint8_t>> TlsStream::export_key(const std::string& label, size_t size) const {
    std::vector<uint8_t> out(size);
    int rc = gnutls_prf_rfc5705(session_.get(), label.size(), label.data(), 0, nullptr, size, reinterpret_cast<char*>(out.data()));
    if (rc < 0) return Error(fmt::format("TLS: exporting keying material '{}': {}", label, gnutls_strerror(rc)));
    return out;
}

Result<std::vector<uint8_t>> tls_export(const ByteStream& stream, const std::string& label, size_t size) {
    auto* tls = dynamic_cast<const TlsStream*>(&stream);
    if (tls == nullptr) return Error("internal: keying material asked of a stream that is not TLS");
    return tls->export_key(label, size);
}

bool tls_kernel_sends(const ByteStream& stream) {
    auto* tls = dynamic_cast<const TlsStream*>(&stream);
    return tls != nullptr && tls->kernel_sends();
}

uint64_t tls_key_updates(const ByteStream& stream) {
    auto* tls = dynamic_cast<const TlsStream*>(&stream);
    return tls != nullptr ? tls->key_updates() : 0;
}

}  // namespace vmm::stream
