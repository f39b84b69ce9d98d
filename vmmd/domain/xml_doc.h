// libxml2 as every reader here uses it: a document owned by RAII, read from memory with no
// network and no DOCTYPE (so no entities, internal or external), and its nodes' names,
// attributes and text as std::string.
#pragma once

#include <libxml/tree.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "vmm/common/result.h"

namespace vmmd {

struct FreeXmlDoc {
    void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
using XmlDoc = std::unique_ptr<xmlDoc, FreeXmlDoc>;

// `xml` parsed; an error names `what` ("the domain XML") with libxml2's line, column and reason.
vmm::Result<XmlDoc> read_xml(std::string_view xml, const std::string& what);

std::string name_of(const xmlNode* n);
std::optional<std::string> attribute(const xmlNode* n, const char* name);
std::string text_of(const xmlNode* n);  // its text, blanks at both ends trimmed

}  // namespace vmmd
