#include "ip_address.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

using namespace keyauth;

namespace {

struct TypeCase {
    const char *in;
    const char *type;
};

struct TextCase {
    const char *in;
    const char *out;
};

}  // namespace

// One address inside each registry entry and, where the edge matters, the
// addresses just outside it.
TEST(IpAddress, ClassifiesIpv4) {
    const TypeCase cases[] = {
        {"0.0.0.0", "unspecified"},
        {"0.0.0.1", "this-network"},
        {"0.255.255.255", "this-network"},
        {"1.0.0.0", "global"},
        {"10.0.0.0", "private"},
        {"10.255.255.255", "private"},
        {"9.255.255.255", "global"},
        {"11.0.0.0", "global"},
        {"172.16.0.0", "private"},
        {"172.31.255.255", "private"},
        {"172.15.255.255", "global"},
        {"172.32.0.0", "global"},
        {"192.168.0.1", "private"},
        {"192.167.255.255", "global"},
        {"192.169.0.0", "global"},
        {"100.64.0.0", "shared"},
        {"100.127.255.255", "shared"},
        {"100.63.255.255", "global"},
        {"100.128.0.0", "global"},
        {"127.0.0.1", "loopback"},
        {"127.255.255.255", "loopback"},
        {"126.255.255.255", "global"},
        {"128.0.0.0", "global"},
        {"169.254.1.1", "link-local"},
        {"169.253.255.255", "global"},
        {"169.255.0.0", "global"},
        {"192.0.0.8", "ietf-protocol"},
        {"192.0.0.255", "ietf-protocol"},
        {"192.0.1.0", "global"},
        {"192.0.2.1", "documentation"},
        {"192.0.3.0", "global"},
        {"198.51.100.7", "documentation"},
        {"198.51.101.0", "global"},
        {"203.0.113.255", "documentation"},
        {"203.0.112.255", "global"},
        {"203.0.114.0", "global"},
        {"198.18.0.0", "benchmarking"},
        {"198.19.255.255", "benchmarking"},
        {"198.17.255.255", "global"},
        {"198.20.0.0", "global"},
        {"192.88.99.1", "6to4-relay"},
        {"192.88.98.255", "global"},
        {"192.88.100.0", "global"},
        {"224.0.0.1", "multicast"},
        {"239.255.255.255", "multicast"},
        {"223.255.255.255", "global"},
        {"240.0.0.0", "reserved"},
        {"255.255.255.254", "reserved"},
        {"255.255.255.255", "broadcast"},
        {"8.8.8.8", "global"},
        {"1.1.1.1", "global"},
    };
    for (const auto &c : cases) {
        IpInfo info;
        ASSERT_TRUE(parse_ip(c.in, info)) << c.in;
        EXPECT_EQ(info.version, 4) << c.in;
        EXPECT_STREQ(info.type, c.type) << c.in;
    }
}

TEST(IpAddress, ClassifiesIpv6) {
    const TypeCase cases[] = {
        {"::", "unspecified"},
        {"::1", "loopback"},
        {"::2", "reserved"},
        {"::1.2.3.4", "reserved"},  // deprecated IPv4-compatible form
        {"::ffff:192.0.2.1", "ipv4-mapped"},
        {"::ffff:0:0", "ipv4-mapped"},
        {"::ffff:ffff:ffff", "ipv4-mapped"},
        {"::fffe:ffff:ffff", "reserved"},
        {"::1:ffff:0:0", "reserved"},
        {"64:ff9b::192.0.2.33", "ipv4-ipv6-translation"},
        {"64:ff9b::ffff:ffff", "ipv4-ipv6-translation"},
        {"64:ff9b::1:0:0", "reserved"},
        {"64:ff9b:1::1", "ipv4-ipv6-translation"},
        {"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "ipv4-ipv6-translation"},
        {"64:ff9b:2::", "reserved"},
        {"100::1", "discard-only"},
        {"100::ffff:ffff:ffff:ffff", "discard-only"},
        {"100:0:0:1::", "reserved"},
        {"2001::1", "teredo"},
        {"2001:0:ffff::", "teredo"},
        {"2001:1::1", "ietf-protocol"},
        {"2001:2::1", "benchmarking"},
        {"2001:2:0:ffff::", "benchmarking"},
        {"2001:2:1::", "ietf-protocol"},
        {"2001:3::1", "ietf-protocol"},
        {"2001:f::", "ietf-protocol"},
        {"2001:10::1", "orchid"},
        {"2001:1f:ffff::", "orchid"},
        {"2001:20::", "orchid"},
        {"2001:2f:ffff::", "orchid"},
        {"2001:30::", "ietf-protocol"},
        {"2001:1ff:ffff::", "ietf-protocol"},
        {"2001:200::", "global"},
        {"2001:db8::1", "documentation"},
        {"2001:db8:ffff::", "documentation"},
        {"2001:db7:ffff::", "global"},
        {"2001:db9::", "global"},
        {"3fff::1", "documentation"},
        {"3fff:fff:ffff::", "documentation"},
        {"3fff:1000::", "global"},
        {"2002::1", "6to4"},
        {"2002:c000:204::1", "6to4"},
        {"2001:ffff::", "global"},
        {"2003::", "global"},
        {"fc00::1", "unique-local"},
        {"fd12:3456::1", "unique-local"},
        {"fbff:ffff::", "reserved"},
        {"fe00::", "reserved"},
        {"fe80::1", "link-local"},
        {"febf:ffff::", "link-local"},
        {"fec0::1", "reserved"},
        {"ff02::1", "multicast"},
        {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "multicast"},
        {"2000::", "global"},
        {"2606:4700:4700::1111", "global"},
        {"1fff:ffff::", "reserved"},
        {"4000::", "reserved"},
    };
    for (const auto &c : cases) {
        IpInfo info;
        ASSERT_TRUE(parse_ip(c.in, info)) << c.in;
        EXPECT_EQ(info.version, 6) << c.in;
        EXPECT_STREQ(info.type, c.type) << c.in;
    }
}

TEST(IpAddress, Ipv4BytesAndText) {
    IpInfo info;
    ASSERT_TRUE(parse_ip("192.0.2.10", info));
    EXPECT_EQ(info.version, 4);
    const unsigned char want[16] = {192, 0, 2, 10};
    EXPECT_EQ(std::memcmp(info.bytes, want, 16), 0);
    EXPECT_STREQ(info.canonical, "192.0.2.10");
}

TEST(IpAddress, EveryOctetValueRoundTrips) {
    for (unsigned v = 0; v <= 255; v++) {
        std::string text = "10.0." + std::to_string(v) + ".1";
        IpInfo info;
        ASSERT_TRUE(parse_ip(text, info)) << text;
        EXPECT_EQ(info.bytes[2], v);
        EXPECT_EQ(text, info.canonical);
    }
    for (unsigned v = 256; v <= 999; v++) {
        IpInfo info;
        std::string text = "1.2.3." + std::to_string(v);
        EXPECT_FALSE(parse_ip(text, info)) << text;
    }
}

TEST(IpAddress, Ipv6Bytes) {
    IpInfo info;
    ASSERT_TRUE(parse_ip("2001:db8::1", info));
    EXPECT_EQ(info.version, 6);
    const unsigned char want[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    EXPECT_EQ(std::memcmp(info.bytes, want, 16), 0);

    ASSERT_TRUE(parse_ip("::ffff:192.0.2.1", info));
    const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
    EXPECT_EQ(std::memcmp(info.bytes, mapped, 16), 0);

    ASSERT_TRUE(parse_ip("1:2:3:4:5:6:7:8", info));
    const unsigned char full[16] = {0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8};
    EXPECT_EQ(std::memcmp(info.bytes, full, 16), 0);
}

// RFC 5952 §4 and §5, plus the edges of the "::" rule.
TEST(IpAddress, CanonicalIpv6Text) {
    const TextCase cases[] = {
        {"2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
        {"2001:db8:0:0:0::1", "2001:db8::1"},
        {"2001:db8::0:1", "2001:db8::1"},
        {"2001:DB8::1", "2001:db8::1"},
        {"FE80::ABCD", "fe80::abcd"},
        {"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},      // first of equal runs
        {"2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"},        // longest run wins
        {"2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"},   // a lone zero group stays
        {"2001:db8::aaaa:0:0:1", "2001:db8::aaaa:0:0:1"},
        {"2001:db8:0:0:aaaa::1", "2001:db8::aaaa:0:0:1"},
        {"2001:db8:0000:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"},
        {"0:0:0:0:0:0:0:0", "::"},
        {"::", "::"},
        {"0:0:0:0:0:0:0:1", "::1"},
        {"1:0:0:0:0:0:0:0", "1::"},
        {"1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"},
        {"::2:3:4:5:6:7:8", "0:2:3:4:5:6:7:8"},
        {"1:0:0:4:5:0:0:0", "1:0:0:4:5::"},
        {"0:0:3:4:5:6:7:8", "::3:4:5:6:7:8"},
        {"fe80::1:2", "fe80::1:2"},
        {"::ffff:192.0.2.1", "::ffff:192.0.2.1"},
        {"::FFFF:192.0.2.1", "::ffff:192.0.2.1"},
        {"0:0:0:0:0:ffff:c000:0201", "::ffff:192.0.2.1"},
        {"::ffff:0:0", "::ffff:0.0.0.0"},
        {"64:ff9b::192.0.2.33", "64:ff9b::c000:221"},  // only mapped keeps the dotted tail
        {"::1.2.3.4", "::102:304"},
        {"1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:102:304"},
        {"ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
    };
    for (const auto &c : cases) {
        IpInfo info;
        ASSERT_TRUE(parse_ip(c.in, info)) << c.in;
        EXPECT_STREQ(info.canonical, c.out) << c.in;

        // The canonical text is itself accepted and names the same address.
        IpInfo again;
        ASSERT_TRUE(parse_ip(info.canonical, again)) << info.canonical;
        EXPECT_EQ(std::memcmp(info.bytes, again.bytes, 16), 0) << c.in;
        EXPECT_STREQ(again.canonical, c.out);
    }
}

TEST(IpAddress, ReverseDnsNames) {
    IpInfo info;
    ASSERT_TRUE(parse_ip("192.0.2.1", info));
    EXPECT_STREQ(info.reverse_dns, "1.2.0.192.in-addr.arpa");
    ASSERT_TRUE(parse_ip("255.255.255.255", info));
    EXPECT_STREQ(info.reverse_dns, "255.255.255.255.in-addr.arpa");
    ASSERT_TRUE(parse_ip("10.0.0.0", info));
    EXPECT_STREQ(info.reverse_dns, "0.0.0.10.in-addr.arpa");

    ASSERT_TRUE(parse_ip("2001:db8::567:89ab", info));
    EXPECT_STREQ(info.reverse_dns,
                 "b.a.9.8.7.6.5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa");
    EXPECT_EQ(std::strlen(info.reverse_dns), 72u);

    ASSERT_TRUE(parse_ip("::", info));
    EXPECT_STREQ(info.reverse_dns,
                 "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa");

    ASSERT_TRUE(parse_ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", info));
    EXPECT_STREQ(info.reverse_dns,
                 "e.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.f.ip6.arpa");

    // A mapped address is still an IPv6 address and gets the ip6.arpa name.
    ASSERT_TRUE(parse_ip("::ffff:1.2.3.4", info));
    EXPECT_STREQ(info.reverse_dns,
                 "4.0.3.0.2.0.1.0.f.f.f.f.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa");
}

TEST(IpAddress, RejectsMalformedInput) {
    const char *cases[] = {
        // IPv4
        "", "1.2.3.256", "1.2.3", "1.2.3.4.5", "1.2.3.4 ", " 1.2.3.4", "1..2.3", "01.2.3.4",
        "1.2.3.04", "1.2.3.00", "00.0.0.0", "1.2.3.", ".1.2.3", "1.2.3.4.", "+1.2.3.4",
        "1.+2.3.4", "-1.2.3.4", "1.2.3.-4", "1.2.3.0x4", "0x1.2.3.4", "1.2.3.1000",
        "1.2.3.0004", "4294967295", "16909060", "1.2.3.4/32", "1.2.3.4:80", "1,2,3,4",
        "1.2.3.a", "1.2.3.4\n", "\t1.2.3.4", "a.b.c.d", ".", "...", "1.2.3.4..",
        // IPv6
        "::g", ":::", "1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "fe80::1%eth0", "fe80::1%25eth0",
        "[::1]", "::1/128", ":", ":1", "1:", "1::2:", ":1::2", "::1:", "1:2:3:4:5:6:7",
        "1:2:3:4:5:6:7:8::", "::1:2:3:4:5:6:7:8", "1:2:3:4::5:6:7:8", "1:2:3:4:5:6:7:8:",
        "00000::", "::00000", "1:2:3:4:5:6:7:1.2.3.4", "1:2:3:4:5:6::1.2.3.4", "::1.2.3",
        "::1.2.3.4.5", "::1.2.3.256", "::ffff:01.2.3.4", "::1.2.3.4:5", "1.2.3.4::",
        "::ffff:1.2.3.4::", "::ffff:a.2.3.4", "::1 ", " ::1", "::1\n", ":: 1", "1 ::",
        "2001:db8:::1", "2001:db8::-1", "2001:db8::+1", "2001:db8::0x1", "g::", "::ffff:1.2.3.4/96",
        "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "0000:0000:0000:0000:0000:0000:0000:0000:0",  // nine groups
        // Percent-encoding is not decoded here; the caller sees the raw path.
        "%31.2.3.4", "1.2.3.4%00", "1%2e2.3.4", "%3A%3A1", "::%31", "%5B::1%5D", "1.2.3.%34",
    };
    for (const char *c : cases) {
        IpInfo info;
        EXPECT_FALSE(parse_ip(c, info)) << '"' << c << '"';
    }
}

TEST(IpAddress, RejectsEmbeddedNulAndHighBytes) {
    IpInfo info;
    EXPECT_FALSE(parse_ip(std::string_view("1.2.3.4\0", 8), info));
    EXPECT_FALSE(parse_ip(std::string_view("1.2\0.3.4", 8), info));
    EXPECT_FALSE(parse_ip(std::string_view("::1\0", 4), info));
    EXPECT_FALSE(parse_ip("1.2.3.\xd9\xa4", info));    // Arabic-Indic digit four
    EXPECT_FALSE(parse_ip("\xef\xbc\x91.2.3.4", info));  // fullwidth digit one
    EXPECT_FALSE(parse_ip("::\xff", info));
}

TEST(IpAddress, RejectsKilobytesOfGarbage) {
    IpInfo info;
    std::string garbage(1024, '\0');
    for (size_t i = 0; i < garbage.size(); i++) {
        garbage[i] = static_cast<char>((i * 131 + 7) & 0xff);
    }
    EXPECT_FALSE(parse_ip(garbage, info));
    EXPECT_FALSE(parse_ip(std::string(1024, '1'), info));
    EXPECT_FALSE(parse_ip(std::string(1024, ':'), info));
    EXPECT_FALSE(parse_ip(std::string(1024, '.'), info));

    std::string long_v4;
    while (long_v4.size() < 1024) long_v4 += "1.2.3.4.";
    EXPECT_FALSE(parse_ip(long_v4, info));
    std::string long_v6 = "::";
    while (long_v6.size() < 1024) long_v6 += "0";
    long_v6 += "1";
    EXPECT_FALSE(parse_ip(long_v6, info));

    // Every prefix of the garbage, so no length slips past the bounds checks.
    for (size_t n = 0; n <= garbage.size(); n++) {
        EXPECT_FALSE(parse_ip(std::string_view(garbage).substr(0, n), info)) << n;
    }
}

TEST(IpAddress, AcceptsTheLongestValidText) {
    IpInfo info;
    const char *longest = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255";
    ASSERT_EQ(std::strlen(longest), 45u);
    EXPECT_TRUE(parse_ip(longest, info));
    EXPECT_TRUE(parse_ip("0000:0000:0000:0000:0000:0000:0000:0000", info));
    EXPECT_STREQ(info.canonical, "::");
}

TEST(IpAddress, FailureLeavesAnEmptyResult) {
    IpInfo info;
    ASSERT_TRUE(parse_ip("2001:db8::1", info));
    EXPECT_FALSE(parse_ip("2001:db8::g", info));
    EXPECT_EQ(info.version, 0);
    EXPECT_EQ(info.type, nullptr);
    EXPECT_STREQ(info.canonical, "");
    EXPECT_STREQ(info.reverse_dns, "");
    const unsigned char zero[16] = {};
    EXPECT_EQ(std::memcmp(info.bytes, zero, 16), 0);
}
