#include "vmmd/domain/cpu_xml.h"

#include "vmmd/domain/xml_doc.h"

namespace vmmd {

using vmm::Error;
using vmm::Result;

Result<GuestCpu> parse_guest_cpu(std::string_view xml) {
    auto doc = read_xml(xml, "the CPU description");
    if (!doc) return doc.error();
    const xmlNode* root = xmlDocGetRootElement(doc->get());
    if (root == nullptr || name_of(root) != "cpu") {
        return Error("the CPU description's root is not <cpu>");
    }
    GuestCpu cpu;
    cpu.mode = attribute(root, "mode").value_or("");
    for (const xmlNode* c = root->children; c != nullptr; c = c->next) {
        if (c->type != XML_ELEMENT_NODE) continue;
        if (name_of(c) == "feature") cpu.features = true;
        if (name_of(c) == "model") cpu.model = text_of(c);
    }
    return cpu;
}

}  // namespace vmmd
