// libvirt's domain XML, read with libxml2 and written back normalized. What would change the
// guest and vmm cannot do is refused by name; a document that does not parse is refused with
// libxml2's line and column. A DOCTYPE is refused (no entities, internal or external).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "vmm/common/result.h"
#include "vmmd/domain/domain_def.h"

namespace vmmd {

// The namespace of vmm's own settings under <metadata>.
inline constexpr const char* kVmmNamespace = "https://github.com/vmm/xmlns/domain/1";

// `random_uuid` is used when the document has no <uuid>.
vmm::Result<DomainDef> parse_domain_xml(std::string_view xml, const Uuid& random_uuid);
// Text or an attribute value made safe to put in XML (& < > " ' as entities).
std::string xml_escape(const std::string& s);
// The normalized document; `id` (a running domain's) goes in <domain id=…>.
std::string format_domain_xml(const DomainDef& d, std::optional<int> id = std::nullopt);

// "1024" with unit "MiB" → KiB, as libvirt counts (b, bytes, KB, k, KiB, MB, M, MiB, GB, G,
// GiB, TB, T, TiB; KiB when absent). Refuses what is not a whole number of KiB or overflows.
vmm::Result<uint64_t> to_kib(const std::string& value, const std::string& unit);

}  // namespace vmmd
