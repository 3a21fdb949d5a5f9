// The key lifecycle through the console API (DESIGN.md, keyauthd): expiry,
// GET/PATCH of one key, roll, account controls, suspension and the audit
// trail, on both backends.
#include <set>

#include "console_fixture.h"
#include "rfc3339.h"

using namespace keyauth;
using keyauth::testing::ConsoleApiTest;
using nlohmann::json;

namespace {

class ConsoleLifecycleTest : public ConsoleApiTest {
protected:
    int64_t now = 1'800'000'000'000;  // 2027-01-15T08:00:00Z

    void SetUp() override { store.set_clock([this] { return now; }); }

    json made(const CreatedAccount &who, const json &body) {
        HttpResponse r = create(who, body.dump());
        EXPECT_EQ(r.status, 201) << r.body;
        return parsed(r);
    }
    json key_body(const std::string &name = "k") {
        return {{"name", name}, {"scopes", {"ip:read"}}, {"rateLimitPerMinute", 60}};
    }
    std::string at(int64_t ms) { return format_time(ms); }
    std::string code(const HttpResponse &r) { return parsed(r)["error"]["code"]; }
    // The code of the StoreError `write` throws; "none" if it succeeds.
    template <class Write>
    static std::string refusal(Write &&write) {
        try {
            write();
        } catch (const StoreError &e) {
            return e.code();
        }
        return "none";
    }
};

}  // namespace

TEST_P(ConsoleLifecycleTest, ExpiryIsTakenInAnyOffsetAndReadsExpiredFromThatMoment) {
    json body = key_body();
    body["expiresAt"] = "2027-01-15T13:30:00.250+05:30";  // 08:00:00.250Z
    json k = made(alice, body);
    EXPECT_EQ(k["expiresAt"], "2027-01-15T08:00:00.250Z");
    EXPECT_EQ(k["status"], "active");
    const std::string path = "/v1/keys/" + k["id"].get<std::string>();
    now += 249;
    EXPECT_EQ(parsed(call("GET", path, &alice))["status"], "active");
    now += 1;
    EXPECT_EQ(parsed(call("GET", path, &alice))["status"], "expired");

    for (const char *bad : {"2027-01-15", "2027-01-15T08:00:00", "2027-02-30T00:00:00Z", "tomorrow"}) {
        body["expiresAt"] = bad;
        HttpResponse r = create(alice, body.dump());
        EXPECT_EQ(r.status, 400) << bad;
        EXPECT_EQ(field_of(r), "expiresAt") << bad;
    }
    body["expiresAt"] = at(now - 1);  // the past
    EXPECT_EQ(field_of(create(alice, body.dump())), "expiresAt");
    body["expiresAt"] = at(now + Store::kMaxExpiryAheadMs + 1000);
    EXPECT_EQ(field_of(create(alice, body.dump())), "expiresAt");
    body["expiresAt"] = nullptr;  // null on create: not a time
    EXPECT_EQ(field_of(create(alice, body.dump())), "expiresAt");
}

TEST_P(ConsoleLifecycleTest, GetAndPatchKeepIdAndSecretAndNameEveryRefusal) {
    json k = made(alice, key_body("before"));
    const std::string path = "/v1/keys/" + k["id"].get<std::string>();
    HttpResponse got = call("GET", path, &alice);
    ASSERT_EQ(got.status, 200);
    json g = parsed(got);
    EXPECT_FALSE(g.contains("secret"));
    for (const char *f : {"id", "name", "prefix", "scopes", "rateLimitPerMinute", "requestedRateLimitPerMinute",
                          "status", "createdAt", "revokedAt", "expiresAt", "rolledFrom", "rolledTo",
                          "lastUsedAt", "usage"})
        EXPECT_TRUE(g.contains(f)) << f;
    EXPECT_EQ(call("GET", path, &bob).status, 404);  // another account's key
    EXPECT_EQ(code(call("GET", path, &bob)), "KEY_NOT_FOUND");

    json patch = {{"name", "after"}, {"scopes", {"ip:read", "geo:*"}}, {"rateLimitPerMinute", 500},
                  {"expiresAt", at(now + 86'400'000)}};
    HttpResponse p = call("PATCH", path, &alice, patch.dump());
    ASSERT_EQ(p.status, 200) << p.body;
    json u = parsed(p);
    EXPECT_EQ(u["id"], k["id"]);
    EXPECT_EQ(u["prefix"], k["prefix"]);
    EXPECT_EQ(u["name"], "after");
    EXPECT_EQ(u["scopes"], json({"ip:read", "geo:*"}));
    EXPECT_EQ(u["rateLimitPerMinute"], 100);  // capped at the entitlement
    EXPECT_EQ(u["requestedRateLimitPerMinute"], 500);
    EXPECT_EQ(u["expiresAt"], at(now + 86'400'000));
    EXPECT_EQ(parsed(call("PATCH", path, &alice, R"({"expiresAt":null})"))["expiresAt"], nullptr);

    EXPECT_EQ(field_of(call("PATCH", path, &alice, "{}")), "body");
    EXPECT_EQ(field_of(call("PATCH", path, &alice, R"({"colour":"red"})")), "colour");
    EXPECT_EQ(field_of(call("PATCH", path, &alice, R"({"name":""})")), "name");
    EXPECT_EQ(field_of(call("PATCH", path, &alice, R"({"scopes":["nope"]})")), "scopes");
    EXPECT_EQ(field_of(call("PATCH", path, &alice, R"({"rateLimitPerMinute":0})")), "rateLimitPerMinute");
    EXPECT_EQ(field_of(call("PATCH", path, &alice, R"({"expiresAt":"2020-01-01T00:00:00Z"})")), "expiresAt");
    EXPECT_EQ(call("PATCH", path, &alice, R"({"name":"x"})", "text/plain").status, 415);
    EXPECT_EQ(call("PATCH", path, &bob, R"({"name":"x"})").status, 404);
    EXPECT_EQ(call("DELETE", path, &alice).status, 405);
    EXPECT_EQ(parsed(call("GET", path, &alice))["name"], "after") << "no refusal wrote anything";

    ASSERT_EQ(call("POST", path + "/revoke", &alice).status, 200);
    HttpResponse revoked = call("PATCH", path, &alice, R"({"name":"x"})");
    EXPECT_EQ(revoked.status, 409);
    EXPECT_EQ(code(revoked), "KEY_REVOKED");
}

TEST_P(ConsoleLifecycleTest, RollLinksBothWaysAndRefusesWhatCannotRoll) {
    json body = key_body("rolled");
    body["expiresAt"] = at(now + 30LL * 86'400'000);
    json k = made(alice, body);
    const std::string id = k["id"];
    HttpResponse r = call("POST", "/v1/keys/" + id + "/roll", &alice, R"({"gracePeriodSeconds":3600})");
    ASSERT_EQ(r.status, 201) << r.body;
    json next = parsed(r);
    EXPECT_TRUE(next["secret"].is_string());
    EXPECT_NE(next["secret"], k["secret"]);
    EXPECT_EQ(next["rolledFrom"], id);
    EXPECT_EQ(next["name"], "rolled");
    EXPECT_EQ(next["scopes"], k["scopes"]);
    EXPECT_EQ(next["expiresAt"], k["expiresAt"]) << "the predecessor's own expiry, not the grace end";
    json old = parsed(call("GET", "/v1/keys/" + id, &alice));
    EXPECT_EQ(old["rolledTo"], next["id"]);
    EXPECT_EQ(old["expiresAt"], at(now + 3'600'000));
    EXPECT_EQ(old["status"], "active");
    EXPECT_EQ(code(call("POST", "/v1/keys/" + id + "/roll", &alice)), "KEY_ALREADY_ROLLED");
    now += 3'600'000;
    EXPECT_EQ(parsed(call("GET", "/v1/keys/" + id, &alice))["status"], "expired");

    // no body, grace 0: the predecessor is revoked at once
    json third = parsed(call("POST", "/v1/keys/" + next["id"].get<std::string>() + "/roll", &alice, "", ""));
    EXPECT_EQ(third["rolledFrom"], next["id"]);
    EXPECT_EQ(parsed(call("GET", "/v1/keys/" + next["id"].get<std::string>(), &alice))["status"], "revoked");
    EXPECT_EQ(code(call("POST", "/v1/keys/" + next["id"].get<std::string>() + "/roll", &alice)), "KEY_REVOKED");

    json expiring = key_body();
    expiring["expiresAt"] = at(now + 1000);
    json e = made(alice, expiring);
    now += 1000;
    EXPECT_EQ(code(call("POST", "/v1/keys/" + e["id"].get<std::string>() + "/roll", &alice)), "KEY_EXPIRED");
    json f = made(alice, key_body());
    const std::string roll = "/v1/keys/" + f["id"].get<std::string>() + "/roll";
    EXPECT_EQ(field_of(call("POST", roll, &alice, R"({"gracePeriodSeconds":604801})")), "gracePeriodSeconds");
    EXPECT_EQ(field_of(call("POST", roll, &alice, R"({"gracePeriodSeconds":-1})")), "gracePeriodSeconds");
    EXPECT_EQ(field_of(call("POST", roll, &alice, R"({"grace":1})")), "grace");
    EXPECT_EQ(call("POST", roll, &bob).status, 404);
    EXPECT_EQ(call("GET", roll, &alice).status, 405);
}

TEST_P(ConsoleLifecycleTest, AccountControlsCapKeysAndScopes) {
    AccountChanges controls;
    controls.max_keys = 2;
    controls.allowed_scopes = std::vector<std::string>{"ip:*", "geo:read"};
    store.update_account(alice.account.id, controls);
    json a = made(alice, key_body());
    made(alice, key_body());
    HttpResponse third = create(alice, key_body().dump());
    EXPECT_EQ(third.status, 409);
    EXPECT_EQ(code(third), "KEY_LIMIT_REACHED");
    // a revoked key frees its place; so does an expired one
    call("POST", "/v1/keys/" + a["id"].get<std::string>() + "/revoke", &alice);
    json expiring = key_body();
    expiring["expiresAt"] = at(now + 1000);
    made(alice, expiring);
    EXPECT_EQ(code(create(alice, key_body().dump())), "KEY_LIMIT_REACHED");
    now += 1000;
    made(alice, key_body());

    controls.max_keys = 100;
    store.update_account(alice.account.id, controls);
    json body = key_body();
    body["scopes"] = {"ip:read", "dns:read"};
    HttpResponse refused = create(alice, body.dump());
    EXPECT_EQ(refused.status, 403);
    EXPECT_EQ(code(refused), "SCOPE_NOT_ALLOWED");
    EXPECT_EQ(field_of(refused), "scopes");
    body["scopes"] = {"ip:lookup", "geo:read"};
    json ok = made(alice, body);
    HttpResponse patch = call("PATCH", "/v1/keys/" + ok["id"].get<std::string>(), &alice, R"({"scopes":["geo:*"]})");
    EXPECT_EQ(code(patch), "SCOPE_NOT_ALLOWED");
}

// Issue 26, items 1-4: each way a key could be made active past the
// account's controls, refused through the console API on both backends.
TEST_P(ConsoleLifecycleTest, AnExpiredKeyMadeActiveAgainCountsAgainstTheCap) {
    AccountChanges controls;
    controls.max_keys = 1;
    store.update_account(alice.account.id, controls);
    json expiring = key_body("first");
    expiring["expiresAt"] = at(now + 4000);
    json first = made(alice, expiring);
    now += 4000;
    json second = made(alice, key_body("second"));  // the first has expired
    const std::string path = "/v1/keys/" + first["id"].get<std::string>();
    for (const char *revive : {R"({"expiresAt":null})", R"({"expiresAt":"2027-01-16T00:00:00Z"})"}) {
        HttpResponse r = call("PATCH", path, &alice, revive);
        EXPECT_EQ(r.status, 409) << revive << r.body;
        EXPECT_EQ(code(r), "KEY_LIMIT_REACHED") << revive;
    }
    EXPECT_EQ(parsed(call("GET", path, &alice))["status"], "expired");
    // renaming an expired key makes nothing active: allowed
    EXPECT_EQ(call("PATCH", path, &alice, R"({"name":"old"})").status, 200);
    // once the other is revoked, the first may come back
    call("POST", "/v1/keys/" + second["id"].get<std::string>() + "/revoke", &alice);
    EXPECT_EQ(call("PATCH", path, &alice, R"({"expiresAt":null})").status, 200);
    EXPECT_EQ(parsed(call("GET", path, &alice))["status"], "active");
}

TEST_P(ConsoleLifecycleTest, ARolledPredecessorNeverComesBack) {
    json k = made(alice, key_body());
    const std::string path = "/v1/keys/" + k["id"].get<std::string>();
    EXPECT_EQ(call("POST", path + "/roll", &alice, R"({"gracePeriodSeconds":2})").status, 201);
    // in its grace: its expiry is the grace's end and cannot move
    for (const std::string &body : {std::string(R"({"expiresAt":null})"),
                                    R"({"expiresAt":")" + at(now + 86400000) + R"("})",
                                    R"({"expiresAt":")" + at(now + 1000) + R"("})"}) {
        HttpResponse r = call("PATCH", path, &alice, body);
        EXPECT_EQ(r.status, 409) << body;
        EXPECT_EQ(code(r), "KEY_ALREADY_ROLLED") << body;
    }
    now += 3000;
    HttpResponse r = call("PATCH", path, &alice, R"({"expiresAt":null})");
    EXPECT_EQ(code(r), "KEY_ALREADY_ROLLED");
    json after = parsed(call("GET", path, &alice));
    EXPECT_EQ(after["status"], "expired");
    EXPECT_FALSE(after["rolledTo"].is_null());
    EXPECT_EQ(call("PATCH", path, &alice, R"({"name":"retired"})").status, 200) << "a name is not a revival";
}

TEST_P(ConsoleLifecycleTest, ARollIsHeldToTheCapAndTheAllowedScopes) {
    json k = made(alice, key_body());
    made(alice, key_body());
    AccountChanges controls;
    controls.max_keys = 1;  // lowered under its two keys: they stay, nothing more is admitted
    store.update_account(alice.account.id, controls);
    const std::string roll = "/v1/keys/" + k["id"].get<std::string>() + "/roll";
    for (const char *grace : {R"({"gracePeriodSeconds":600})", R"({"gracePeriodSeconds":0})"}) {
        HttpResponse r = call("POST", roll, &alice, grace);
        EXPECT_EQ(r.status, 409) << "a roll of an account over its cap, " << grace;
        EXPECT_EQ(code(r), "KEY_LIMIT_REACHED");
    }
    HttpResponse r;

    controls.max_keys = 5;
    controls.allowed_scopes = std::vector<std::string>{"geo:read"};
    store.update_account(alice.account.id, controls);
    r = call("POST", roll, &alice, R"({"gracePeriodSeconds":0})");
    EXPECT_EQ(r.status, 403) << "the successor's scopes are no longer allowed";
    EXPECT_EQ(code(r), "SCOPE_NOT_ALLOWED");
    EXPECT_EQ(parsed(call("GET", "/v1/keys/" + k["id"].get<std::string>(), &alice))["status"], "active")
        << "nothing written";

    controls.allowed_scopes = std::vector<std::string>{};
    controls.max_keys = 2;
    store.update_account(alice.account.id, controls);
    // a chain of rolls with grace is one key (issue 44): each roll ends the
    // grace of the one before, so two secrets of it live at most
    std::string id = k["id"];
    for (int i = 0; i < 10; i++) {
        HttpResponse next = call("POST", "/v1/keys/" + id + "/roll", &alice, R"({"gracePeriodSeconds":604800})");
        ASSERT_EQ(next.status, 201) << next.body;
        id = parsed(next)["id"];
    }
    int live = 0;
    for (const auto &key : store.list_keys(alice.account.id, 100, std::nullopt).keys)
        live += key_active(key, store.now());
    EXPECT_EQ(live, 3) << "the other key, and the chain's last two secrets";
}

TEST_P(ConsoleLifecycleTest, TheEpochIsATimeInThePastNeverNoExpiry) {
    json body = key_body();
    body["expiresAt"] = "1970-01-01T00:00:00Z";
    HttpResponse r = create(alice, body.dump());
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(field_of(r), "expiresAt");
    body["expiresAt"] = at(now + 60000);
    json k = made(alice, body);
    const std::string path = "/v1/keys/" + k["id"].get<std::string>();
    for (const char *epoch : {R"({"expiresAt":"1970-01-01T00:00:00Z"})", R"({"expiresAt":"1970-01-01T05:30:00+05:30"})",
                              R"({"expiresAt":"1970-01-01T00:00:00.000Z"})"}) {
        r = call("PATCH", path, &alice, epoch);
        EXPECT_EQ(r.status, 400) << epoch;
        EXPECT_EQ(field_of(r), "expiresAt") << epoch;
    }
    EXPECT_EQ(parsed(call("GET", path, &alice))["expiresAt"], at(now + 60000)) << "the expiry stays";
}

TEST_P(ConsoleLifecycleTest, AResumeAdmitsTheAccountsKeysAsIfNew) {
    made(alice, key_body());
    made(alice, key_body());
    store.set_suspended(alice.account.id, true);
    AccountChanges controls;
    controls.max_keys = 1;
    store.update_account(alice.account.id, controls);
    EXPECT_EQ(refusal([&] { store.set_suspended(alice.account.id, false); }), "KEY_LIMIT_REACHED")
        << "2 active keys over a cap of 1";
    controls.max_keys = 2;
    controls.allowed_scopes = std::vector<std::string>{"geo:read"};
    store.update_account(alice.account.id, controls);
    EXPECT_EQ(refusal([&] { store.set_suspended(alice.account.id, false); }), "SCOPE_NOT_ALLOWED")
        << "keys whose scopes are no longer allowed";
    EXPECT_EQ(store.find_account(alice.account.id)->record.status, KA_ACCOUNT_SUSPENDED);
    controls.allowed_scopes = std::vector<std::string>{"ip:*", "geo:read"};
    store.update_account(alice.account.id, controls);
    store.set_suspended(alice.account.id, false);
    EXPECT_EQ(call("GET", "/v1/keys", &alice).status, 200);
}

TEST_P(ConsoleLifecycleTest, ASuspendedAccountIsRefusedUntilResumed) {
    json k = made(alice, key_body());
    store.set_suspended(alice.account.id, true);
    for (auto [method, path] : std::vector<std::pair<std::string, std::string>>{
             {"GET", "/v1/keys"}, {"POST", "/v1/keys"}, {"GET", "/v1/audit"},
             {"POST", "/v1/keys/" + k["id"].get<std::string>() + "/revoke"}}) {
        HttpResponse r = call(method, path, &alice, key_body().dump());
        EXPECT_EQ(r.status, 403) << method << " " << path;
        EXPECT_EQ(code(r), "ACCOUNT_SUSPENDED");
    }
    EXPECT_EQ(parsed(call("GET", "/v1/keys/" + k["id"].get<std::string>(), &bob)).dump().find("ACCOUNT"),
              std::string::npos);
    store.set_suspended(alice.account.id, false);
    EXPECT_EQ(call("GET", "/v1/keys", &alice).status, 200);
    EXPECT_EQ(parsed(call("GET", "/v1/keys/" + k["id"].get<std::string>(), &alice))["status"], "active");
}

TEST_P(ConsoleLifecycleTest, RotatedTokensStopNowOrAfterTheirGrace) {
    CreatedAccount first = alice;
    CreatedAccount second = store.rotate_console_token(alice.account.id, 60);
    EXPECT_EQ(call("GET", "/v1/keys", &first).status, 200);  // in its grace
    EXPECT_EQ(call("GET", "/v1/keys", &second).status, 200);
    now += 60'000;
    EXPECT_EQ(call("GET", "/v1/keys", &first).status, 401);
    CreatedAccount third = store.rotate_console_token(alice.account.id, 0);
    EXPECT_EQ(call("GET", "/v1/keys", &second).status, 401);
    EXPECT_EQ(call("GET", "/v1/keys", &third).status, 200);
    // a rotation with no grace ends every older token, also one in its grace
    CreatedAccount fourth = store.rotate_console_token(alice.account.id, 600);
    EXPECT_EQ(call("GET", "/v1/keys", &third).status, 200);
    CreatedAccount fifth = store.rotate_console_token(alice.account.id, 0);
    EXPECT_EQ(call("GET", "/v1/keys", &third).status, 401);
    EXPECT_EQ(call("GET", "/v1/keys", &fourth).status, 401);
    EXPECT_EQ(call("GET", "/v1/keys", &fifth).status, 200);
}

TEST_P(ConsoleLifecycleTest, TheAuditTrailIsTheCallersNewestFirstAndHoldsNoSecret) {
    std::set<std::string> secrets{alice.console_token, bob.console_token};
    json k = made(alice, key_body("audited"));
    secrets.insert(k["secret"].get<std::string>());
    const std::string id = k["id"];
    call("PATCH", "/v1/keys/" + id, &alice, R"({"name":"renamed","rateLimitPerMinute":70})");
    json next = parsed(call("POST", "/v1/keys/" + id + "/roll", &alice, R"({"gracePeriodSeconds":5})"));
    secrets.insert(next["secret"].get<std::string>());
    call("POST", "/v1/keys/" + next["id"].get<std::string>() + "/revoke", &alice);
    secrets.insert(made(bob, key_body())["secret"].get<std::string>());
    store.set_suspended(alice.account.id, true, Actor::operator_named("ops"));
    store.set_suspended(alice.account.id, false, Actor::operator_named("ops"));
    secrets.insert(store.rotate_console_token(alice.account.id, 30, Actor::operator_named("ops")).console_token);

    json events = json::array();
    std::string cursor;
    for (int page = 0; page < 20; page++) {
        HttpRequest r;
        r.method = "GET";
        r.path = "/v1/audit";
        r.has_authorization = true;
        r.authorization = "Bearer " + alice.console_token;  // in its grace
        r.has_limit = true;
        r.query_limit = "2";
        if (!cursor.empty()) {
            r.has_cursor = true;
            r.query_cursor = cursor;
        }
        HttpResponse res = api.handle(r);
        ASSERT_EQ(res.status, 200) << res.body;
        json body = parsed(res);
        for (auto &e : body["events"]) events.push_back(e);
        if (body["nextCursor"].is_null()) break;
        cursor = body["nextCursor"];
    }
    std::vector<std::string> actions;
    for (auto &e : events) actions.push_back(e["action"]);
    EXPECT_EQ(actions, (std::vector<std::string>{"account.rotate_token", "account.resume", "account.suspend",
                                                 "key.revoke", "key.roll", "key.update", "key.create",
                                                 "account.create"}));
    const json &update = events[5];
    EXPECT_EQ(update["actor"], json({{"type", "console"}, {"account", id_to_string(kAccountIdPrefix, alice.account.id)}}));
    EXPECT_EQ(update["address"], "203.0.113.7");
    EXPECT_EQ(update["target"], json({{"type", "key"}, {"id", id}}));
    EXPECT_EQ(update["changes"]["name"], json({{"from", "audited"}, {"to", "renamed"}}));
    EXPECT_EQ(update["changes"]["rateLimitPerMinute"], json({{"from", 60}, {"to", 70}}));
    EXPECT_EQ(events[2]["actor"], json({{"type", "operator"}, {"user", "ops"}}));
    for (size_t i = 1; i < events.size(); i++) EXPECT_GT(events[i - 1]["id"], events[i]["id"]);
    const std::string all = events.dump();
    for (const auto &s : secrets) EXPECT_EQ(all.find(s), std::string::npos) << "a secret in the audit trail";
    EXPECT_EQ(all.find("bob"), std::string::npos) << "another account's events";
}

INSTANTIATE_TEST_SUITE_P(Backends, ConsoleLifecycleTest, keyauth::testing::kBothBackends,
                         keyauth::testing::backend_name);
