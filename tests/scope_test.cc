#include "scope.h"

#include <gtest/gtest.h>

using namespace keyauth;

TEST(Scope, Syntax) {
    for (auto s : {"ip:read", "ip:*", "tools.v2:run-job", "a_b:c.d", "0:1"})
        EXPECT_TRUE(scope_syntax_ok(s)) << s;
    for (auto s : {"", "ip", ":read", "ip:", "IP:read", "ip:Read", "ip:read:x", "*:read", "*:*",
                   "ip:re ad", "ip:r*", "ip:**", "ïp:read"})
        EXPECT_FALSE(scope_syntax_ok(s)) << s;
    EXPECT_TRUE(scope_syntax_ok(std::string(31, 'a') + ":" + std::string(31, 'b')));
    EXPECT_FALSE(scope_syntax_ok(std::string(32, 'a') + ":read"));
    EXPECT_FALSE(scope_syntax_ok("ip:" + std::string(32, 'r')));
}

TEST(Scope, ExactGrant) {
    EXPECT_TRUE(scope_grants("ip:read", "ip:read"));
    EXPECT_FALSE(scope_grants("ip:read", "ip:write"));
    EXPECT_FALSE(scope_grants("ip:read", "geo:read"));
    EXPECT_FALSE(scope_grants("ip:rea", "ip:read"));
}

TEST(Scope, ActionWildcardGrantsEveryActionOfItsResourceOnly) {
    EXPECT_TRUE(scope_grants("ip:*", "ip:read"));
    EXPECT_TRUE(scope_grants("ip:*", "ip:write"));
    EXPECT_FALSE(scope_grants("ip:*", "ipx:read"));
    EXPECT_FALSE(scope_grants("ip:*", "i:read"));
    EXPECT_FALSE(scope_grants("ip:*", "geo:read"));
    EXPECT_FALSE(scope_grants("ip:*", "ip:"));
}
