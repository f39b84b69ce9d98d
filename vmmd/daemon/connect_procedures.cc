#include "vmmd/daemon/connect_procedures.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "vmmd/domain/domain_xml.h"

namespace vmmd {

namespace {

using rpc::Proc;
using rpc::Access;
using rpc::Caller;
using rpc::Reply;
using xdr::Reader;
using xdr::Writer;

// libvirt's procedure numbers (remote_protocol.x) and private feature numbers
// (libvirt_internal.h) that these handlers answer.
constexpr int32_t kFeatureMigrationP2P = 4, kFeatureMigrationV3 = 6, kFeatureChangeProtection = 7, kFeatureTypedParamString = 9,
                  kFeatureProgramKeepalive = 10, kFeatureMigrationParams = 13, kFeatureRemoteEventCallback = 14;
constexpr size_t kModelChars = 32;  // remote_node_get_info_ret: char model[32]

Reply open(const DriverIdentity& id, Caller& c, Reader& args) {
    auto name = args.optional_string(rpc::kMaxString);
    auto flags = args.u32();
    if (!name || !flags) return rpc::fail(VIR_ERR_RPC, "CONNECT_OPEN: arguments that do not decode");
    if (c.opened) return rpc::fail(VIR_ERR_OPERATION_INVALID, "CONNECT_OPEN: this connection is already open");
    std::string uri = name->value_or(id.default_uri);
    if (uri != "vmm:///system" && uri != "vmm:///session") {
        return rpc::fail(VIR_ERR_NO_CONNECT,
                         fmt::format("vmmd serves vmm:///system and vmm:///session, not '{}'", uri));
    }
    c.opened = true;
    c.uri = uri;
    if ((*flags & VIR_CONNECT_RO) != 0) c.read_only = true;
    return rpc::ok();
}

Reply close(Caller& c, Reader&) {
    c.opened = false;
    c.closed = true;
    return rpc::ok();
}

Reply supports_feature(Caller&, Reader& args) {
    auto feature = args.i32();
    if (!feature) return rpc::fail(VIR_ERR_RPC, "CONNECT_SUPPORTS_FEATURE: arguments that do not decode");
    return rpc::ok_i32(*feature == kFeatureTypedParamString || *feature == kFeatureProgramKeepalive ||
                               *feature == kFeatureRemoteEventCallback || *feature == kFeatureMigrationV3 ||
                               *feature == kFeatureMigrationParams || *feature == kFeatureMigrationP2P ||
                               *feature == kFeatureChangeProtection
                           ? 1
                           : 0);
}

Reply auth_list(Caller&, Reader&) {
    Writer w;
    w.u32(1);
    w.i32(0);  // REMOTE_AUTH_NONE: the socket's owner and mode decide who connects
    return rpc::ok(std::move(w));
}

Reply hostname(Caller&, Reader&) { return rpc::ok_string(local_hostname()); }

}  // namespace

// The host as libvirt's virNodeInfo has it, from /proc.
NodeInfo read_node_info() {
    NodeInfo n;
    n.cpus = static_cast<int32_t>(::sysconf(_SC_NPROCESSORS_ONLN));
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    uint64_t value = 0;
    while (meminfo >> key >> value) {
        if (key == "MemTotal:") n.memory_kib = value;
        meminfo.ignore(1 << 10, '\n');
    }
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::set<std::string> packages;
    int32_t cores = 0;
    for (std::string line; std::getline(cpuinfo, line);) {
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string k = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1), v = line.substr(colon + 1);
        if (k == "cpu MHz" && n.mhz == 0) n.mhz = static_cast<int32_t>(std::atof(v.c_str()));
        if (k == "physical id") packages.insert(v);
        if (k == "cpu cores") cores = std::atoi(v.c_str());
    }
    int32_t sockets = std::max<int32_t>(1, static_cast<int32_t>(packages.size()));
    if (cores > 0 && n.cpus % (sockets * cores) == 0) {
        n.sockets = sockets;
        n.cores = cores;
        n.threads = n.cpus / (sockets * cores);
    } else {  // what /proc says does not add up: every CPU a core of one socket
        n.cores = n.cpus;
    }
    return n;
}

namespace {

Reply node_get_info(Caller&, Reader&) {
    NodeInfo n = read_node_info();
    Writer w;
    std::string model = "x86_64";
    for (size_t i = 0; i < kModelChars; ++i) w.i32(i < model.size() ? model[i] : 0);  // char[32]: one XDR unit each
    w.u64(n.memory_kib);
    for (int32_t v : {n.cpus, n.mhz, n.nodes, n.sockets, n.cores, n.threads}) w.i32(v);
    return rpc::ok(std::move(w));
}

}  // namespace

std::string capabilities_xml(const NodeInfo& node, const std::string& emulator) {
    std::string cpus;
    int32_t per_core = std::max(1, node.threads);
    for (int32_t i = 0; i < node.cpus; ++i) {
        int32_t core = i / per_core;
        cpus += fmt::format("          <cpu id='{}' socket_id='{}' core_id='{}' siblings='{}'/>\n", i,
                            core / std::max(1, node.cores), core % std::max(1, node.cores), i);
    }
    return fmt::format(
        "<capabilities>\n"
        "  <host>\n"
        "    <cpu>\n"
        "      <arch>x86_64</arch>\n"
        "      <topology sockets='{}' dies='1' cores='{}' threads='{}'/>\n"
        "    </cpu>\n"
        "    <migration_features>\n"
        "      <live/>\n"
        "      <uri_transports>\n"
        "        <uri_transport>tcp</uri_transport>\n"
        "        <uri_transport>rdma</uri_transport>\n"
        "      </uri_transports>\n"
        "    </migration_features>\n"
        "    <topology>\n"
        "      <cells num='1'>\n"
        "        <cell id='0'>\n"
        "          <memory unit='KiB'>{}</memory>\n"
        "          <cpus num='{}'>\n"
        "{}"
        "          </cpus>\n"
        "        </cell>\n"
        "      </cells>\n"
        "    </topology>\n"
        "  </host>\n"
        "  <guest>\n"
        "    <os_type>hvm</os_type>\n"
        "    <arch name='x86_64'>\n"
        "      <wordsize>64</wordsize>\n"
        "      <emulator>{}</emulator>\n"
        "      <domain type='vmm'/>\n"
        "    </arch>\n"
        "  </guest>\n"
        "</capabilities>\n",
        node.sockets, node.cores, node.threads, node.memory_kib, node.cpus, cpus, xml_escape(emulator));
}

uint64_t libvirt_version_number(const std::string& dotted) {
    unsigned long major = 0, minor = 0, micro = 0;
    if (std::sscanf(dotted.c_str(), "%lu.%lu.%lu", &major, &minor, &micro) < 1) return 0;
    return major * 1000000 + minor * 1000 + micro;
}

std::vector<rpc::Procedure> connect_procedures(const DriverIdentity& id) {
    return {
        {Proc::CONNECT_OPEN, Access::unopened, [id](Caller& c, Reader& a) { return open(id, c, a); }},
        {Proc::CONNECT_CLOSE, Access::unopened, close},
        {Proc::AUTH_LIST, Access::unopened, auth_list},
        {Proc::CONNECT_SUPPORTS_FEATURE, Access::unopened, supports_feature},
        {Proc::CONNECT_GET_TYPE, Access::read_only, [](Caller&, Reader&) { return rpc::ok_string("vmm"); }},
        {Proc::CONNECT_GET_VERSION, Access::read_only, [id](Caller&, Reader&) { return rpc::ok_u64(id.version); }},
        // The library version is libvirt's whose protocol vmmd speaks, as libvirtd answers its
        // own: clients gate features and minimums on it (Nova refuses to start below its
        // minimum; virt-manager turns version-gated features off). vmm's is CONNECT_GET_VERSION's.
        {Proc::CONNECT_GET_LIB_VERSION, Access::read_only,
         [](Caller&, Reader&) { return rpc::ok_u64(LIBVIR_VERSION_NUMBER); }},
        {Proc::CONNECT_GET_HOSTNAME, Access::read_only, hostname},
        {Proc::CONNECT_GET_URI, Access::read_only, [](Caller& c, Reader&) { return rpc::ok_string(c.uri); }},
        {Proc::NODE_GET_INFO, Access::read_only, node_get_info},
        {Proc::CONNECT_GET_CAPABILITIES, Access::read_only,
         [id](Caller&, Reader&) { return rpc::ok_string(capabilities_xml(read_node_info(), id.emulator)); }},
        // A unix socket on this host: nothing travels where others could read it.
        {Proc::CONNECT_IS_SECURE, Access::read_only, [](Caller& c, Reader&) { return rpc::ok_i32(c.secure ? 1 : 0); }},
    };
}

std::string local_hostname() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
    return name;
}

}  // namespace vmmd
