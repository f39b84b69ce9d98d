#include "vmmd/domain/xml_doc.h"

#include <fmt/format.h>
#include <libxml/parser.h>

namespace vmmd {

using vmm::Error;
using vmm::Result;

namespace {

struct FreeCtxt {
    void operator()(xmlParserCtxt* c) const { xmlFreeParserCtxt(c); }
};
struct FreeChars {
    void operator()(xmlChar* s) const { xmlFree(s); }
};

}  // namespace

Result<XmlDoc> read_xml(std::string_view xml, const std::string& what) {
    std::unique_ptr<xmlParserCtxt, FreeCtxt> ctxt(xmlNewParserCtxt());
    if (!ctxt) return Error("libxml2 could not make a parser (out of memory?)");
    XmlDoc doc(xmlCtxtReadMemory(ctxt.get(), xml.data(), static_cast<int>(xml.size()), "input.xml", nullptr,
                                 XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
    if (!doc) {
        const xmlError* e = xmlCtxtGetLastError(ctxt.get());
        if (e == nullptr || e->message == nullptr) return Error(fmt::format("{} does not parse", what));
        std::string msg = e->message;
        while (!msg.empty() && msg.back() == '\n') msg.pop_back();
        return Error(fmt::format("{} does not parse: line {}, column {}: {}", what, e->line, e->int2, msg));
    }
    if (doc->intSubset != nullptr) return Error(fmt::format("{} has a DOCTYPE: the vmm driver takes none (no entities)", what));
    return doc;
}

std::string name_of(const xmlNode* n) { return reinterpret_cast<const char*>(n->name); }

std::optional<std::string> attribute(const xmlNode* n, const char* name) {
    std::unique_ptr<xmlChar, FreeChars> v(xmlGetProp(n, reinterpret_cast<const xmlChar*>(name)));
    if (!v) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(v.get()));
}

std::string text_of(const xmlNode* n) {
    std::unique_ptr<xmlChar, FreeChars> v(xmlNodeGetContent(n));
    std::string s = v ? reinterpret_cast<const char*>(v.get()) : "";
    size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace vmmd
