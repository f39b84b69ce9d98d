// Writes a few valid inputs for stream_fuzz into the directory given as argv[1], so the fuzzer
// starts from streams that get past the header.
#include <gnutls/gnutls.h>

#include <fstream>
#include <string>
#include <vector>

#include "vmm/machine/vcpu_state.h"
#include "vmm/migration/transport/ram_verifier.h"
#include "vmm/migration/wire/multifd_wire.h"
#include "vmm/migration/wire/return_path.h"
#include "vmm/migration/wire/file_format.h"
#include "vmm/migration/wire/stream_format.h"
#include "proto/postcopy_auth.h"
#include "proto/postcopy_wire.h"
#include "proto/pull_wire.h"
#include "proto/wire.h"

using namespace vmm::migration;

static void write(const std::string& path, uint8_t mode, const std::vector<uint8_t>& body) {
    std::ofstream f(path, std::ios::binary);
    f.put(static_cast<char>(mode));
    f.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size()));
}

static int rdma_seeds(const std::string& dir) {
    using namespace rdma_migrate;
    write(dir + "/private", 1, encode_private_data({1, kCapPinAll | kCapChannels | kCapChunkSize, 1, 2, 42, 16}));
    write(dir + "/private-base", 1, encode_private_data({1, kCapPinAll}));
    write(dir + "/private-pull", 1, encode_private_data({1, kCapPull}));
    PullMessage offer;
    offer.length = 64ull << 20, offer.address = 0x7f0000000000, offer.rkey = 0x1234, offer.reads = 16;
    write(dir + "/pull-offer", 16, encode_pull_message(offer));
    PullMessage pulled;
    pulled.type = PullType::pulled, pulled.bytes = 8ull << 20;
    write(dir + "/pull-pulled", 16, encode_pull_message(pulled));
    pulled.type = PullType::done;
    write(dir + "/pull-done", 16, encode_pull_message(pulled));
    write(dir + "/blocks", 0, encode_blocks({{0x10000000, 0, 64ull << 20, 5}, {0x20000000, 64ull << 20, 3ull << 20, 0}}));
    write(dir + "/register", 0, encode_register_entries(Command::register_request, {{3 << 20, 0, 1}, {(64ull + 2) << 20, 1, 0}}));
    write(dir + "/unregister", 0, encode_register_entries(Command::unregister_request, {{3, 0, 0}}));
    write(dir + "/result", 0, encode_register_results({{7, 0x10000000}, {8, 0x10100000}}));
    write(dir + "/compress", 0, encode_compress({{0, 1, 0, 1 << 20}}));
    write(dir + "/error", 0, encode_error("because"));
    write(dir + "/sums", 0, encode_sums({{0, 1 << 20, {1, 2, 3}}, {1, 0, {4}}}));
    write(dir + "/file", 0, encode_message(Command::qemu_file, 1, std::vector<uint8_t>(100, 7)));
    // An authenticated connection's messages as its TLS session delivers them: back to back.
    auto in_tls = encode_empty(Command::ready);
    for (const auto& m : {encode_register_results({{7, 0x10000000}}), encode_sums({{0, 0, {9}}}), encode_empty(Command::register_finished)})
        in_tls.insert(in_tls.end(), m.begin(), m.end());
    write(dir + "/in-tls", 4, in_tls);
    PcMessage request;
    request.type = PcType::request, request.slot = 3, request.block = 1, request.pages = 1, request.offset = 8192;
    write(dir + "/pc-request", 2, encode_pc_message(request));
    write(dir + "/pc-hello", 2, encode_pc_message({PcType::hello, 9, 32, 32, 0x7f0000000000, kPcSlotSize}));
    auto write_imm = encode_pc_trailer({1, 2, kPcSummed, 4096, {5, 6}});
    uint32_t imm = encode_pc_immediate({PcKind::data, 40, 2});
    write_imm.insert(write_imm.begin(), {uint8_t(imm >> 24), uint8_t(imm >> 16), uint8_t(imm >> 8), uint8_t(imm)});
    write(dir + "/pc-write", 2, write_imm);
    // An authenticated channel's (mode bit 3, the fuzzer's fixed key): a sealed REQUEST, and a
    // tagged zero write (no pages before its trailer).
    const std::vector<uint8_t> key(kPcAuthKeySize, 0x5c);
    write(dir + "/pc-sealed", 2 | 8, seal_pc_message(request, PcKeys::from(key)->messages));
    PcTrailer zero{1, 2, kPcTagged, 4096, {}};
    auto tagged = encode_pc_trailer(zero);
    encode_pc_tag(tagged, pc_write_tag(PcKeys::from(key)->writes, PcKind::zero, tagged, {}));
    uint32_t zimm = encode_pc_immediate({PcKind::zero, 40, 2});
    tagged.insert(tagged.begin(), {uint8_t(zimm >> 24), uint8_t(zimm >> 16), uint8_t(zimm >> 8), uint8_t(zimm)});
    write(dir + "/pc-tagged-write", 2 | 8, tagged);
    return 0;
}

static void write_text(const std::string& path, uint8_t mode, const std::string& text) {
    write(path, mode, std::vector<uint8_t>(text.begin(), text.end()));
}

// Monitor sessions: every command on each monitor, well formed, then a few that are not.
static int monitor_seeds(const std::string& dir) {
    write_text(dir + "/hmp", 0,
               "help\ninfo status\ninfo ramblocks\ninfo dirty-rate\ninfo ramhash\ninfo guest\ninfo registers\n"
               "stop\ncont\ninfo migrate\ninfo migrate-rounds\ninfo migrate_capabilities\ninfo migrate_parameters\n"
               "migrate_set_capability auto-converge on\nmigrate_set_parameter max-bandwidth 1g\n"
               "migrate_set_parameter downtime-limit 50\nmigrate -d unix:/nonexistent/vmm.sock\nmigrate_cancel\n"
               "migrate_incoming tcp:127.0.0.1:1\nmigrate_set_capability \"zero\" off\n");
    write_text(dir + "/qmp", 1,
               R"({"execute":"qmp_capabilities"})" "\n"
               R"({"execute":"query-status","id":1})" "\n"
               R"({"execute":"query-commands","id":"x"})" "\n"
               R"({"execute":"migrate-set-capabilities","arguments":{"capabilities":[{"capability":"events","state":true}]}})" "\n"
               R"({"execute":"migrate-set-parameters","arguments":{"max-bandwidth":1048576,"downtime-limit":"100"}})" "\n"
               R"({"execute":"query-migrate-parameters"})" "\n"
               R"({"execute":"migrate","arguments":{"uri":"unix:/nonexistent/vmm.sock"}})" "\n"
               R"({"execute":"query-migrate"})" "\n"
               R"({"execute":"stop"})" "\n" R"({"execute":"cont"})" "\n"
               R"({"execute":42,"id":[[{"a":null}]]})" "\n");
    write_text(dir + "/qmp-unnegotiated", 1, R"({"execute":"query-status"})" "\n" "[1,2\n");
    return 0;
}

#ifdef VMM_WITH_VMMD
#include "vmmd/domain/save_image.h"
#include "vmmd/rpc/message.h"

// The statistics calls (vmmd/daemon/stats_procedures.cc) as virsh nodecpustats, nodememstats,
// freecell, vcpuinfo, vcpucount, dommemstat and domstats make them, and the changes in part
// (config_procedures.cc), on the fuzzer's domain "fz".
template <typename Call>
static void stats_session(Call& call) {
    using namespace vmmd;
    const uint8_t uuid[16] = {0x0d, 0x9a, 0x3b, 0x2e, 0x2f, 0x7c, 0x4c, 0x59, 0x9e, 0x7e, 0x7a, 0x3c, 0x1a, 0x5b, 0x9f, 0x10};
    auto words = [](std::initializer_list<int32_t> ws) {
        xdr::Writer w;
        for (int32_t v : ws) w.i32(v);
        return w.take();
    };
    auto on_fz = [&uuid](std::initializer_list<int32_t> ws) {
        xdr::Writer w;
        w.string("fz");
        w.fixed_opaque(uuid);
        w.i32(-1);
        for (int32_t v : ws) w.i32(v);
        return w.take();
    };
    xdr::Writer open;
    open.optional_string(std::string("vmm:///system"));
    open.u32(0);
    call(1, open.take());
    call(227, words({-1, 0, 0}));
    call(227, words({0, 4, 0}));
    call(228, words({4, -1, 0}));
    call(102);
    call(101, words({0, 1}));
    call(293, words({1, 1, 0}));
    call(17, on_fz({}));
    call(18, on_fz({}));
    call(200, on_fz({4 | 2}));
    call(20, on_fz({2, 1}));
    call(230, on_fz({2, 1, 2}));
    call(159, on_fz({12, 0}));
    xdr::Writer all;
    all.u32(1);
    all.string("fz");
    all.fixed_opaque(uuid);
    all.i32(-1);
    all.u32(0);
    all.u32(0);
    call(344, all.take());
    call(344, words({0, 15, 16}));
    // virsh domcapabilities (all defaults, then each named) and cpu-models x86_64.
    xdr::Writer caps;
    for (int i = 0; i < 4; ++i) caps.optional_string(std::nullopt);
    caps.u32(0);
    call(342, caps.take());
    xdr::Writer named;
    for (const char* v : {"/usr/bin/vmm", "x86_64", "vmm", "vmm"}) named.optional_string(std::string(v));
    named.u32(0);
    call(342, named.take());
    xdr::Writer models;
    models.string("x86_64");
    models.i32(1);
    models.u32(0);
    call(312, models.take());
    // The older migration steps (libvirt-python's dom.migrate()): Begin3 and Prepare3.
    xdr::Writer begin3;
    begin3.string("fz");
    begin3.fixed_opaque(uuid);
    begin3.i32(-1);
    begin3.optional_string(std::nullopt);
    begin3.u64(1);
    begin3.optional_string(std::string("fz2"));
    begin3.u64(100);
    call(213, begin3.take());
    xdr::Writer prepare3;
    prepare3.opaque({});
    prepare3.optional_string(std::string("tcp://127.0.0.1:49152"));
    prepare3.u64(1);
    prepare3.optional_string(std::nullopt);
    prepare3.u64(0);
    prepare3.string("<domain type='vmm'><name>fz</name></domain>");
    call(214, prepare3.take());
    // virsh hypervisor-cpu-compare and hypervisor-cpu-baseline.
    xdr::Writer compare;
    for (int i = 0; i < 4; ++i) compare.optional_string(std::nullopt);
    compare.string("<cpu mode='custom'><model>Skylake-Client</model><feature name='vmx'/></cpu>");
    compare.u32(1);
    call(393, compare.take());
    xdr::Writer baseline;
    for (int i = 0; i < 4; ++i) baseline.optional_string(std::nullopt);
    baseline.u32(1);
    baseline.string("<cpu mode='host-passthrough'/>");
    baseline.u32(0);
    call(394, baseline.take());
    // virsh metadata URI --key app --set XML --config, then its read, and setmaxmem --config.
    xdr::Writer set;
    set.string("fz");
    set.fixed_opaque(uuid);
    set.i32(-1);
    set.i32(2);
    set.optional_string(std::string("<owner team='db'>alice</owner>"));
    set.optional_string(std::string("app"));
    set.optional_string(std::string("http://example.org/app/1"));
    set.u32(2);
    call(264, set.take());
    xdr::Writer get;
    get.string("fz");
    get.fixed_opaque(uuid);
    get.i32(-1);
    get.i32(2);
    get.optional_string(std::string("http://example.org/app/1"));
    get.u32(0);
    call(265, get.take());
    xdr::Writer mem;
    mem.string("fz");
    mem.fixed_opaque(uuid);
    mem.i32(-1);
    mem.u64(8192);
    mem.u32(2 | 4);
    call(204, mem.take());
}

// One client connection to vmmd: what virsh sends first, the connection-level calls, a call
// vmmd does not serve, a keepalive ping, and the close.
static int libvirt_seeds(const std::string& dir) {
    using namespace vmmd;
    std::vector<uint8_t> session;
    uint32_t serial = 0;
    auto add = [&](uint32_t program, int32_t proc, rpc::Type type, const std::vector<uint8_t>& payload) {
        auto m = rpc::encode_message({program, 1, proc, type, serial++, rpc::ReplyStatus::ok}, payload);
        session.insert(session.end(), m.begin(), m.end());
    };
    auto call = [&](int32_t proc, const std::vector<uint8_t>& payload = {}) {
        add(rpc::kRemoteProgram, proc, rpc::Type::call, payload);
    };
    xdr::Writer feature, open;
    feature.i32(10);
    open.optional_string(std::string("vmm:///system"));
    open.u32(0);
    call(66);
    call(60, feature.take());
    call(1, open.take());
    for (int32_t proc : {3, 4, 6, 59, 110, 157, 53}) call(proc);
    add(rpc::kKeepaliveProgram, rpc::kKeepalivePing, rpc::Type::message, {});
    call(2);
    std::ofstream(dir + "/session", std::ios::binary)
        .write(reinterpret_cast<const char*>(session.data()), static_cast<std::streamsize>(session.size()));
    session.clear();
    stats_session(call);
    std::ofstream(dir + "/stats", std::ios::binary)
        .write(reinterpret_cast<const char*>(session.data()), static_cast<std::streamsize>(session.size()));
    // The QEMU program's monitor command (virsh qemu-monitor-command) to "fr", the fuzzer's running
    // domain: QMP with an id, a refused command, text that is not JSON, and an HMP line.
    session.clear();
    xdr::Writer open_again;
    open_again.optional_string(std::string("vmm:///system"));
    open_again.u32(0);
    call(1, open_again.take());
    const uint8_t running[16] = {0x0d, 0x9a, 0x3b, 0x2e, 0x2f, 0x7c, 0x4c, 0x59, 0x9e, 0x7e, 0x7a, 0x3c, 0x1a, 0x5b, 0x9f, 0x11};
    auto monitor = [&](const std::string& cmd, uint32_t flags) {
        xdr::Writer w;
        w.string("fr");
        w.fixed_opaque(running);
        w.i32(1);
        w.string(cmd);
        w.u32(flags);
        add(rpc::kQemuProgram, 1, rpc::Type::call, w.take());
    };
    monitor(R"({"execute":"query-status","arguments":{},"id":"libvirt-1"})", 0);
    monitor(R"({"execute":"fail","arguments":[1]})", 0);
    monitor("info status", 0);
    monitor("info migrate-plan", 1);
    add(rpc::kQemuProgram, 4, rpc::Type::call, {});
    std::ofstream(dir + "/qemu-monitor", std::ios::binary)
        .write(reinterpret_cast<const char*>(session.data()), static_cast<std::streamsize>(session.size()));
    // Monitor event registrations (virsh qemu-monitor-event): "fr" and an expression, every
    // domain and one name without case, an expression that does not compile, a deregistration.
    session.clear();
    xdr::Writer open_third;
    open_third.optional_string(std::string("vmm:///system"));
    open_third.u32(0);
    call(1, open_third.take());
    auto watch = [&](bool one, std::optional<std::string> event, uint32_t flags) {
        xdr::Writer w;
        w.boolean(one);
        if (one) {
            w.string("fr");
            w.fixed_opaque(running);
            w.i32(1);
        }
        w.optional_string(event);
        w.u32(flags);
        add(rpc::kQemuProgram, 4, rpc::Type::call, w.take());
    };
    watch(true, "^MIG(RATION)?$", 1);
    watch(false, "migration", 2);
    watch(false, "([", 1);
    watch(false, std::nullopt, 0);
    xdr::Writer drop;
    drop.i32(1);
    add(rpc::kQemuProgram, 5, rpc::Type::call, drop.take());
    std::ofstream(dir + "/qemu-monitor-events", std::ios::binary)
        .write(reinterpret_cast<const char*>(session.data()), static_cast<std::streamsize>(session.size()));
    return 0;
}

static int domain_seeds(const std::string& dir) {
    std::ofstream(dir + "/full") << "<domain type='vmm'><name>db</name><uuid>0d9a3b2e-2f7c-4c59-9e7e-7a3c1a5b9f10</uuid>"
        "<title>t</title><memory unit='MiB'>64</memory><currentMemory unit='KiB'>65536</currentMemory><vcpu>2</vcpu>"
        "<os><type>hvm</type><kernel>stress</kernel><cmdline>bytes=8M</cmdline></os>"
        "<memtune><hard_limit unit='GiB'>1</hard_limit></memtune><on_poweroff>destroy</on_poweroff>"
        "<on_crash>destroy</on_crash><devices><serial type='file'><source path='/tmp/s'/></serial></devices>"
        "<metadata><vmm:vmm xmlns:vmm='https://github.com/vmm/xmlns/domain/1'><vmm:dirty-tracking>ring"
        "</vmm:dirty-tracking><vmm:prealloc>on</vmm:prealloc></vmm:vmm></metadata></domain>";
    std::ofstream(dir + "/others-metadata") << "<domain type='vmm' xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>"
        "<name>n</name><memory>4096</memory><os><kernel>idle</kernel></os><metadata><nova:instance><nova:name>web</nova:name>"
        "<nova:flavor name='m1'/></nova:instance><plain a='1'>x &amp; y</plain><d xmlns='urn:d'><e/></d></metadata></domain>";
    std::ofstream(dir + "/metadata-fragment") << "<owner team='db'><x:sub xmlns:x='urn:x'>alice</x:sub></owner>";
    std::ofstream(dir + "/small") << "<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os></domain>";
    auto image = vmmd::encode_save_image_header({"<domain type='vmm'><name>a</name></domain>", true});
    std::ofstream(dir + "/save-image", std::ios::binary).write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
    return 0;
}

// A run record as vmmd writes one (vmmd/runtime/run_record.cc).
static int run_record_seeds(const std::string& dir) {
    std::ofstream(dir + "/record") << R"({"id":3,"pid":4242,"reason":1,"start-ticks":123456,"state":1,)"
                                      R"("xml":"<domain type='vmm'><name>a</name></domain>"})" << "\n";
    return 0;
}

// A cookie as vmmd sends one after Perform3, and a typed-parameter list as virsh migrate sends.
static int migration_cookie_seeds(const std::string& dir) {
    std::ofstream(dir + "/cookie") << R"({"hostname":"a","name":"demo","uuid":"0d9a3b2e-2f7c-4c59-9e7e-7a3c1a5b9f10",)"
                                      R"("vmm-migration":1,"stats":{"type":3,"operation":5,"time-elapsed":12,"setup-time":0,)"
                                      R"("has-downtime":true,"downtime":4,"memory-total":1,"memory-processed":1,)"
                                      R"("memory-remaining":0,"memory-constant":0,"memory-normal":0,"memory-normal-bytes":0,)"
                                      R"("memory-bps":0,"memory-dirty-rate":0,"memory-iteration":1,"throttle":0,"error":""}})";
    vmmd::xdr::Writer w;
    w.u32(2);
    w.string("migrate_uri");
    w.i32(7);
    w.string("tcp://127.0.0.1:49152");
    w.string("bandwidth");
    w.i32(4);
    w.u64(100);
    std::ofstream(dir + "/params", std::ios::binary).write(reinterpret_cast<const char*>(w.bytes().data()), static_cast<std::streamsize>(w.bytes().size()));
    return 0;
}
#endif

// Postcopy's return path: a request, a received bitmap (with its words), the end.
static int return_path_seeds(const std::string& dir) {
    std::vector<uint8_t> s = encode_page_request(0, 8192, 4096);
    std::vector<uint64_t> words = {0xffULL, 0x1ULL};
    for (auto part : {encode_received_bitmap(1, 0, 65, words), encode_postcopy_done()}) s.insert(s.end(), part.begin(), part.end());
    std::ofstream(dir + "/messages", std::ios::binary).write(reinterpret_cast<const char*>(s.data()), static_cast<std::streamsize>(s.size()));
    // A resumed precopy's report: the round each page of the fuzzer's two blocks arrived in.
    std::vector<uint32_t> low(256, 0), high(64, kNeverArrived);
    low[3] = 2;
    high[5] = 1;
    std::vector<uint8_t> r = encode_received_rounds(0, 0, low);
    auto h = encode_received_rounds(1, 0, high);
    r.insert(r.end(), h.begin(), h.end());
    std::ofstream(dir + "/rounds", std::ios::binary).write(reinterpret_cast<const char*>(r.data()), static_cast<std::streamsize>(r.size()));
    return 0;
}

// A TLS 1.3 ClientHello as a source sends it (GnuTLS's own), and a plaintext stream's first
// bytes where TLS is expected.
static gnutls_session_t g_hello_session = nullptr;
static int tls_seeds(const std::string& dir) {
    gnutls_session_t s = nullptr;
    gnutls_certificate_credentials_t creds = nullptr;
    if (gnutls_init(&s, GNUTLS_CLIENT) < 0 || gnutls_certificate_allocate_credentials(&creds) < 0) return 1;
    g_hello_session = s;
    gnutls_priority_set_direct(s, "NORMAL:-VERS-ALL:+VERS-TLS1.3", nullptr);
    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, creds);
    gnutls_server_name_set(s, GNUTLS_NAME_DNS, "localhost", 9);
    std::vector<uint8_t> hello;
    gnutls_transport_set_ptr(s, &hello);
    gnutls_transport_set_push_function(s, [](gnutls_transport_ptr_t p, const void* d, size_t n) -> ssize_t {
        auto* out = static_cast<std::vector<uint8_t>*>(p);
        out->insert(out->end(), static_cast<const uint8_t*>(d), static_cast<const uint8_t*>(d) + n);
        return static_cast<ssize_t>(n);
    });
    gnutls_transport_set_pull_function(s, [](gnutls_transport_ptr_t, void*, size_t) -> ssize_t {
        gnutls_transport_set_errno(g_hello_session, EAGAIN);  // nothing from the server: the hello alone
        return -1;
    });
    (void)gnutls_handshake(s);
    std::ofstream(dir + "/client-hello", std::ios::binary).write(reinterpret_cast<const char*>(hello.data()), static_cast<std::streamsize>(hello.size()));
    std::ofstream(dir + "/plaintext") << "VMMIGRAT";
    gnutls_deinit(s);
    gnutls_certificate_free_credentials(creds);
    return hello.empty() ? 1 : 0;
}

// make_fuzz_seeds stream|rdma|monitor|return-path|tls|libvirt|domain|run-record|migration-cookie DIR
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    std::string dir = argv[2];
    if (std::string(argv[1]) == "rdma") return rdma_seeds(dir);
    if (std::string(argv[1]) == "monitor") return monitor_seeds(dir);
    if (std::string(argv[1]) == "return-path") return return_path_seeds(dir);
    if (std::string(argv[1]) == "tls") return tls_seeds(dir);
#ifdef VMM_WITH_VMMD
    if (std::string(argv[1]) == "libvirt") return libvirt_seeds(dir);
    if (std::string(argv[1]) == "domain") return domain_seeds(dir);
    if (std::string(argv[1]) == "run-record") return run_record_seeds(dir);
    if (std::string(argv[1]) == "migration-cookie") return migration_cookie_seeds(dir);
#endif
    StreamHeader h;
    h.vcpu_count = 1;
    h.blocks = {{"pc.ram", 0, 1 << 20}, {"high", 4 << 20, 256 << 10}};
    std::vector<uint8_t> s = encode_header(h);
    auto add = [&s](const std::vector<uint8_t>& b) { s.insert(s.end(), b.begin(), b.end()); };
    add(encode_record({RecordType::round_begin, 0, 0, 0, 0}));
    add(encode_record({RecordType::populate, 0, 4096, 8192, 0}));
    add(encode_record({RecordType::pages, 0, 4096, 4096, 0}));
    s.insert(s.end(), 4096, 0xab);
    add(encode_record({RecordType::pages, 0, 8192, 4096, 0}));
    s.insert(s.end(), 4096, 0xcd);
    add(encode_record({RecordType::zero, 1, 0, 8192, 0}));
    add(encode_record({RecordType::round_end, 0, 0, 0, 0}));
    vmm::ByteWriter state;
    state.put(uint32_t{1});
    vmm::machine::VcpuState v;
    v.xsave.assign(4096, 0);
    v.msrs = {{0x10, 0, 1}};
    vmm::machine::encode_vcpu_state(state, v);
    add(encode_record({RecordType::state, 0, 0, state.bytes().size(), 0}));
    add(state.bytes());
    add(encode_record({RecordType::end, 0, 0, 0, 0}));
    write(dir + "/stream", 0, s);
    // The same with verify-ram: PAGES_SUMMED records (one sum right, one wrong) instead of PAGES.
    h.features = kFeatureVerifyRam;
    std::vector<uint8_t> summed = encode_header(h);
    auto addv = [&summed](const std::vector<uint8_t>& b) { summed.insert(summed.end(), b.begin(), b.end()); };
    addv(encode_record({RecordType::round_begin, 0, 0, 0, 0}));
    std::vector<uint8_t> page(4096, 0xab);
    std::vector<uint8_t> right = encode_record({RecordType::pages_summed, 0, 4096, 4096, 0});
    append_page_sums(right, page);
    addv(right);
    addv(page);
    std::vector<uint8_t> wrong = encode_record({RecordType::pages_summed, 0, 8192, 4096, 0});
    wrong.resize(wrong.size() + 8, 0x11);
    addv(wrong);
    addv(page);
    addv(encode_record({RecordType::round_end, 0, 0, 0, 0}));
    addv(encode_record({RecordType::state, 0, 0, state.bytes().size(), 0}));
    addv(state.bytes());
    addv(encode_record({RecordType::end, 0, 0, 0, 0}));
    write(dir + "/stream-verified", 6, summed);  // 6 % 3 = 0: a whole stream; bit 2: verify-ram
    // A resumable source's: its SESSION after the header, then the same records.
    StreamHeader resumable = h;
    resumable.features = kFeatureResumable;
    std::vector<uint8_t> r = encode_header(resumable);
    Record session{RecordType::session, 0, 0, 0, 0};
    session.session = 0x1234567890abcdefULL;
    session.window_ms = 30000;
    auto session_bytes = encode_record(session);
    r.insert(r.end(), session_bytes.begin(), session_bytes.end());
    r.insert(r.end(), s.begin() + static_cast<long>(encode_header(h).size()), s.end());
    write(dir + "/stream-resumable", 0, r);
    write(dir + "/records", 1, std::vector<uint8_t>(s.begin() + static_cast<long>(encode_header(h).size()), s.end()));
    write(dir + "/reply", 2, encode_reply(ReplyType::refused, "because"));
    write(dir + "/state", 2, state.bytes());
    FileHeader saved = file_layout(h.blocks, 1);
    saved.stream_length = s.size();
    saved.save_id = 1;
    write(dir + "/file-header", 2, *encode_file_header(saved));
    auto preface = encode_hello({Hello::Kind::preface, 2 | kPrefacePreempt, 7});  // two lanes and a preempt connection
    write(dir + "/hello-preface", 2, std::vector<uint8_t>(preface.begin(), preface.end()));
    auto preempt = encode_hello({Hello::Kind::preempt, 0, 7});
    write(dir + "/hello-preempt", 2, std::vector<uint8_t>(preempt.begin(), preempt.end()));
    return 0;
}
