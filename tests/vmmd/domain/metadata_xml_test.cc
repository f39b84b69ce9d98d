// Others' metadata in a domain (vmmd/domain/metadata_xml.h): kept whole through define and
// dumpxml, set by namespace as virsh metadata --set does, bounded.
#include "vmmd/domain/metadata_xml.h"

#include <gtest/gtest.h>

#include "vmmd/domain/domain_xml.h"

namespace vmmd {
namespace {

const Uuid kUuid = {1, 2, 3};

DomainDef with_metadata(const std::string& inner) {
    auto d = parse_domain_xml("<domain type='vmm' xmlns:nova='urn:nova'><name>a</name><memory>4096</memory>"
                              "<os><kernel>idle</kernel></os><metadata>" + inner + "</metadata></domain>",
                              kUuid);
    EXPECT_TRUE(d) << d.error().message();
    return d ? *d : DomainDef{};
}

TEST(MetadataXml, OthersElementsAreKeptWholeWithTheirNamespaceDeclaredOnThem) {
    DomainDef d = with_metadata("<nova:instance><nova:name>web &amp; db</nova:name></nova:instance><plain>x</plain>");
    ASSERT_EQ(d.metadata.size(), 2u);
    EXPECT_EQ(d.metadata[0].uri, "urn:nova");
    EXPECT_EQ(d.metadata[0].xml, "<nova:instance xmlns:nova=\"urn:nova\"><nova:name>web &amp; db</nova:name></nova:instance>");
    EXPECT_EQ(d.metadata[1].uri, "");  // no namespace: kept, as libvirt keeps it
    auto again = parse_domain_xml(format_domain_xml(d), kUuid);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->metadata, d.metadata);
}

TEST(MetadataXml, VmmsOwnSettingsAreReadNotKeptAsOthers) {
    DomainDef d = with_metadata("<vmm:vmm xmlns:vmm='https://github.com/vmm/xmlns/domain/1'><vmm:prealloc>on</vmm:prealloc></vmm:vmm>");
    EXPECT_TRUE(d.prealloc);
    EXPECT_TRUE(d.metadata.empty());
}

TEST(MetadataXml, ASetElementGoesInTheNamespaceAsked) {
    auto m = metadata_element("<owner team='db'>alice</owner>", "app", "http://example.org/app/1");
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->uri, "http://example.org/app/1");
    EXPECT_EQ(m->xml, "<app:owner xmlns:app=\"http://example.org/app/1\" team=\"db\">alice</app:owner>");
    EXPECT_FALSE(metadata_element("<a><b></a>", "app", "urn:a"));
    EXPECT_FALSE(metadata_element("<!DOCTYPE a [<!ENTITY e 'x'>]><a>&e;</a>", "app", "urn:a"));
    EXPECT_FALSE(metadata_element("<a/>", "", "urn:a"));
    EXPECT_FALSE(metadata_element("<a/>", "app", ""));
    EXPECT_FALSE(metadata_element("<a>" + std::string(kMaxMetadataBytes, 'x') + "</a>", "app", "urn:a"));
}

TEST(MetadataXml, SettingReplacesByNamespaceRemovesAndIsBounded) {
    DomainDef d;
    ASSERT_TRUE(set_foreign_metadata(d, "urn:a", ForeignMetadata{"urn:a", "<a:x xmlns:a=\"urn:a\"/>"}));
    ASSERT_TRUE(set_foreign_metadata(d, "urn:a", ForeignMetadata{"urn:a", "<a:y xmlns:a=\"urn:a\"/>"}));
    ASSERT_EQ(d.metadata.size(), 1u);
    EXPECT_EQ(d.metadata[0].xml, "<a:y xmlns:a=\"urn:a\"/>");
    ASSERT_TRUE(set_foreign_metadata(d, "urn:a", std::nullopt));
    EXPECT_TRUE(d.metadata.empty());
    for (size_t i = 0; i < kMaxMetadataElements; ++i) {
        std::string uri = "urn:" + std::to_string(i);
        ASSERT_TRUE(set_foreign_metadata(d, uri, ForeignMetadata{uri, "<x/>"}));
    }
    EXPECT_FALSE(set_foreign_metadata(d, "urn:one-more", ForeignMetadata{"urn:one-more", "<x/>"}));
}

}  // namespace
}  // namespace vmmd
