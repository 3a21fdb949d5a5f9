// The webhook sender's address policy, as a pure function on socket
// addresses built in memory: no connection is made to any of them.
#include "webhook_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstring>
#include <string>

using keyauth::webhook_address_allowed;

namespace {

// The sockaddr libcurl would hand its open-socket callback for `text`.
struct Address {
    sockaddr_storage storage{};
    socklen_t len = 0;

    explicit Address(const char *text, uint16_t port = 443) {
        auto *v4 = reinterpret_cast<sockaddr_in *>(&storage);
        auto *v6 = reinterpret_cast<sockaddr_in6 *>(&storage);
        if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
            v4->sin_family = AF_INET;
            v4->sin_port = htons(port);
            len = sizeof *v4;
        } else if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1) {
            v6->sin6_family = AF_INET6;
            v6->sin6_port = htons(port);
            len = sizeof *v6;
        } else {
            ADD_FAILURE() << "not an address: " << text;
        }
    }
    const sockaddr *sa() const { return reinterpret_cast<const sockaddr *>(&storage); }
};

struct Refusal {
    const char *address;
    const char *why;  // exactly what the sender reports
};

void expect_refused(const Refusal &r, bool allow_private) {
    Address a(r.address);
    std::string why;
    EXPECT_FALSE(webhook_address_allowed(a.sa(), a.len, allow_private, why))
        << r.address << (allow_private ? " with allow_private" : "");
    EXPECT_EQ(why, r.why);
}

void expect_allowed(const char *address, bool allow_private) {
    Address a(address);
    std::string why = "stale";
    EXPECT_TRUE(webhook_address_allowed(a.sa(), a.len, allow_private, why))
        << address << (allow_private ? " with allow_private" : "") << ": " << why;
    EXPECT_EQ(why, "");
}

// Every class that must never be dialled without --webhook-allow-private.
const Refusal kNotPublic[] = {
    {"127.0.0.1", "127.0.0.1 is loopback"},
    {"127.255.255.254", "127.255.255.254 is loopback"},
    {"10.0.0.1", "10.0.0.1 is private"},
    {"172.16.0.1", "172.16.0.1 is private"},
    {"172.31.255.255", "172.31.255.255 is private"},
    {"192.168.1.1", "192.168.1.1 is private"},
    {"169.254.169.254", "169.254.169.254 is link-local"},  // cloud metadata
    {"169.254.0.1", "169.254.0.1 is link-local"},
    {"100.64.0.1", "100.64.0.1 is shared"},
    {"100.127.255.254", "100.127.255.254 is shared"},
    {"0.0.0.0", "0.0.0.0 is unspecified"},
    {"0.1.2.3", "0.1.2.3 is this-network"},
    {"255.255.255.255", "255.255.255.255 is broadcast"},
    {"224.0.0.1", "224.0.0.1 is multicast"},
    {"239.255.255.250", "239.255.255.250 is multicast"},
    {"240.0.0.1", "240.0.0.1 is reserved"},
    {"192.0.2.1", "192.0.2.1 is documentation"},
    {"198.51.100.7", "198.51.100.7 is documentation"},
    {"203.0.113.9", "203.0.113.9 is documentation"},
    {"198.18.0.1", "198.18.0.1 is benchmarking"},
    {"192.0.0.8", "192.0.0.8 is ietf-protocol"},
    {"192.88.99.1", "192.88.99.1 is 6to4-relay"},
    {"::1", "::1 is loopback"},
    {"::", ":: is unspecified"},
    {"fd00::1", "fd00::1 is unique-local"},
    {"fc00::1", "fc00::1 is unique-local"},
    {"fe80::1", "fe80::1 is link-local"},
    {"ff02::1", "ff02::1 is multicast"},
    {"2001:db8::1", "2001:db8::1 is documentation"},
    {"2002:7f00:1::1", "2002:7f00:1::1 is 6to4"},
    {"2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:0:4136:e378:8000:63bf:3fff:fdd2 is teredo"},
    {"64:ff9b::7f00:1", "64:ff9b::7f00:1 is ipv4-ipv6-translation"},
    {"64:ff9b:1::a00:1", "64:ff9b:1::a00:1 is ipv4-ipv6-translation"},
    {"100::1", "100::1 is discard-only"},
    {"::7f00:1", "::7f00:1 is reserved"},  // IPv4-compatible, deprecated
    {"4000::1", "4000::1 is reserved"},
    // IPv4-mapped: classed by the IPv4 address the kernel would reach
    {"::ffff:127.0.0.1", "::ffff:127.0.0.1 is loopback"},
    {"::ffff:10.0.0.1", "::ffff:10.0.0.1 is private"},
    {"::ffff:169.254.169.254", "::ffff:169.254.169.254 is link-local"},
    {"::ffff:0.0.0.0", "::ffff:0.0.0.0 is unspecified"},
    {"::ffff:100.64.0.1", "::ffff:100.64.0.1 is shared"},
    {"::ffff:224.0.0.1", "::ffff:224.0.0.1 is multicast"},
};

// Refused even with --webhook-allow-private: no one host answers them.
const Refusal kNeverAHost[] = {
    {"0.0.0.0", "0.0.0.0 is unspecified"},
    {"0.1.2.3", "0.1.2.3 is this-network"},
    {"255.255.255.255", "255.255.255.255 is broadcast"},
    {"224.0.0.1", "224.0.0.1 is multicast"},
    {"::", ":: is unspecified"},
    {"ff02::1", "ff02::1 is multicast"},
    {"::ffff:0.0.0.0", "::ffff:0.0.0.0 is unspecified"},
    {"::ffff:224.0.0.1", "::ffff:224.0.0.1 is multicast"},
};

const char *const kPublic[] = {
    "93.184.216.34", "1.1.1.1", "8.8.8.8", "172.32.0.1", "100.128.0.1", "169.255.0.1",
    "2606:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:93.184.216.34",
};

}  // namespace

TEST(WebhookAddress, RefusesEveryNonPublicClass) {
    for (const Refusal &r : kNotPublic) expect_refused(r, false);
}

TEST(WebhookAddress, AllowsPublicAddresses) {
    for (const char *a : kPublic) expect_allowed(a, false);
}

TEST(WebhookAddress, AllowPrivateAllowsUnicastButNeverUnspecifiedMulticastOrBroadcast) {
    for (const char *a : {"127.0.0.1", "10.0.0.1", "192.168.1.1", "172.16.0.1", "169.254.169.254",
                          "100.64.0.1", "192.0.2.1", "198.18.0.1", "::1", "fd00::1", "fe80::1",
                          "::ffff:127.0.0.1", "2001:db8::1"}) {
        expect_allowed(a, true);
    }
    for (const char *a : kPublic) expect_allowed(a, true);
    for (const Refusal &r : kNeverAHost) expect_refused(r, true);
}

TEST(WebhookAddress, RefusesOtherFamiliesAndShortLengths) {
    std::string why;
    sockaddr_un unix_address{};
    unix_address.sun_family = AF_UNIX;
    std::strcpy(unix_address.sun_path, "/run/x.sock");
    EXPECT_FALSE(webhook_address_allowed(reinterpret_cast<const sockaddr *>(&unix_address),
                                         sizeof unix_address, true, why));
    EXPECT_EQ(why, "address family 1 is not IPv4 or IPv6");

    Address v4("93.184.216.34");
    EXPECT_FALSE(webhook_address_allowed(v4.sa(), v4.len - 1, false, why));
    Address v6("2606:4700::1111");
    EXPECT_FALSE(webhook_address_allowed(v6.sa(), sizeof(sockaddr_in), false, why));
    EXPECT_FALSE(webhook_address_allowed(nullptr, 0, true, why));
    EXPECT_EQ(why, "no address");
}
