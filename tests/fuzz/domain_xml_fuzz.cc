// libFuzzer target for the domain XML vmmd reads from clients (DOMAIN_DEFINE_XML) and the save
// image header it reads from files (virsh restore): any crash or sanitizer report is a bug, and
// so is a document that parses but whose normalized form does not parse back to the same
// normalized form. The same input is also read as a metadata element a client sets (virsh metadata
// --set): one that is taken must come back whole through a definition's XML.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vmmd/domain/domain_xml.h"
#include "vmmd/domain/metadata_xml.h"
#include "vmmd/domain/save_image.h"

namespace {

void metadata_round_trip(std::string_view input, const vmmd::Uuid& random) {
    auto m = vmmd::metadata_element(std::string(input), "app", "http://example.org/app/1");
    if (!m) return;
    auto d = vmmd::parse_domain_xml("<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os></domain>", random);
    if (!d) __builtin_trap();
    d->metadata.push_back(*m);
    auto back = vmmd::parse_domain_xml(vmmd::format_domain_xml(*d), random);
    if (!back || back->metadata != d->metadata) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    (void)vmmd::decode_save_image_header({data, size});
    const vmmd::Uuid random = {9, 9, 9};
    std::string_view input(reinterpret_cast<const char*>(data), size);
    metadata_round_trip(input, random);
    auto d = vmmd::parse_domain_xml(input, random);
    if (!d) return 0;
    std::string once = vmmd::format_domain_xml(*d);
    auto again = vmmd::parse_domain_xml(once, random);
    if (!again || vmmd::format_domain_xml(*again) != once) __builtin_trap();
    return 0;
}
