// Others' metadata in a domain's <metadata> (an application's own element in its own namespace,
// as Nova's <nova:instance>): kept as given, each element whole with its namespace declared on
// it, given back in dumpxml and through virsh metadata (DOMAIN_GET_METADATA / SET_METADATA).
#pragma once

#include <libxml/tree.h>

#include <optional>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmmd/domain/domain_def.h"

namespace vmmd {

// Bounds: elements a domain keeps, and the bytes of one.
inline constexpr size_t kMaxMetadataElements = 32;
inline constexpr size_t kMaxMetadataBytes = 64 * 1024;

// The element `n` (in a namespace not vmm's, or in none) as it stands alone: its namespaces
// declared on it.
vmm::Result<ForeignMetadata> foreign_metadata(const xmlNode* n);
// virsh metadata --key KEY --set XML: `fragment` (one element, its namespace ignored) put in the
// namespace `uri` with prefix `key`, it and every descendant that had no namespace of its own.
vmm::Result<ForeignMetadata> metadata_element(const std::string& fragment, const std::string& key, const std::string& uri);
// Replaces the element in `uri` (or adds it; removes it when `element` is nullopt).
vmm::Status set_foreign_metadata(DomainDef& d, const std::string& uri, std::optional<ForeignMetadata> element);

}  // namespace vmmd
