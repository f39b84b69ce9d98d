#include "vmm/migration/transport/postcopy_stream.h"

#include <fmt/format.h>

#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/page_sums.h"
#include "vmm/migration/wire/return_path.h"

namespace vmm::migration {

namespace {

class StreamSource final : public SourcePostcopyLink {
public:
    StreamSource(stream::ByteStream& main, stream::ByteStream* preempt, PostcopyLinkConfig config)
        : main_(main), preempt_(preempt), config_(std::move(config)) {}

    Status begin() override { return {}; }
    Result<std::optional<PostcopyRequest>> next_request(std::chrono::milliseconds wait) override;
    Result<uint64_t> send(Path path, const PageRun& run, std::optional<uint32_t> token) override;
    Status flush(Path path) override { return out(path).flush(); }
    Status end() override;
    Answers answers() const override {
        if (preempt_ == nullptr) return {};  // the migration thread answers, on the stream
        return {.beside_push = true, .own_connection = true, .once = false};
    }

private:
    stream::ByteStream& out(Path path) { return path == Path::answer && preempt_ != nullptr ? *preempt_ : main_; }

    stream::ByteStream& main_;
    stream::ByteStream* preempt_;
    PostcopyLinkConfig config_;
};

Result<std::optional<PostcopyRequest>> StreamSource::next_request(std::chrono::milliseconds wait) {
    if (!main_.await_readable(wait)) return std::optional<PostcopyRequest>{};
    auto m = read_return(main_, config_.blocks, kStreamPageSize);
    if (!m) return m.error();
    switch (m->message.type) {
        case ReturnType::page_request: {
            PostcopyRequest r{false, m->message.block, m->message.offset / kStreamPageSize,
                              m->message.length / kStreamPageSize, std::nullopt};
            return std::optional<PostcopyRequest>{r};
        }
        case ReturnType::postcopy_done: return std::optional<PostcopyRequest>{PostcopyRequest::all_placed()};
        default: return Error("the destination sent what it holds (a recovery's message) in the middle of postcopy");
    }
}

Result<uint64_t> StreamSource::send(Path path, const PageRun& run, std::optional<uint32_t> token) {
    (void)token;  // a stream's requests need no answer by name: the page's arrival answers them
    Record r;
    r.type = run.zero ? RecordType::zero : (config_.verify ? RecordType::pages_summed : RecordType::pages);
    r.block = run.block;
    r.offset = run.first_page * kStreamPageSize;
    r.length = run.count * kStreamPageSize;
    auto header = encode_record(r);
    std::span<const uint8_t> ram(run.host, run.zero ? 0 : r.length);
    if (config_.verify && !run.zero) append_page_sums(header, ram);
    auto s = run.zero ? out(path).write(header) : out(path).write_ram(header, ram);
    if (!s) return s.error();
    return header.size() + ram.size();
}

// END on the preempt connection first (the destination reads it to its END before it checks
// what is missing), then on the stream.
Status StreamSource::end() {
    Record end;
    end.type = RecordType::end;
    for (stream::ByteStream* s : {preempt_, &main_}) {
        if (s == nullptr) continue;
        if (auto w = s->write(encode_record(end)); !w) return w;
        if (auto f = s->flush(); !f) return f;
    }
    return {};
}

class StreamDest final : public DestPostcopyLink {
public:
    StreamDest(stream::ByteStream& main, stream::ByteStream* preempt, std::function<void()> cut, PostcopyLinkConfig config)
        : main_(main), preempt_(preempt), cut_(std::move(cut)), config_(std::move(config)) {}

    Status begin() override { return {}; }
    bool answers_apart() const override { return preempt_ != nullptr; }
    Status request(uint32_t block, uint64_t offset) override {
        return send(encode_page_request(block, offset, kStreamPageSize));
    }
    Result<PostcopyPages> next(Lane lane) override;
    Status release(const PostcopyPages& pages) override {
        (void)pages;  // read into the lane's buffer, which the lane's next arrival reuses
        return {};
    }
    Status done() override { return send(encode_postcopy_done()); }
    void cut() override {
        if (cut_) cut_();
    }

private:
    Status send(std::span<const uint8_t> bytes) {
        if (auto s = main_.write(bytes); !s) return s;
        return main_.flush();
    }
    // A lane's buffers: what next() returns points into them until the lane's next call.
    struct Buffers {
        std::vector<uint8_t> data;
        std::vector<uint64_t> sums;
    };
    Result<PostcopyPages> read_pages(stream::ByteStream& in, const Record& r, Buffers& buffers);

    stream::ByteStream& main_;
    stream::ByteStream* preempt_;
    std::function<void()> cut_;
    PostcopyLinkConfig config_;
    std::array<Buffers, 2> buffers_;  // one per lane
};

Result<PostcopyPages> StreamDest::next(Lane lane) {
    bool answers = lane == Lane::answers;
    if (answers && preempt_ == nullptr) return Error("internal: postcopy asked for answers on a lane this link lacks");
    stream::ByteStream& in = answers ? *preempt_ : main_;
    if (answers)  // silent while the guest touches nothing missing: as long as it takes
        if (auto s = in.await_readable(std::chrono::milliseconds(-1)); !s) return s.error();
    auto r = read_record(in, config_.blocks, kStreamPageSize);
    if (!r) return r.error();
    PostcopyPages p;
    p.block = r->block;
    p.offset = r->offset;
    p.pages = static_cast<uint32_t>(r->length / kStreamPageSize);  // at most kMaxPagesRecord: the decoder checked
    switch (r->type) {
        case RecordType::end: return PostcopyPages{};
        case RecordType::zero: p.kind = PostcopyPages::Kind::zero; return p;
        case RecordType::pages:
        case RecordType::pages_summed: return read_pages(in, *r, buffers_[answers ? 1 : 0]);
        default:
            return Error(fmt::format("migration stream: record {:#04x} in postcopy, where only PAGES, ZERO and END may come",
                                     static_cast<unsigned>(r->type)));
    }
}

Result<PostcopyPages> StreamDest::read_pages(stream::ByteStream& in, const Record& r, Buffers& buffers) {
    if (config_.verify != (r.type == RecordType::pages_summed)) {
        return Error(config_.verify ? "migration stream: PAGES without sums under verify-ram"
                                    : "migration stream: PAGES_SUMMED without verify-ram");
    }
    buffers.sums.clear();
    if (config_.verify)
        if (auto s = read_page_sums(in, r.length, buffers.sums); !s) return s.error();
    buffers.data.resize(r.length);
    if (auto s = in.read_exact(buffers.data); !s) return s.error();
    PostcopyPages p;
    p.kind = PostcopyPages::Kind::data;
    p.block = r.block;
    p.offset = r.offset;
    p.pages = static_cast<uint32_t>(r.length / kStreamPageSize);
    p.data = buffers.data.data();
    p.sums = buffers.sums;
    return p;
}

}  // namespace

std::unique_ptr<SourcePostcopyLink> stream_postcopy_source(stream::ByteStream& main, stream::ByteStream* preempt, PostcopyLinkConfig config) {
    return std::make_unique<StreamSource>(main, preempt, std::move(config));
}

std::unique_ptr<DestPostcopyLink> stream_postcopy_dest(stream::ByteStream& main, stream::ByteStream* preempt, std::function<void()> cut,
                                                       PostcopyLinkConfig config) {
    return std::make_unique<StreamDest>(main, preempt, std::move(cut), std::move(config));
}

}  // namespace vmm::migration
