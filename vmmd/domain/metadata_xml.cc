#include "vmmd/domain/metadata_xml.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "vmmd/domain/xml_doc.h"

namespace vmmd {

using vmm::Error;
using vmm::Result;
using vmm::Status;

namespace {

struct FreeBuffer {
    void operator()(xmlBuffer* b) const { xmlBufferFree(b); }
};

// `root` (owned by `doc`, its root) written out, its namespaces declared on it (an element in no
// namespace, which libvirt keeps too, has the URI "").
Result<ForeignMetadata> standalone(XmlDoc doc, xmlNode* root) {
    xmlReconciliateNs(doc.get(), root);
    std::unique_ptr<xmlBuffer, FreeBuffer> buf(xmlBufferCreate());
    if (!buf || xmlNodeDump(buf.get(), doc.get(), root, 0, 0) < 0) return Error("libxml2 could not write a metadata element");
    std::string xml(reinterpret_cast<const char*>(xmlBufferContent(buf.get())), static_cast<size_t>(xmlBufferLength(buf.get())));
    if (xml.size() > kMaxMetadataBytes) {
        return Error(fmt::format("a metadata element of {} bytes: at most {}", xml.size(), kMaxMetadataBytes));
    }
    std::string uri = root->ns != nullptr && root->ns->href != nullptr ? reinterpret_cast<const char*>(root->ns->href) : "";
    return ForeignMetadata{std::move(uri), std::move(xml)};
}

}  // namespace

Result<ForeignMetadata> foreign_metadata(const xmlNode* n) {
    XmlDoc doc(xmlNewDoc(reinterpret_cast<const xmlChar*>("1.0")));
    if (!doc) return Error("libxml2 could not make a document (out of memory?)");
    xmlNode* copy = xmlDocCopyNode(const_cast<xmlNode*>(n), doc.get(), 1);
    if (copy == nullptr) return Error("libxml2 could not copy a metadata element (out of memory?)");
    xmlDocSetRootElement(doc.get(), copy);
    return standalone(std::move(doc), copy);
}

Result<ForeignMetadata> metadata_element(const std::string& fragment, const std::string& key, const std::string& uri) {
    if (key.empty() || uri.empty()) return Error("metadata needs a key (the namespace's prefix) and a namespace URI");
    auto parsed = read_xml(fragment, "the metadata");
    if (!parsed) return parsed.error();
    XmlDoc doc = std::move(*parsed);
    xmlNode* root = xmlDocGetRootElement(doc.get());
    if (root == nullptr) return Error("the metadata holds no element");
    xmlNs* ns = xmlNewNs(root, reinterpret_cast<const xmlChar*>(uri.c_str()), reinterpret_cast<const xmlChar*>(key.c_str()));
    if (ns == nullptr) return Error(fmt::format("prefix '{}' cannot name namespace '{}' here", key, uri));
    xmlSetNs(root, ns);
    return standalone(std::move(doc), root);
}

Status set_foreign_metadata(DomainDef& d, const std::string& uri, std::optional<ForeignMetadata> element) {
    auto same = std::find_if(d.metadata.begin(), d.metadata.end(), [&uri](const ForeignMetadata& m) { return m.uri == uri; });
    if (!element) {
        if (same != d.metadata.end()) d.metadata.erase(same);
        return {};
    }
    if (same != d.metadata.end()) {
        *same = std::move(*element);
        return {};
    }
    if (d.metadata.size() >= kMaxMetadataElements) {
        return Error(fmt::format("domain '{}' keeps {} metadata elements already: remove one first", d.name, kMaxMetadataElements));
    }
    d.metadata.push_back(std::move(*element));
    return {};
}

}  // namespace vmmd
