#include "vmmd/domain/domain_xml.h"

#include <gtest/gtest.h>

namespace vmmd {
namespace {

const Uuid kRandom = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

const char* kFull = R"(<domain type='vmm'>
  <name>db-1</name>
  <uuid>0d9a3b2e-2f7c-4c59-9e7e-7a3c1a5b9f10</uuid>
  <title>a &amp; b</title>
  <memory unit='GiB'>1</memory>
  <currentMemory unit='MiB'>1024</currentMemory>
  <vcpu placement='static'>4</vcpu>
  <os><type arch='x86_64'>hvm</type><kernel>/opt/guest.elf</kernel><cmdline>bytes=64M stride=4096</cmdline></os>
  <memtune><hard_limit unit='GiB'>2</hard_limit></memtune>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices><serial type='file'><source path='/var/log/vmm/db-1.log'/></serial><console type='file'/></devices>
  <metadata>
    <other:thing xmlns:other='urn:other'>kept out</other:thing>
    <vmm:vmm xmlns:vmm='https://github.com/vmm/xmlns/domain/1'>
      <vmm:dirty-tracking>ring</vmm:dirty-tracking><vmm:prealloc>on</vmm:prealloc>
      <vmm:migration-deadline>5m</vmm:migration-deadline>
      <vmm:migration-deadline-strategy>postcopy</vmm:migration-deadline-strategy>
      <vmm:migration-stall-timeout>30000</vmm:migration-stall-timeout>
    </vmm:vmm>
  </metadata>
</domain>)";

TEST(DomainXml, ReadsEverythingTheDriverTakes) {
    auto d = parse_domain_xml(kFull, kRandom);
    ASSERT_TRUE(d) << d.error().message();
    EXPECT_EQ(d->name, "db-1");
    EXPECT_EQ(format_uuid(d->uuid), "0d9a3b2e-2f7c-4c59-9e7e-7a3c1a5b9f10");
    EXPECT_EQ(d->title, "a & b");
    EXPECT_EQ(d->memory_kib, 1024u * 1024);
    EXPECT_EQ(d->vcpus, 4u);
    EXPECT_EQ(d->kernel, "/opt/guest.elf");
    EXPECT_EQ(d->cmdline, "bytes=64M stride=4096");
    EXPECT_EQ(d->hard_limit_kib, 2u * 1024 * 1024);
    EXPECT_EQ(d->on_crash, "destroy");
    EXPECT_EQ(d->serial_file, "/var/log/vmm/db-1.log");
    EXPECT_EQ(d->dirty_tracking, "ring");
    EXPECT_TRUE(d->prealloc);
    EXPECT_EQ(d->migration.deadline, "5m");
    EXPECT_EQ(d->migration.strategy, "postcopy");
    EXPECT_EQ(d->migration.stall_timeout_ms, 30000u);
}

TEST(DomainXml, TheNormalizedDocumentReadsBackTheSame) {
    auto d = parse_domain_xml(kFull, kRandom);
    ASSERT_TRUE(d);
    std::string once = format_domain_xml(*d, 7);
    EXPECT_NE(once.find("<domain type='vmm' id='7'>"), std::string::npos) << once;
    auto again = parse_domain_xml(once, kRandom);
    ASSERT_TRUE(again) << again.error().message() << "\n" << once;
    EXPECT_EQ(format_domain_xml(*again, 7), once);
}

TEST(DomainXml, AMissingUuidIsGenerated) {
    auto d = parse_domain_xml("<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os></domain>",
                              kRandom);
    ASSERT_TRUE(d) << d.error().message();
    EXPECT_EQ(d->uuid, kRandom);
    EXPECT_EQ(d->memory_kib, 4096u) << "KiB when no unit is given";
}

// Each refusal, with a phrase its message must hold.
TEST(DomainXml, RefusesWhatTheGuestWouldNotGetByName) {
    const std::pair<const char*, const char*> cases[] = {
        {"<domain type='kvm'><name>a</name></domain>", "use type='vmm'"},
        {"<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os><features/></domain>",
         "<features> in <domain> (line 1) is not supported"},
        {"<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os>"
         "<devices><disk type='file'/></devices></domain>", "<disk> in <devices>"},
        {"<domain type='vmm'><name>a</name><memory>4096</memory><currentMemory>2048</currentMemory>"
         "<os><kernel>idle</kernel></os></domain>", "no balloon"},
        {"<domain type='vmm'><name>a</name><memory>4096</memory></domain>", "<os><kernel> is missing"},
        {"<domain type='vmm'><name>a/b</name><memory>4096</memory><os><kernel>idle</kernel></os></domain>", "no slashes"},
        {"<domain type='vmm'><name>t1&#10;vmm: vmmd: forged</name><memory>4096</memory><os><kernel>idle</kernel></os></domain>",
         "domain name: no control characters"},
        {"<domain type='vmm'><name>a&#9;b</name><memory>4096</memory><os><kernel>idle</kernel></os></domain>",
         "no control characters"},
        {"<domain type='vmm'><name>a</name><memory unit='parsec'>1</memory><os><kernel>idle</kernel></os></domain>",
         "unit 'parsec'"},
        {"<domain type='vmm'><name>a</name><memory unit='b'>1000</memory><os><kernel>idle</kernel></os></domain>",
         "not a whole number of KiB"},
        {"<domain type='vmm'><name>a</name><memory unit='TiB'>99999999999</memory><os><kernel>idle</kernel></os></domain>",
         "too large"},
        {"<!DOCTYPE d [<!ENTITY x 'y'>]><domain type='vmm'><name>&x;</name></domain>", "DOCTYPE"},
        {"<domain type='vmm'>\n  <name>a</name>\n  <memory>4096</memory\n</domain>", "line 4, column 1: expected '>'"},
        {"<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os>"
         "<metadata><vmm:vmm xmlns:vmm='https://github.com/vmm/xmlns/domain/1'><vmm:dirty-tracking>pml"
         "</vmm:dirty-tracking></vmm:vmm></metadata></domain>", "dirty-tracking (log, ring)"},
        {"<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os>"
         "<on_crash>preserve</on_crash></domain>", "<on_crash>preserve</on_crash>: the vmm driver only destroys"},
        {"<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os>"
         "<metadata><vmm:vmm xmlns:vmm='https://github.com/vmm/xmlns/domain/1'><vmm:migration-deadline-strategy>warp"
         "</vmm:migration-deadline-strategy></vmm:vmm></metadata></domain>",
         "deadline strategy 'warp': choose cancel, postcopy, downtime, throttle, dirty-limit or cheapest"},
        {"<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os>"
         "<metadata><vmm:vmm xmlns:vmm='https://github.com/vmm/xmlns/domain/1'><vmm:migration-stall-timeout>-5"
         "</vmm:migration-stall-timeout></vmm:vmm></metadata></domain>", "milliseconds, at most a day"},
        {"<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os>"
         "<metadata><vmm:vmm xmlns:vmm='https://github.com/vmm/xmlns/domain/1'><vmm:migration-deadline>in a while"
         "</vmm:migration-deadline></vmm:vmm></metadata></domain>", "a time (30s, 5m, 2h) or off"},
    };
    for (const auto& [xml, phrase] : cases) {
        auto d = parse_domain_xml(xml, kRandom);
        ASSERT_FALSE(d) << xml;
        EXPECT_NE(d.error().message().find(phrase), std::string::npos) << d.error().message() << "\n  for " << xml;
    }
}

// What virt-install writes by default for a driver it does not know (virtinst 4.1).
TEST(DomainXml, TakesWhatVirtInstallWritesAndKeepsIt) {
    const char* xml = "<domain type='vmm'><name>vi</name><memory>65536</memory><currentMemory>65536</currentMemory><vcpu>1</vcpu>"
                      "<os><type arch='x86_64'>hvm</type><kernel>/g/idle.elf</kernel></os><clock offset='utc'/>"
                      "<devices><emulator>/usr/bin/vmm</emulator><console type='pty'/></devices></domain>";
    auto d = parse_domain_xml(xml, Uuid{});
    ASSERT_TRUE(d) << d.error().message();
    EXPECT_TRUE(d->clock_utc);
    EXPECT_EQ(d->emulator, "/usr/bin/vmm");
    std::string out = format_domain_xml(*d);
    EXPECT_NE(out.find("<clock offset='utc'/>"), std::string::npos) << out;
    EXPECT_NE(out.find("<emulator>/usr/bin/vmm</emulator>"), std::string::npos) << out;
    auto again = parse_domain_xml(out, Uuid{});
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, *d);
    auto with = [](const std::string& inner) {
        return "<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os>" + inner + "</domain>";
    };
    auto localtime = parse_domain_xml(with("<clock offset='localtime'/>"), Uuid{});
    ASSERT_FALSE(localtime);
    EXPECT_NE(localtime.error().message().find("UTC"), std::string::npos);
    EXPECT_FALSE(parse_domain_xml(with("<clock offset='utc'><timer name='rtc' tickpolicy='catchup'/></clock>"), Uuid{}));
    EXPECT_FALSE(parse_domain_xml(with("<devices><emulator>vmm</emulator></devices>"), Uuid{}));
}

// virt-install's default display on x86 (virtinst 4.1 without --graphics): kept as given, given
// back in the normalized document, named as not honoured; too many of them refused.
TEST(DomainXml, KeepsTheDisplayVirtInstallAddsAndNamesIt) {
    const char* xml = "<domain type='vmm'><name>vd</name><memory>32768</memory><os><kernel>idle</kernel></os>"
                      "<devices><console type='pty'/><input type='tablet' bus='usb'/><graphics type='vnc' port='-1'/>"
                      "<video><model type='vga'/></video></devices></domain>";
    auto d = parse_domain_xml(xml, Uuid{});
    ASSERT_TRUE(d) << d.error().message();
    ASSERT_EQ(d->display_devices.size(), 3u);
    EXPECT_EQ(display_devices_named(*d), "<input type='tablet'>, <graphics type='vnc'>, <video>");
    std::string out = format_domain_xml(*d);
    EXPECT_NE(out.find("<graphics type=\"vnc\" port=\"-1\"/>"), std::string::npos) << out;
    EXPECT_NE(out.find("<model type=\"vga\"/>"), std::string::npos) << out;
    auto again = parse_domain_xml(out, Uuid{});
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_EQ(*again, *d);
    std::string many;
    for (int i = 0; i < 9; ++i) many += "<input type='tablet' bus='usb'/>";
    auto flood = parse_domain_xml("<domain type='vmm'><name>a</name><memory>4096</memory><os><kernel>idle</kernel></os>"
                                  "<devices>" + many + "</devices></domain>", Uuid{});
    ASSERT_FALSE(flood);
    EXPECT_NE(flood.error().message().find("more than 8 display devices"), std::string::npos) << flood.error().message();
}

TEST(DomainXml, UnitsAsLibvirtCountsThem) {
    EXPECT_EQ(*to_kib("1", "MiB"), 1024u);
    EXPECT_EQ(*to_kib("1", "M"), 1024u);
    EXPECT_EQ(*to_kib("1024000", "KB"), 1000000u);
    EXPECT_EQ(*to_kib("2048", "bytes"), 2u);
    EXPECT_FALSE(to_kib("-1", "KiB"));
}

}  // namespace
}  // namespace vmmd
