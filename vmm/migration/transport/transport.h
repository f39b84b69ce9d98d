// The transport seam. The migration core drives a Connection through its byte stream and,
// where the transport has one, its RAM channel; it never knows whether that is TCP or RDMA.
// A transport without a RAM channel gets the core's inline one: pages as records in the stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/stream/cancel.h"
#include "vmm/migration/transport/options.h"
#include "vmm/migration/transport/postcopy_link.h"
#include "vmm/migration/transport/postcopy_stream.h"
#include "vmm/migration/transport/setup_parts.h"
#include "vmm/stream/byte_stream.h"
#include "vmm/migration/wire/page_sums.h"
#include "vmm/migration/wire/uri.h"

namespace vmm::migration {

class FileRamSource;  // file_ram.h
class SaveTarget;     // file_ram.h
class PulledFile;     // pull.h
class FileServer;     // pull.h

// What a transport sees of guest RAM: name, host mapping, length (and guest address).
struct RamBlockView {
    std::string name;
    uint8_t* host = nullptr;
    uint64_t size = 0;
    uint64_t guest_addr = 0;
};

// Source side: moves pages to the destination by the transport's own means.
class SourceRamChannel {
public:
    virtual ~SourceRamChannel() = default;
    // Once, after the destination has accepted the header and before the first round, while
    // the destination reads the stream: setup the channel needs from its peer (counted as setup).
    virtual Status setup() { return {}; }
    virtual Status begin_round(uint32_t round) = 0;
    // Pages [offset, offset+length) of block `block`, read from its host memory.
    virtual Status send(uint32_t block, uint64_t offset, uint64_t length) = 0;
    virtual Status send_zero(uint32_t block, uint64_t offset, uint64_t length) = 0;
    // Returns once every page of the round is in the destination's memory.
    virtual Status end_round() = 0;
    // Bytes accepted by send() that are not yet known to be in the destination's memory (a
    // transport that confirms asynchronously, like RDMA WRITE); none once end_round() returns.
    // `transferred` counts only what has arrived.
    virtual uint64_t in_flight() const { return 0; }
    // `fn` runs (on the calling thread, inside any call on the connection) whenever more of what
    // is in flight has arrived, so progress can be published while the channel waits on the wire.
    virtual void on_arrival(std::function<void()> fn) { (void)fn; }
    // Whether this channel sends each record's checksum (verify-ram); for one that does not, the
    // core sums the pages it hands the channel and sends the sums after the channel's round.
    virtual bool verifies() const { return false; }
    // Whether this channel carries verify-ram's page sums itself (sums() below), delivering each
    // page's once its data has landed, so the destination checks while the round runs.
    virtual bool carries_sums() const { return false; }
    // The sums of the pages the next send() or send_zero() hands over (same block, offset and
    // sums.size() pages), as read before handing them.
    virtual Status sums(uint32_t block, uint64_t offset, std::span<const uint64_t> sums) {
        (void)block, (void)offset, (void)sums;
        return Error("internal: this RAM channel does not carry page sums");
    }
    // Whether a precopy whose link broke can go on over a new connection's channel (x-resume-
    // window): its destination then says what arrived (DestRamChannel::on_landed).
    virtual bool resumable() const { return false; }
    // A resumable precopy: `fn` hears of each run of pages handed to send() that the transport's
    // own delivery says is in the destination's memory (an RDMA WRITE completed on a reliable
    // connection), from inside this channel's calls; a break then costs only what neither this
    // nor the destination vouches for. False: the channel cannot tell.
    using DeliveredFn = std::function<void(uint32_t block, uint64_t first_page, uint64_t count)>;
    virtual bool on_delivered(DeliveredFn fn) { return !fn; }
    // Whether the channel failed because its link did (as ByteStream::link_broke), not its peer's words.
    virtual bool link_broke() const { return false; }
    // Breaks the channel's links at once, as a failed network would (Connection::cut).
    virtual void cut() {}
};

// What a destination's channel has written into guest RAM so far (for `info migrate`).
struct ChannelCounts {
    uint64_t pages = 0;       // received as data
    uint64_t zero_pages = 0;  // zeroed on the source's word
    uint64_t bytes = 0;       // of page data
};

// Destination side: serves one round until the source ends it.
class DestRamChannel {
public:
    virtual ~DestRamChannel() = default;
    virtual Status serve_round(uint32_t round) = 0;
    // A channel that does not count (e.g. a plugin's) reports zeros.
    virtual ChannelCounts counts() const { return {}; }
    // Under verify-ram with a source channel that checksums its own records, before the first
    // round: check each against its checksum with `verifier`. A channel that cannot refuses.
    virtual Status verify_with(class RamVerifier* verifier) {
        if (verifier == nullptr) return {};
        return Error("the source announced verify-ram, but this transport's RAM channel cannot verify RAM");
    }
    // Whether the channel delivers the sums a source channel carries (SourceRamChannel::sums).
    virtual bool carries_sums() const { return false; }
    // `fn` gets each delivery during serve_round (the pages are in guest RAM by then); an error
    // from it fails the round. An empty fn unregisters.
    using SumsFn = std::function<Status(uint32_t block, uint64_t offset, std::span<const uint64_t> sums)>;
    virtual void on_sums(SumsFn fn) { (void)fn; }
    // A channel that leaves guest RAM in a file, to be mapped or brought in lazily rather than
    // read in the rounds (file_ram.h: the file transport's restore); none for every other.
    virtual FileRamSource* file_ram() { return nullptr; }
    // A resumable precopy (x-resume-window): `fn` hears of every run of pages that is in guest RAM
    // whole (checked, under verify-ram), from inside serve_round and on any of its threads (never
    // one page on two at once), with the round it came in; the source resends the rest over a new
    // connection. A channel that cannot tell runs apart (RDMA WRITEs land unseen) calls `fn` with
    // every block whole once it has served a round: every page that round carried is here then,
    // and every page it did not was already. False: the channel cannot say.
    using LandedFn = std::function<void(uint32_t block, uint64_t first_page, uint64_t count, uint32_t round)>;
    virtual bool on_landed(LandedFn fn) { return !fn; }
    // The counts of the channel a broken link ended, carried on by this one (for `info migrate`).
    virtual void count_from(const ChannelCounts& before) { (void)before; }
    virtual bool link_broke() const { return false; }
    virtual void cut() {}
};

class Connection {
public:
    virtual ~Connection() = default;
    virtual stream::ByteStream& stream() = 0;
    virtual SourceRamChannel* source_ram() { return nullptr; }
    virtual DestRamChannel* dest_ram() { return nullptr; }
    // Postcopy as this connection carries it (postcopy_link.h), asked once per postcopy run:
    // on the byte stream and preempt_stream() unless the transport has a channel of its own.
    virtual std::unique_ptr<SourcePostcopyLink> source_postcopy(PostcopyLinkConfig config) {
        return stream_postcopy_source(stream(), preempt_stream(), std::move(config));
    }
    virtual std::unique_ptr<DestPostcopyLink> dest_postcopy(PostcopyLinkConfig config) {
        return stream_postcopy_dest(stream(), preempt_stream(), [this] { (void)cut(); }, std::move(config));
    }
    // Whether postcopy goes on a channel of the transport's own (RDMA agrees one with its peer).
    virtual bool postcopy_channel() const { return false; }
    // Whether postcopy can follow this connection's precopy rounds: on a channel of its own, or on
    // its stream and preempt_stream() when its RAM went there too. A socket connection can with
    // multifd lanes as well (they rest after the switch, as in QEMU 10.1); a plugin's RAM channel
    // without a postcopy channel cannot.
    virtual bool carries_postcopy() { return postcopy_channel() || (source_ram() == nullptr && dest_ram() == nullptr); }
    // postcopy-preempt (socket transports): a second connection on which the source sends the
    // pages the destination asked for (postcopy_stream.h).
    virtual stream::ByteStream* preempt_stream() { return nullptr; }
    virtual std::string describe() const = 0;
    // The transport's own steps in setting this connection up so far, in order (setup_parts.h):
    // a source's connect, then its RAM channel's setup(); a destination's accept from the
    // source's first word on, then what it answered while the stream was read. None: not said.
    virtual std::vector<SetupPart> setup_parts() const { return {}; }
    // Whether a destination is there to answer (HEADER_OK, ROUND_CHECKED, READY). A file has
    // nobody: the source writes what a destination would read, GO included, and waits for no
    // reply; the destination that later reads it answers into nothing.
    virtual bool answers() const { return true; }
    // A save (file_ram.h: the file transport's source side), made durable by its commit() once
    // the source has written everything; none for a connection with a peer.
    virtual SaveTarget* save_target() { return nullptr; }
    // An authenticated transport's key for its RAM sums (page_sums.h: every page then goes with
    // a keyed MAC), or none.
    virtual Result<std::optional<PageSumKey>> sums_key() { return std::optional<PageSumKey>{}; }
    // The migration failed above the transport: tell the peer why, if the transport can (best
    // effort, brief). A socket's peer learns it from the connection closing.
    virtual void abort(const std::string& reason) { (void)reason; }
    // Breaks the link at once, as a failed network would (migrate_pause): every read and write
    // on it fails from then on, at both ends. A transport that cannot says so.
    virtual Status cut() { return Error("this transport's link cannot be cut (migrate_pause works over tcp:, unix: and rdma:)"); }
    // Whether the connection failed because a link did (its stream's, or a RAM channel's), so a
    // resumable precopy waits for a new one instead of failing.
    bool link_broke() {
        if (stream().link_broke()) return true;
        if (SourceRamChannel* s = source_ram(); s != nullptr && s->link_broke()) return true;
        DestRamChannel* d = dest_ram();
        return d != nullptr && d->link_broke();
    }
};

class Listener {
public:
    virtual ~Listener() = default;
    // Waits for the source; returns early with an error when the token is cancelled.
    virtual Result<std::unique_ptr<Connection>> accept() = 0;
    // The same, until `deadline` (a paused precopy waiting for its source to resume): an error
    // with ETIMEDOUT then (sys_errno), any other error a failure of the listener.
    virtual Result<std::unique_ptr<Connection>> accept_until(std::chrono::steady_clock::time_point deadline) {
        (void)deadline;
        return Error("this transport cannot wait for a migration to resume");
    }
    virtual std::string describe() const = 0;
};

struct TransportContext {
    Uri uri;
    // The settings, read when a transport needs them: a source's are fixed when it starts; a
    // listener's are the monitor's as they are when its peer connects (a person may change them
    // on a destination while it waits, as with QEMU).
    std::function<Options()> options;
    std::vector<RamBlockView> blocks;
    uint32_t vcpu_count = 0;  // the machine's shape, as a file's header records it
    const stream::CancelToken* cancel = nullptr;
};

class Transport {
public:
    virtual ~Transport() = default;
    virtual std::string scheme() const = 0;
    // The settings this transport reads beyond the core's: rows it adds to the table (params.h).
    virtual std::vector<TransportSetting> settings() const { return {}; }
    // True when a listener reads the settings as its peer connects (TransportContext::options);
    // false when it took them when it started listening (a plugin: its ABI passes them once).
    virtual bool listener_reads_settings_late() const { return true; }
    // Whether its connections run TLS when tls-creds is set (tcp, unix); one that does not is
    // refused while tls-creds is set, never used in plaintext behind the user's back.
    virtual bool carries_tls() const { return false; }
    // False for a file: no peer to authenticate (tls-creds does not apply) or to run the guest
    // (postcopy cannot).
    virtual bool has_peer() const { return true; }
    virtual Result<std::unique_ptr<Connection>> connect(const TransportContext& ctx) = 0;
    virtual Result<std::unique_ptr<Listener>> listen(const TransportContext& ctx) = 0;
    // Prepares, once per process, what every connection will need (rdma: its libraries' list of
    // devices and their drivers), so that the first migration does not wait for it. vmm calls
    // it on a thread of its own soon after it starts; it never fails (a connection will say).
    virtual void warm_up() {}
    // Pulling (pull.h), where the transport can: `size` bytes at `base` (a saved guest's file,
    // mapped, unchanging while served) served for remote read at ctx.uri's address; and a
    // client's reads of what a server serves there.
    virtual bool pulls() const { return false; }
    virtual Result<std::unique_ptr<FileServer>> serve(const TransportContext& ctx, const uint8_t* base, uint64_t size);
    virtual Result<std::unique_ptr<PulledFile>> pull(const TransportContext& ctx);
};

}  // namespace vmm::migration
