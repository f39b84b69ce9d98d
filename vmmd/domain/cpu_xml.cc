#include "vmmd/domain/cpu_xml.h"

#include <fmt/format.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <memory>

namespace vmmd {

using vmm::Error;
using vmm::Result;

namespace {

struct FreeDoc {
    void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
struct FreeCtxt {
    void operator()(xmlParserCtxt* c) const { xmlFreeParserCtxt(c); }
};
struct FreeChars {
    void operator()(xmlChar* s) const { xmlFree(s); }
};

std::optional<std::string> attribute(const xmlNode* n, const char* name) {
    std::unique_ptr<xmlChar, FreeChars> v(xmlGetProp(n, reinterpret_cast<const xmlChar*>(name)));
    if (!v) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(v.get()));
}

}  // namespace

Result<GuestCpu> parse_guest_cpu(std::string_view xml) {
    std::unique_ptr<xmlParserCtxt, FreeCtxt> ctxt(xmlNewParserCtxt());
    if (!ctxt) return Error("libxml2 could not make a parser (out of memory?)");
    std::unique_ptr<xmlDoc, FreeDoc> doc(xmlCtxtReadMemory(ctxt.get(), xml.data(), static_cast<int>(xml.size()), "cpu.xml", nullptr,
                                                           XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
    if (!doc) return Error("the CPU description does not parse as XML");
    if (doc->intSubset != nullptr) return Error("the CPU description has a DOCTYPE: the vmm driver takes none");
    const xmlNode* root = xmlDocGetRootElement(doc.get());
    if (root == nullptr || std::string_view(reinterpret_cast<const char*>(root->name)) != "cpu") {
        return Error("the CPU description's root is not <cpu>");
    }
    GuestCpu cpu;
    cpu.mode = attribute(root, "mode").value_or("");
    for (const xmlNode* c = root->children; c != nullptr; c = c->next) {
        if (c->type != XML_ELEMENT_NODE) continue;
        std::string_view name(reinterpret_cast<const char*>(c->name));
        if (name == "feature") cpu.features = true;
        if (name != "model") continue;
        std::unique_ptr<xmlChar, FreeChars> text(xmlNodeGetContent(c));
        cpu.model = text ? reinterpret_cast<const char*>(text.get()) : "";
    }
    return cpu;
}

}  // namespace vmmd
