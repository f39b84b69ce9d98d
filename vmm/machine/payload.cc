#include "vmm/machine/payload.h"

#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "vmm/common/fd.h"
#include "vmm/common/search_path.h"
#include "vmm/machine/boot_abi.h"

namespace vmm::machine {

namespace fs = std::filesystem;

SearchPath payload_search_path() { return search_path("VMM_GUEST_DIR", {"guest", "share/vmm/guest"}); }

Result<std::string> resolve_payload(const std::string& name_or_path) {
    if (name_or_path.find('/') != std::string::npos) {
        if (!fs::exists(name_or_path)) return Error("payload file " + name_or_path + " does not exist");
        return name_or_path;
    }
    SearchPath path = payload_search_path();
    if (auto found = path.find(name_or_path + ".elf")) return *found;
    return Error(fmt::format("no payload named '{}' (looked for {}.elf in {}): build the project "
                             "(scripts/build.sh) or pass a path",
                             name_or_path, name_or_path, path.describe()));
}

Result<std::vector<uint8_t>> read_file(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return Error::from_errno("open " + path);
    struct stat st{};
    if (::fstat(fd.get(), &st) < 0) return Error::from_errno("stat " + path);
    if (st.st_size > 64 * 1024 * 1024) return Error(path + " is larger than 64 MiB: not a payload");
    std::vector<uint8_t> data(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < data.size()) {
        ssize_t r = ::read(fd.get(), data.data() + done, data.size() - done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Error::from_errno("read " + path);
        if (r == 0) return Error(path + ": file shrank while being read");
        done += static_cast<size_t>(r);
    }
    return data;
}

static Status check_header(const std::vector<uint8_t>& elf, Elf64_Ehdr& eh) {
    if (elf.size() < SELFMAG || std::memcmp(elf.data(), ELFMAG, SELFMAG) != 0) {
        return Error("payload is not an ELF file (build payloads with the project's guest/ rules)");
    }
    if (elf.size() < sizeof(Elf64_Ehdr)) return Error("payload's ELF header is truncated");
    std::memcpy(&eh, elf.data(), sizeof(eh));
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        eh.e_machine != EM_X86_64 || eh.e_type != ET_EXEC) {
        return Error("payload must be a little-endian x86-64 ELF executable (ELFCLASS64, ET_EXEC)");
    }
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > elf.size() ||
        uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr) > elf.size() - eh.e_phoff) {
        return Error("payload's program header table lies outside the file");
    }
    return {};
}

static Status load_segment(const std::vector<uint8_t>& elf, const Elf64_Phdr& ph,
                           const memory::GuestMemory& mem) {
    if (ph.p_offset > elf.size() || ph.p_filesz > elf.size() - ph.p_offset || ph.p_filesz > ph.p_memsz) {
        return Error(fmt::format("payload segment at {:#x} has sizes outside the file", ph.p_paddr));
    }
    if (ph.p_paddr < VMM_BOOT_PAYLOAD_MIN) {
        return Error(fmt::format("payload segment at {:#x} is below 1 MiB, where the VMM keeps "
                                 "its boot structures",
                                 ph.p_paddr));
    }
    if (auto span = mem.host_span(ph.p_paddr, ph.p_memsz); !span) {
        return Error(fmt::format("payload segment [{:#x}, +{:#x}) is not inside guest RAM: give "
                                 "the guest more memory",
                                 ph.p_paddr, ph.p_memsz));
    }
    if (auto s = mem.write(ph.p_paddr, {elf.data() + ph.p_offset, ph.p_filesz}); !s) return s;
    return mem.fill(ph.p_paddr + ph.p_filesz, ph.p_memsz - ph.p_filesz, 0);
}

Result<LoadedPayload> load_payload(const std::vector<uint8_t>& elf, const memory::GuestMemory& mem) {
    Elf64_Ehdr eh{};
    if (auto s = check_header(elf, eh); !s) return s.error();
    LoadedPayload out;
    out.image_start = UINT64_MAX;
    bool entry_loaded = false;
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
        Elf64_Phdr ph{};
        std::memcpy(&ph, elf.data() + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
        if (ph.p_type != PT_LOAD || ph.p_memsz == 0) continue;
        if (auto s = load_segment(elf, ph, mem); !s) return s.error();
        out.image_start = std::min(out.image_start, ph.p_paddr);
        out.image_end = std::max(out.image_end, ph.p_paddr + ph.p_memsz);
        if (eh.e_entry >= ph.p_paddr && eh.e_entry - ph.p_paddr < ph.p_memsz) entry_loaded = true;
    }
    if (!entry_loaded) return Error(fmt::format("payload entry point {:#x} is not in a loaded segment", eh.e_entry));
    out.entry = eh.e_entry;
    return out;
}

}  // namespace vmm::machine
