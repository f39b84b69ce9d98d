#include "control_channel.h"
#include "control_tls.h"
#include "trace.h"

#include <fmt/format.h>

#include <cstring>

namespace rdma_migrate {

ControlChannel::~ControlChannel() {
    for (auto& mr : recv_mr_) mr.reset();
    send_mr_.reset();
    ControlBuffers::give_back(std::move(buffers_));
}

Status ControlChannel::init() {
    auto set = ControlBuffers::take();
    if (!set) return set.error();
    buffers_ = std::move(*set);
    for (size_t i = 0; i < recv_buf_.size(); ++i) {
        recv_buf_[i] = buffers_->receive(i);
        auto mr = e_.memory().register_memory(recv_buf_[i].data(), recv_buf_[i].size(), Use::control_receive,
                                              "a control receive buffer");
        if (!mr) return mr.error();
        recv_mr_[i] = std::move(*mr);
        if (auto s = post_recv(i); !s) return s;
    }
    send_buf_ = buffers_->send();
    auto mr = e_.memory().register_memory(send_buf_.data(), send_buf_.size(), Use::control_send, "the control send buffer");
    if (!mr) return mr.error();
    send_mr_ = std::move(*mr);
    return {};
}

BeforeConnect ControlChannel::make_on(std::unique_ptr<ControlChannel>& ctl) {
    return [&ctl](Endpoint& e) {
        ctl = std::make_unique<ControlChannel>(e);
        return ctl->init();
    };
}

Status ControlChannel::post_recv(size_t i) {
    ibv_sge sge{reinterpret_cast<uint64_t>(recv_buf_[i].data()), static_cast<uint32_t>(recv_buf_[i].size()), recv_mr_[i]->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = make_wr_id(WrKind::recv, i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return posted(ibv_post_recv(e_.qp.get(), &wr, &bad), "ibv_post_recv");
}

Status ControlChannel::on_completion(const ibv_wc& wc) {
    switch (wr_kind(wc.wr_id)) {
        case WrKind::recv: arrived_.emplace_back(wr_index(wc.wr_id), wc.byte_len); return {};
        case WrKind::send: send_done_ = true; return {};
        case WrKind::write: return on_other ? on_other(wc) : Status{};
    }
    return Error(fmt::format("unexpected completion wr_id {:#x}", wc.wr_id));
}

Status ControlChannel::progress(const std::function<bool()>& done, int timeout_ms) {
    return e_.progress([this](const ibv_wc& wc) { return on_completion(wc); }, done, timeout_ms);
}

Status ControlChannel::reap() {
    return e_.reap([this](const ibv_wc& wc) { return on_completion(wc); });
}

Status ControlChannel::send_raw(const std::vector<uint8_t>& msg, Sent sent, int timeout_ms) {
    if (msg.size() > send_buf_.size()) return Error("RDMA control message larger than the control buffer");
    if (auto s = progress([this] { return send_done_; }, timeout_ms); !s) return s;  // one SEND in flight at a time
    std::memcpy(send_buf_.data(), msg.data(), msg.size());
    if (tracing() && msg.size() >= kHeaderSize) {
        if (auto h = decode_message(msg)) trace("{} -> {} (repeat {}, {} bytes)", e_.describe, to_string(h->header.type), h->header.repeat, msg.size());
    }
    ibv_sge sge{reinterpret_cast<uint64_t>(send_buf_.data()), static_cast<uint32_t>(msg.size()), send_mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = make_wr_id(WrKind::send, ++sends_);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    send_done_ = false;
    if (auto s = posted(ibv_post_send(e_.qp.get(), &wr, &bad), "ibv_post_send (control)"); !s) return s;
    if (sent == Sent::later) return {};
    return progress([this] { return send_done_; }, timeout_ms);
}

Result<Message> ControlChannel::next_raw() {
    if (auto s = progress([this] { return !arrived_.empty(); }); !s) return s.error();
    auto [index, length] = arrived_.front();
    arrived_.pop_front();
    // The message's length never exceeds the posted buffer: the HCA would have failed the receive.
    auto m = decode_message({recv_buf_[index].data(), std::min<size_t>(length, recv_buf_[index].size())});
    if (m) trace("{} <- {} (repeat {}, {} bytes)", e_.describe, to_string(m->header.type), m->header.repeat, length);
    if (auto s = post_recv(index); !s) return s.error();
    return m;
}

Status ControlChannel::await_message(int timeout_ms) {
    return progress([this] { return !arrived_.empty(); }, timeout_ms);
}

Status ControlChannel::send_now(const std::vector<uint8_t>& msg, Sent sent, int timeout_ms) {
    if (!tls_) return send_raw(msg, sent, timeout_ms);
    if (tracing() && msg.size() >= kHeaderSize) {
        if (auto h = decode_message(msg)) trace("{} -> {} in TLS (repeat {}, {} bytes)", e_.describe, to_string(h->header.type), h->header.repeat, msg.size());
    }
    if (auto s = tls_->write(std::span<const uint8_t>(msg)); !s) return s;
    if (auto s = tls_->flush(); !s) return s;
    return pipe_->send_pending(sent, timeout_ms);
}

// Inside TLS a message is its header, then the length that header gives (checked against the
// control buffer before anything is read for it), then decoded as any other.
Result<Message> ControlChannel::next_message() {
    if (!tls_) return next_raw();
    std::vector<uint8_t> bytes(kHeaderSize);
    if (auto s = tls_->read_exact(bytes); !s) return s.error();
    auto size = message_size_in_stream(bytes);
    if (!size) return size.error();
    bytes.resize(*size);
    if (auto s = tls_->read_exact(std::span<uint8_t>(bytes).subspan(kHeaderSize)); !s) return s.error();
    auto m = decode_message(bytes);
    if (m) trace("{} <- {} in TLS (repeat {}, {} bytes)", e_.describe, to_string(m->header.type), m->header.repeat, bytes.size());
    return m;
}

Status ControlChannel::secure(const vmm::stream::TlsSetup& setup) {
    auto pipe = std::make_unique<ControlPipe>(*this);
    ControlPipe* raw = pipe.get();
    auto tls = vmm::stream::tls_handshake(std::move(pipe), setup);
    if (!tls) return tls.error();
    raw->handshake_done();
    pipe_ = raw;
    tls_ = std::move(*tls);
    trace("{}: TLS 1.3 session established, the peer authenticated", e_.describe);
    return {};
}

Result<std::vector<uint8_t>> ControlChannel::export_key(const std::string& label, size_t size) const {
    if (!tls_) return Error("internal: keying material asked of a control channel without TLS");
    return vmm::stream::tls_export(*tls_, label, size);
}

Status ControlChannel::exchange_send(const std::vector<uint8_t>& msg, Sent sent) {
    auto ready = next_message();
    if (!ready) return ready.error();
    if (ready->header.type == Command::error) return peer_aborted(*ready);
    if (ready->header.type != Command::ready) {
        return Error(fmt::format("RDMA control channel: expected READY, received {}", to_string(ready->header.type)));
    }
    return send_now(msg, sent);
}

Result<Message> ControlChannel::exchange_recv(std::initializer_list<Command> expected) {
    // READY's own completion is not waited for: the message it invites proves it arrived, and
    // a peer that sends its last message (the go-ahead) and hangs up can leave READY's
    // acknowledgement unprocessed, so READY flushes although the message is already here.
    // The next send still waits for READY's completion first (one SEND in flight at a time).
    if (auto s = send_now(encode_empty(Command::ready), Sent::later); !s) return s.error();
    auto m = next_message();
    if (!m) return m.error();
    if (m->header.type == Command::error) return peer_aborted(*m);
    for (Command c : expected)
        if (m->header.type == c) return m;
    return Error(fmt::format("RDMA control channel: unexpected {}", to_string(m->header.type)));
}

Result<Message> ControlChannel::request(const std::vector<uint8_t>& msg, Command expected) {
    if (auto s = exchange_send(msg); !s) return s.error();
    return answer(expected);
}

Result<Message> ControlChannel::answer(Command answer) {
    auto m = next_message();
    if (!m) return m.error();
    if (m->header.type == Command::error) return peer_aborted(*m);
    if (m->header.type != answer) {
        return Error(fmt::format("RDMA control channel: expected {}, received {}", to_string(answer), to_string(m->header.type)));
    }
    return m;
}

Error ControlChannel::peer_aborted(const Message& m) {
    peer_aborted_ = true;
    return Error("the peer aborted: " + decode_error(m));
}

void ControlChannel::send_error(const std::string& reason) {
    if (sent_error_) return;  // once: the first reason is the one that counts
    sent_error_ = true;
    if (!e_.qp.get()) return;
    (void)send_now(encode_error(reason, error_text_), Sent::wait, std::min(kErrorNoticeMs, e_.io_timeout_ms));
}

}  // namespace rdma_migrate
