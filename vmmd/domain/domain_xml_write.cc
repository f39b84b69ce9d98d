// The normalized domain XML: every element vmmd knows, in libvirt's order, sizes in KiB.
#include <fmt/format.h>

#include "vmmd/domain/domain_xml.h"

namespace vmmd {

std::string xml_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string format_domain_xml(const DomainDef& d, std::optional<int> id) {
    std::string x = id ? fmt::format("<domain type='vmm' id='{}'>\n", *id) : "<domain type='vmm'>\n";
    x += fmt::format("  <name>{}</name>\n  <uuid>{}</uuid>\n", xml_escape(d.name), format_uuid(d.uuid));
    if (d.title) x += fmt::format("  <title>{}</title>\n", xml_escape(*d.title));
    if (d.description) x += fmt::format("  <description>{}</description>\n", xml_escape(*d.description));
    x += fmt::format("  <metadata>\n    <vmm:vmm xmlns:vmm='{}'>\n      <vmm:dirty-tracking>{}</vmm:dirty-tracking>\n"
                     "      <vmm:prealloc>{}</vmm:prealloc>\n",
                     kVmmNamespace, d.dirty_tracking, d.prealloc ? "on" : "off");
    const MigrationDeadline& md = d.migration;
    if (md.deadline) x += fmt::format("      <vmm:migration-deadline>{}</vmm:migration-deadline>\n", xml_escape(*md.deadline));
    if (md.strategy) {
        x += fmt::format("      <vmm:migration-deadline-strategy>{}</vmm:migration-deadline-strategy>\n", xml_escape(*md.strategy));
    }
    if (md.stall_timeout_ms) {
        x += fmt::format("      <vmm:migration-stall-timeout>{}</vmm:migration-stall-timeout>\n", *md.stall_timeout_ms);
    }
    x += "    </vmm:vmm>\n";
    for (const ForeignMetadata& m : d.metadata) x += "    " + m.xml + "\n";  // as given
    x += "  </metadata>\n";
    x += fmt::format("  <memory unit='KiB'>{}</memory>\n  <currentMemory unit='KiB'>{}</currentMemory>\n", d.memory_kib,
                     d.memory_kib);
    if (d.hard_limit_kib) x += fmt::format("  <memtune>\n    <hard_limit unit='KiB'>{}</hard_limit>\n  </memtune>\n", *d.hard_limit_kib);
    x += fmt::format("  <vcpu>{}</vcpu>\n  <os>\n    <type>hvm</type>\n    <kernel>{}</kernel>\n", d.vcpus, xml_escape(d.kernel));
    if (!d.cmdline.empty()) x += fmt::format("    <cmdline>{}</cmdline>\n", xml_escape(d.cmdline));
    x += "  </os>\n";
    if (d.clock_utc) x += "  <clock offset='utc'/>\n";
    x += fmt::format("  <on_poweroff>{}</on_poweroff>\n  <on_crash>{}</on_crash>\n", d.on_poweroff, d.on_crash);
    x += "  <devices>\n";
    if (d.emulator) x += fmt::format("    <emulator>{}</emulator>\n", xml_escape(*d.emulator));
    if (d.serial_file) x += fmt::format("    <serial type='file'>\n      <source path='{}'/>\n    </serial>\n", xml_escape(*d.serial_file));
    for (const auto& device : d.display_devices) x += "    " + device.xml + "\n";  // as given, not honoured
    x += "  </devices>\n</domain>\n";
    return x;
}

}  // namespace vmmd
