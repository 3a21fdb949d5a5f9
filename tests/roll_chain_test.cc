// A roll chain counts once toward maxKeys (issue 44, item 16), on both
// backends: while a predecessor is in its grace, it and its successor are
// one key, so an account with maxKeys 1 (the Trial) can rotate without
// downtime; rolling the successor again ends the older predecessor's grace
// at once, so a chain never has more than two live secrets.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "console_fixture.h"
#include "rfc3339.h"

namespace keyauth::testing {
namespace {

class RollChainTest : public ConsoleApiTest {
protected:
    int64_t now = 1'800'000'000'000;  // 2027-01-15T08:00:00Z

    void SetUp() override {
        store.set_clock([this] { return now; });
        AccountChanges one;
        one.max_keys = 1;
        store.update_account(alice.account.id, one);
    }
    json create_key() {
        HttpResponse r = create(alice, R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":60})");
        EXPECT_EQ(r.status, 201) << r.body;
        return parsed(r);
    }
    HttpResponse roll(const json &key, int grace) {
        return call("POST", "/v1/keys/" + key["id"].get<std::string>() + "/roll", &alice,
                    json{{"gracePeriodSeconds", grace}}.dump());
    }
    json get(const json &key) {
        return parsed(call("GET", "/v1/keys/" + key["id"].get<std::string>(), &alice));
    }
    static std::string code(const HttpResponse &r) { return parsed(r)["error"].value("code", ""); }
};

}  // namespace

TEST_P(RollChainTest, ARollWithGraceAtACapOfOneIsOneKeyAndTheNextRollEndsTheOldestGrace) {
    const json a = create_key();
    // the Trial customer rotates without downtime: both secrets work for 60 s
    HttpResponse r = roll(a, 60);
    ASSERT_EQ(r.status, 201) << r.body;
    const json b = parsed(r);
    EXPECT_EQ(get(a)["status"], "active");
    EXPECT_EQ(get(a)["expiresAt"], format_time(now + 60'000));
    // ... and they are one key: no second key beside them
    r = create(alice, R"({"name":"x","scopes":["ip:read"],"rateLimitPerMinute":60})");
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_EQ(code(r), "KEY_LIMIT_REACHED");

    // rolling the successor in a's grace ends a's grace now: two live secrets at most
    now += 5'000;
    r = roll(b, 60);
    ASSERT_EQ(r.status, 201) << r.body;
    const json c = parsed(r);
    EXPECT_EQ(get(a)["status"], "expired");
    EXPECT_EQ(get(a)["expiresAt"], format_time(now));
    EXPECT_EQ(get(b)["status"], "active");
    EXPECT_EQ(get(c)["status"], "active");
    // one event, the roll's, says so
    auto events = store.list_audit(alice.account.id, 1, std::nullopt).events;
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].action, "key.roll");
    EXPECT_EQ(events[0].target_id, b["id"]);
    EXPECT_EQ(events[0].changes["predecessorExpiresAt"],
              (json{{"from", format_time(now - 5'000 + 60'000)}, {"to", format_time(now)}}));
    // a's expiry stays the end of its grace: nothing revives it
    r = call("PATCH", "/v1/keys/" + a["id"].get<std::string>(), &alice, R"({"expiresAt":null})");
    EXPECT_EQ(code(r), "KEY_ALREADY_ROLLED");

    // the successor revoked, its predecessor in grace still counts as the chain's one key
    EXPECT_EQ(call("POST", "/v1/keys/" + c["id"].get<std::string>() + "/revoke", &alice).status, 200);
    EXPECT_EQ(get(b)["status"], "active");
    EXPECT_EQ(code(create(alice, R"({"name":"x","scopes":["ip:read"],"rateLimitPerMinute":60})")),
              "KEY_LIMIT_REACHED");
    // once the grace is over the account has no active key left
    now += 61'000;
    EXPECT_EQ(get(b)["status"], "expired");
    create_key();
}

TEST_P(RollChainTest, AnotherChainStillCountsAndARollWithoutGraceStaysOneKey) {
    AccountChanges two;
    two.max_keys = 2;
    store.update_account(alice.account.id, two);
    const json a = create_key();
    const json other = create_key();
    HttpResponse r = roll(a, 0);  // a revoked now: one key before and after
    ASSERT_EQ(r.status, 201) << r.body;
    r = roll(parsed(r), 30);  // in grace: still the chain's one key
    ASSERT_EQ(r.status, 201) << r.body;
    r = roll(other, 30);
    ASSERT_EQ(r.status, 201) << r.body;
    r = create(alice, R"({"name":"x","scopes":["ip:read"],"rateLimitPerMinute":60})");
    EXPECT_EQ(code(r), "KEY_LIMIT_REACHED");
    EXPECT_NE(parsed(r)["error"]["message"].get<std::string>().find("has 2 active keys, its limit is 2"),
              std::string::npos)
        << r.body;
    // a resume admits chains, not secrets: two chains of two secrets each fit a cap of two
    store.set_suspended(alice.account.id, true);
    store.set_suspended(alice.account.id, false);
    EXPECT_EQ(store.find_account(alice.account.id)->record.status, KA_ACCOUNT_ACTIVE);
}

INSTANTIATE_TEST_SUITE_P(Backends, RollChainTest, kBothBackends, backend_name);

}  // namespace keyauth::testing
