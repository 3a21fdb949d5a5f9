// keyauthd's command line (--trusted-proxy and the rules every option
// keeps) and whom the HTTP server believes about a client's address.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "cli_values.h"
#include "http_server.h"
#include "options.h"

namespace {

// parse_options over a made-up argv (it keeps no pointer into it)
keyauthd::Options parse(std::initializer_list<const char *> args) {
    std::vector<std::string> words = {"keyauthd"};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char *> argv;
    for (auto &w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    return keyauthd::parse_options(static_cast<int>(words.size()), argv.data());
}

#define GOOD "--db", "/nonexistent/db", "--listen", "127.0.0.1:8081"

TEST(KeyauthdOptions, TrustsNoProxyUnlessTold) {
    EXPECT_TRUE(parse({GOOD}).trusted_proxies.empty());
}

TEST(KeyauthdOptions, TrustedProxiesAreCanonicalAddresses) {
    EXPECT_EQ(parse({GOOD, "--trusted-proxy", "127.0.0.1"}).trusted_proxies,
              std::vector<std::string>{"127.0.0.1"});
    EXPECT_EQ(parse({GOOD, "--trusted-proxy", "127.0.0.1,::0001,::ffff:10.0.0.1"}).trusted_proxies,
              (std::vector<std::string>{"127.0.0.1", "::1", "10.0.0.1"}));
}

TEST(KeyauthdOptionsDeathTest, ABadTrustedProxyIsAUsageError) {
    const char *usage = "--trusted-proxy takes IP addresses.*usage: keyauthd";
    EXPECT_EXIT(parse({GOOD, "--trusted-proxy", "localhost"}), ::testing::ExitedWithCode(2), usage);
    EXPECT_EXIT(parse({GOOD, "--trusted-proxy", "127.0.0.1,"}), ::testing::ExitedWithCode(2), usage);
    EXPECT_EXIT(parse({GOOD, "--trusted-proxy", ",127.0.0.1"}), ::testing::ExitedWithCode(2), usage);
    EXPECT_EXIT(parse({GOOD, "--trusted-proxy", "127.0.0.1, ::1"}), ::testing::ExitedWithCode(2), usage);
    EXPECT_EXIT(parse({GOOD, "--trusted-proxy", "10.0.0.0/8"}), ::testing::ExitedWithCode(2), usage);
    EXPECT_EXIT(parse({GOOD, "--trusted-proxy", "[::1]"}), ::testing::ExitedWithCode(2), usage);
}

TEST(KeyauthdOptionsDeathTest, AnEmptyOrRepeatedValueIsAUsageError) {
    EXPECT_EXIT(parse({GOOD, "--trusted-proxy", ""}), ::testing::ExitedWithCode(2),
                "--trusted-proxy needs a value");
    EXPECT_EXIT(parse({GOOD, "--trusted-proxy"}), ::testing::ExitedWithCode(2), "--trusted-proxy needs a value");
    EXPECT_EXIT(parse({GOOD, "--trusted-proxy", "127.0.0.1", "--trusted-proxy", "::1"}),
                ::testing::ExitedWithCode(2), "--trusted-proxy given twice");
    EXPECT_EXIT(parse({"--db", "", "--listen", "127.0.0.1:8081"}), ::testing::ExitedWithCode(2),
                "--db needs a value");
}

// The usage store (the edge's keyauth_usage_db): beside --db by default,
// anywhere with --usage-db (#44 item 9); on etcd usage is read from etcd.
TEST(KeyauthdOptions, TheUsageStoreIsBesideTheDbUnlessNamed) {
    EXPECT_EQ(parse({GOOD}).usage_db, "/nonexistent/db.usage");
    EXPECT_EQ(parse({GOOD, "--usage-db", "/srv/usage"}).usage_db, "/srv/usage");
}

TEST(KeyauthdOptionsDeathTest, UsageDbIsForASingleHost) {
    EXPECT_EXIT(parse({"--etcd", "http://127.0.0.1:2379", "--listen", "127.0.0.1:8081", "--usage-db", "/srv/u"}),
                ::testing::ExitedWithCode(2), "--usage-db is for a single host");
    EXPECT_EXIT(parse({GOOD, "--usage-db", "/a", "--usage-db", "/b"}), ::testing::ExitedWithCode(2),
                "--usage-db given twice");
}

TEST(AddressList, ParsesCommaSeparatedLiteralsOnly) {
    std::vector<std::string> out = {"kept"};
    EXPECT_FALSE(keyauth::parse_address_list("", out));
    EXPECT_FALSE(keyauth::parse_address_list("127.0.0.1,,::1", out));
    EXPECT_FALSE(keyauth::parse_address_list("nginx.local", out));
    EXPECT_EQ(out, std::vector<std::string>{"kept"}) << "untouched on a refusal";
    ASSERT_TRUE(keyauth::parse_address_list("::1,192.0.2.1", out));
    EXPECT_EQ(out, (std::vector<std::string>{"::1", "192.0.2.1"}));
    EXPECT_EQ(keyauth::canonical_address("::FFFF:127.0.0.1"), "127.0.0.1");
    EXPECT_EQ(keyauth::canonical_address("2001:DB8:0::1"), "2001:db8::1");
    EXPECT_EQ(keyauth::canonical_address("127.1"), "") << "no shorthand";
}

TEST(ClientAddress, XRealIpOnlyFromATrustedProxy) {
    const std::vector<std::string> none, nginx = {"127.0.0.1"};
    const std::string forged = "203.0.113.9";
    EXPECT_EQ(keyauth::client_address("127.0.0.1", &forged, none), "127.0.0.1")
        << "no proxy trusted: a loopback peer is not believed either";
    EXPECT_EQ(keyauth::client_address("127.0.0.1", &forged, nginx), forged);
    EXPECT_EQ(keyauth::client_address("127.0.0.2", &forged, nginx), "127.0.0.2")
        << "another local peer is not nginx";
    EXPECT_EQ(keyauth::client_address("127.0.0.1", nullptr, nginx), "127.0.0.1") << "no header";
    const std::string junk = "203.0.113.9, 10.0.0.1", name = "client.example";
    EXPECT_EQ(keyauth::client_address("127.0.0.1", &junk, nginx), "127.0.0.1") << "not one address";
    EXPECT_EQ(keyauth::client_address("127.0.0.1", &name, nginx), "127.0.0.1") << "not an address";
    const std::string v6 = "2001:db8::7";
    EXPECT_EQ(keyauth::client_address("::1", &v6, {"::1"}), v6);
}

}  // namespace
