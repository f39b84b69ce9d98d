// libFuzzer target for the domain XML vmmd reads from clients (DOMAIN_DEFINE_XML) and the save
// image header it reads from files (virsh restore): any crash or sanitizer report is a bug, and
// so is a document that parses but whose normalized form does not parse back to the same
// normalized form.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vmmd/domain/domain_xml.h"
#include "vmmd/domain/save_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    (void)vmmd::decode_save_image_header({data, size});
    const vmmd::Uuid random = {9, 9, 9};
    auto d = vmmd::parse_domain_xml(std::string_view(reinterpret_cast<const char*>(data), size), random);
    if (!d) return 0;
    std::string once = vmmd::format_domain_xml(*d);
    auto again = vmmd::parse_domain_xml(once, random);
    if (!again || vmmd::format_domain_xml(*again) != once) __builtin_trap();
    return 0;
}
