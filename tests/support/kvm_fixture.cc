#include "tests/support/kvm_fixture.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "vmm/machine/payload.h"

namespace vmm::test {

std::string kvm_missing_reason() {
    int fd = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd < 0) return std::string("/dev/kvm: ") + std::strerror(errno);
    ::close(fd);
    return {};
}

bool nested_tcg() {
    const char* v = std::getenv("VMM_NESTED_TCG");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
}

devices::Serial::Sink SerialLog::sink() {
    return [this](std::string_view s) {
        std::lock_guard lock(mutex);
        text += s;
    };
}

std::string SerialLog::get() {
    std::lock_guard lock(mutex);
    return text;
}

machine::MachineSpec small_spec(uint32_t vcpus, uint64_t ram) {
    machine::MachineSpec spec;
    spec.vcpus = vcpus;
    spec.ram.push_back({"pc.ram", 0, ram, memory::HugePages::none});
    spec.dirty_sample_ms = 200;
    return spec;
}

std::unique_ptr<machine::Machine> boot(const machine::MachineSpec& spec, const std::string& payload,
                                       const std::string& params) {
    auto m = machine::Machine::create(spec);
    EXPECT_TRUE(m) << m.error().message();
    if (!m) return nullptr;
    auto path = machine::resolve_payload(payload);
    EXPECT_TRUE(path) << path.error().message();
    if (!path) return nullptr;
    auto s = (*m)->boot(*path, params);
    EXPECT_TRUE(s) << s.error().message();
    if (!s) return nullptr;
    return std::move(*m);
}

}  // namespace vmm::test
