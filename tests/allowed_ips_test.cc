// allowedIps (issue 48): the CIDR codec the writers normalize with, the
// check the edge makes, and the record layouts that hold them (key 5,
// account 4), which older readers refuse rather than misread.
#include <sys/un.h>

#include <gtest/gtest.h>

#include <cstring>

#include "client_sockaddr.h"
#include "ip_allowlist.h"
#include "keyauth_schema.h"
#include "records.h"

using namespace keyauth;

namespace {

std::string packed(const std::vector<std::string> &texts) {
    std::string out, error;
    EXPECT_TRUE(pack_allowed_ips(texts, out, error)) << error;
    return out;
}

bool fits(const std::string &list, const char *addr) {
    const sockaddr_storage ss = keyauth::testing::client_sockaddr(addr);
    unsigned char a[16];
    EXPECT_TRUE(client_address(reinterpret_cast<const sockaddr *>(&ss), a));
    return allowed_ips_fit(list, a);
}

}  // namespace

TEST(Cidr, NormalizedNeverWidened) {
    unsigned char e[kCidrEntryBytes];
    EXPECT_EQ(parse_cidr("10.0.0.0/8", e), CidrParse::kOk);
    EXPECT_EQ(cidr_text(e), "10.0.0.0/8");
    EXPECT_EQ(parse_cidr("10.1.2.3/8", e), CidrParse::kHostBits);
    EXPECT_EQ(parse_cidr("2001:DB8:0:0::/32", e), CidrParse::kOk);
    EXPECT_EQ(cidr_text(e), "2001:db8::/32");
    EXPECT_EQ(parse_cidr("2001:db8::1/32", e), CidrParse::kHostBits);
    EXPECT_EQ(parse_cidr("203.0.113.7", e), CidrParse::kOk);
    EXPECT_EQ(cidr_text(e), "203.0.113.7/32");
    EXPECT_EQ(parse_cidr("::1", e), CidrParse::kOk);
    EXPECT_EQ(cidr_text(e), "::1/128");
    EXPECT_EQ(parse_cidr("0.0.0.0/0", e), CidrParse::kOk);
    EXPECT_EQ(cidr_text(e), "0.0.0.0/0");
    EXPECT_EQ(parse_cidr("::/0", e), CidrParse::kOk);
    EXPECT_EQ(cidr_text(e), "::/0");
    EXPECT_EQ(parse_cidr("::ffff:10.0.0.0/104", e), CidrParse::kOk);
    EXPECT_EQ(cidr_text(e), "10.0.0.0/8");  // the same network, written one way
    for (const char *bad : {"", "/8", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/08", "10.0.0.0/-1", "::/129",
                            "10.0.0", "010.0.0.0/8", "10.0.0.0/8/8", " 10.0.0.0/8", "fe80::1%eth0", "[::1]",
                            "10.0.0.0/1000", "any"}) {
        EXPECT_EQ(parse_cidr(bad, e), CidrParse::kSyntax) << bad;
    }
}

TEST(Cidr, ListsAreBoundedAndDeduplicated) {
    std::string out, error;
    EXPECT_FALSE(pack_allowed_ips({}, out, error));
    std::vector<std::string> many;
    for (int i = 0; i < 33; i++) many.push_back("10.0." + std::to_string(i) + ".0/24");
    EXPECT_FALSE(pack_allowed_ips(many, out, error));
    EXPECT_TRUE(out.empty());
    many.pop_back();
    EXPECT_TRUE(pack_allowed_ips(many, out, error));
    EXPECT_EQ(out.size(), 32 * kCidrEntryBytes);
    EXPECT_TRUE(allowed_ips_ok(out));
    EXPECT_EQ(packed({"10.0.0.0/8", "::ffff:10.0.0.0/104", "10.0.0.0/8"}).size(), kCidrEntryBytes);
    EXPECT_FALSE(pack_allowed_ips({"10.0.0.0/8", std::string(100, 'x')}, out, error));
    EXPECT_LT(error.size(), 200u) << "an error quotes a bounded part of the entry";
    EXPECT_EQ(allowed_ips_text(packed({"2001:db8::/32", "10.0.0.0/8"})),
              (std::vector<std::string>{"2001:db8::/32", "10.0.0.0/8"}));
}

TEST(Cidr, CorruptListsAreRefused) {
    std::string list = packed({"10.0.0.0/8"});
    EXPECT_FALSE(allowed_ips_ok(""));
    EXPECT_FALSE(allowed_ips_ok(list.substr(1)));
    std::string bad = list;
    bad[16] = static_cast<char>(129);
    EXPECT_FALSE(allowed_ips_ok(bad));
    bad = list;
    bad[15] = 1;  // a host bit
    EXPECT_FALSE(allowed_ips_ok(bad));
}

TEST(Cidr, TheEdgeCheck) {
    const std::string list = packed({"10.0.0.0/8", "2001:db8::/32", "192.0.2.128/25"});
    EXPECT_TRUE(fits(list, "10.1.2.3"));
    EXPECT_TRUE(fits(list, "::ffff:10.1.2.3")) << "an IPv4 client over an IPv6 socket";
    EXPECT_TRUE(fits(list, "2001:db8:ffff::1"));
    EXPECT_TRUE(fits(list, "192.0.2.200"));
    EXPECT_FALSE(fits(list, "192.0.2.127"));
    EXPECT_FALSE(fits(list, "11.0.0.0"));
    EXPECT_FALSE(fits(list, "2001:db9::1"));
    EXPECT_FALSE(fits(list, "::a01:203")) << "IPv4-compatible is not IPv4";
    EXPECT_TRUE(fits(packed({"0.0.0.0/0"}), "8.8.8.8"));
    EXPECT_FALSE(fits(packed({"0.0.0.0/0"}), "2001:db8::1"));
    EXPECT_TRUE(fits(packed({"::/0"}), "8.8.8.8"));
    EXPECT_TRUE(fits("", "8.8.8.8")) << "no list: any address";
    unsigned char a[16];
    EXPECT_FALSE(client_address(nullptr, a));
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    EXPECT_FALSE(client_address(reinterpret_cast<sockaddr *>(&un), a)) << "a Unix socket has no address";
}

TEST(KeyRecord, AllowedIpsAndMetaAreLayoutFive) {
    KeyRecord r;
    r.key_id[0] = 1;
    r.account_id[0] = 2;
    r.requested_rpm = 60;
    r.scopes = {"ip:read"};
    r.prefix = "ka_abc";
    r.name = "office";
    std::string plain = encode_key_record(r);
    r.allowed_ips = packed({"10.0.0.0/8", "2001:db8::/32"});
    r.meta = R"({"tier":"gold"})";
    std::string bytes = encode_key_record(r);
    EXPECT_EQ(bytes.size(), KA_KEY_RECORD_V5_HEAD + plain.size() - KA_KEY_RECORD_V2_HEAD + 2 * 17 + r.meta.size());
    KeyRecordView v;
    ASSERT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_KEY_RECORD_V5);
    EXPECT_EQ(v.allowed_ips, r.allowed_ips);
    EXPECT_EQ(v.meta, r.meta);
    EXPECT_EQ(v.name, "office");
    EXPECT_TRUE(v.quota.none());
    EXPECT_EQ(encode_key_record(v.to_owned()), bytes) << "round trip";
    // with a managed quota too
    r.quota = Quota{KA_QUOTA_TOTAL, 9};
    r.quota_managed = true;
    std::string with_quota = encode_key_record(r);
    ASSERT_EQ(decode_key_record(with_quota.data(), with_quota.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_KEY_RECORD_V5);
    EXPECT_TRUE(v.quota_managed);
    EXPECT_EQ(v.quota, r.quota);
    // lifted, it goes back to the layout older edges read
    r.allowed_ips.clear();
    r.meta.clear();
    ASSERT_EQ(decode_key_record(encode_key_record(r).data(), encode_key_record(r).size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_KEY_RECORD_V4);
    // corrupt: a count past the bytes, a bad entry, a meta bound, reserved bytes
    std::string bad = bytes;
    bad[offsetof(ka_key_record_v5, restrictions) + offsetof(ka_restrictions_v1, allowed_ip_count)] = 3;
    EXPECT_EQ(decode_key_record(bad.data(), bad.size(), v), DecodeStatus::kCorrupt);
    bad = bytes;
    bad[bytes.size() - r.meta.size() - 17 - 1] = static_cast<char>(200);  // prefix length of the first entry
    EXPECT_NE(decode_key_record(bad.data(), bad.size(), v), DecodeStatus::kOk);
    bad = bytes;
    bad[offsetof(ka_key_record_v5, restrictions) + offsetof(ka_restrictions_v1, reserved32)] = 1;
    EXPECT_EQ(decode_key_record(bad.data(), bad.size(), v), DecodeStatus::kCorrupt);
    bad = bytes;
    bad[offsetof(ka_key_record_v4, quota_flags)] = KA_KEY_QUOTA_MANAGED;  // managed without a quota
    EXPECT_EQ(decode_key_record(bad.data(), bad.size(), v), DecodeStatus::kCorrupt);
    // a layout this build does not know is refused, never read as another
    bad = bytes;
    bad[0] = 6;
    EXPECT_EQ(decode_key_record(bad.data(), bad.size(), v), DecodeStatus::kUnknownVersion);
    KeyRecord big = r;
    big.meta = "{" + std::string(KA_META_MAX_BYTES, ' ') + "}";
    EXPECT_THROW(encode_key_record(big), std::invalid_argument);
}

TEST(AccountRecord, AllowedIpsAndMetaAreLayoutFour) {
    AccountRecord a;
    a.entitlement_rpm = 600;
    a.name = "acme";
    a.allowed_scopes = {"ip:*"};
    a.plan_id = "starter";
    a.overrides = 0;
    std::string plain = encode_account_record(a);
    AccountRecordView v;
    ASSERT_EQ(decode_account_record(plain.data(), plain.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_ACCOUNT_RECORD_V3) << "no restrictions: the layout older edges read";
    a.allowed_ips = packed({"10.1.0.0/16"});
    a.meta = R"({"crm":"c-1"})";
    std::string bytes = encode_account_record(a);
    ASSERT_EQ(decode_account_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_ACCOUNT_RECORD_V4);
    EXPECT_EQ(v.allowed_ips, a.allowed_ips);
    EXPECT_EQ(v.meta, a.meta);
    EXPECT_EQ(v.plan_id, "starter");
    EXPECT_EQ(v.name, "acme");
    EXPECT_EQ(encode_account_record(v.to_owned()), bytes);
    std::string bad = bytes;
    bad[offsetof(ka_account_record_v4, restrictions) + offsetof(ka_restrictions_v1, meta_bytes)] = 1;  // a meta of one byte is no JSON object
    EXPECT_EQ(decode_account_record(bad.data(), bad.size(), v), DecodeStatus::kCorrupt);
    bad = bytes;
    bad[0] = 5;
    EXPECT_EQ(decode_account_record(bad.data(), bad.size(), v), DecodeStatus::kUnknownVersion);
}
