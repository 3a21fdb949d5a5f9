// The admin API's handlers against a real store, on both backends (issue
// 45): admin tokens and their scopes on every route, accounts found by the
// business's own id (a retried signup finds its account, two at once make
// one), the payment service's idempotent plan assignment, console sessions,
// any account's keys on the console's rules, and bad input refused naming
// the field with nothing written.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "admin_api.h"
#include "console_fixture.h"
#include "url.h"

using namespace keyauth;
using keyauth::testing::Backend;
using keyauth::testing::TempDir;
using nlohmann::json;

namespace {

class AdminApiTest : public ::testing::TestWithParam<Backend> {
protected:
    TempDir dir;
    int64_t now = 1796083200000;  // 2026-12-01T00:00:00Z
    std::string prefix;           // the etcd backend's
    std::unique_ptr<Store> store_ptr = make_store();
    Store &store = *store_ptr;
    AdminApi api{store};
    ConsoleApi console{store};
    CreatedAdminToken all = store.create_admin_token("ops", kAllAdminScopes, std::nullopt);

    std::unique_ptr<StoreBackend> backend() {
        if (GetParam() == Backend::kLmdb) return std::make_unique<LmdbBackend>(dir.sub("db"));
        static int tests = 0;
        prefix = "/admin-test/" + std::to_string(++tests);
        return keyauth::testing::etcd_backend_at(prefix);
    }
    std::unique_ptr<Store> make_store() {
        auto s = std::make_unique<Store>(backend());
        s->set_clock([this] { return now; });
        PlanRecord basic;
        basic.id = "basic-1k";
        basic.name = "Basic";
        basic.price_paise = 89900;
        basic.popular = true;
        basic.sort_order = 1;
        basic.features = {"1,000 calls a month"};
        basic.states = KA_PLAN_STATES_RATE | KA_PLAN_STATES_MAX_KEYS | KA_PLAN_STATES_QUOTA;
        basic.rate_rpm = 120;
        basic.max_keys = 5;
        basic.quota = Quota{KA_QUOTA_MONTH, 1000};
        PlanRecord pro = basic;
        pro.id = "pro-10k";
        pro.name = "Pro";
        pro.price_paise = 499900;
        pro.popular = false;
        pro.sort_order = 2;
        pro.quota = Quota{KA_QUOTA_MONTH, 10000};
        s->import_plans({basic, pro});
        return s;
    }

    HttpResponse call(const std::string &method, const std::string &path, const std::string *token,
                      const std::string &body = "", const std::string &query = "") {
        HttpRequest r;
        r.method = method;
        r.path = path;
        r.query = query;
        if (!query.empty()) {
            std::string v;
            if (query_param(query, "limit", v) == QueryParam::kFound) r.has_limit = true, r.query_limit = v;
            if (query_param(query, "cursor", v) == QueryParam::kFound) r.has_cursor = true, r.query_cursor = v;
        }
        if (token) {
            r.has_authorization = true;
            r.authorization = "Bearer " + *token;
        }
        r.content_type = "application/json";
        r.client_address = "198.51.100.4";
        r.body = body;
        return api.handle(r);
    }
    HttpResponse as_all(const std::string &method, const std::string &path, const std::string &body = "",
                        const std::string &query = "") {
        return call(method, path, &all.secret, body, query);
    }
    static json parsed(const HttpResponse &r) { return json::parse(r.body); }
    static std::string code(const HttpResponse &r) {
        json j = parsed(r);
        return j.contains("error") ? j["error"].value("code", "") : "";
    }
    static std::string field(const HttpResponse &r) { return parsed(r)["error"].value("field", ""); }
    std::string new_account(const std::string &ext = "") {
        json body = {{"name", "Acme"}, {"rateLimitPerMinute", 600}};
        if (!ext.empty()) body["externalId"] = ext;
        HttpResponse r = as_all("POST", "/v1/admin/accounts", body.dump());
        EXPECT_EQ(r.status, 201) << r.body;
        return parsed(r).value("id", "");
    }
    size_t events() { return store.list_audit(std::nullopt, 1000, std::nullopt).events.size(); }
};

// Each route, its scope, and a request it answers with that scope.
struct RouteCase {
    const char *method;
    std::string path;
    uint32_t scope;
    std::string body;
};

}  // namespace

// No token: 401 ADMIN_TOKEN_REQUIRED; an unknown, revoked or expired one:
// 401 INVALID_ADMIN_TOKEN (a revoke applies to the next call); a token
// without the route's scope: 403 ADMIN_SCOPE_REQUIRED naming it; with it,
// the route answers. A token with only accounts:plan can do exactly one
// thing: put an account on a plan.
TEST_P(AdminApiTest, EveryRouteNeedsALiveTokenWithItsScope) {
    const std::string acc = new_account();
    const json key = parsed(as_all("POST", "/v1/admin/accounts/" + acc + "/keys",
                                   R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":60})"));
    const std::string kid = key.value("id", "");
    ASSERT_FALSE(kid.empty());
    const std::vector<RouteCase> routes = {
        {"POST", "/v1/admin/accounts", kScopeAccountsWrite, R"({"name":"B","rateLimitPerMinute":60})"},
        {"GET", "/v1/admin/accounts", kScopeAccountsRead, ""},
        {"GET", "/v1/admin/accounts/" + acc, kScopeAccountsRead, ""},
        {"PATCH", "/v1/admin/accounts/" + acc, kScopeAccountsWrite, R"({"name":"Acme 2"})"},
        {"PUT", "/v1/admin/accounts/" + acc + "/plan", kScopeAccountsPlan, R"({"planId":"basic-1k"})"},
        {"POST", "/v1/admin/accounts/" + acc + "/sessions", kScopeSessionsWrite, ""},
        {"GET", "/v1/admin/accounts/" + acc + "/keys", kScopeKeysRead, ""},
        {"POST", "/v1/admin/accounts/" + acc + "/keys", kScopeKeysWrite,
         R"({"name":"k2","scopes":["ip:read"],"rateLimitPerMinute":60})"},
        {"GET", "/v1/admin/keys/" + kid, kScopeKeysRead, ""},
        {"PATCH", "/v1/admin/keys/" + kid, kScopeKeysWrite, R"({"name":"renamed"})"},
        {"GET", "/v1/admin/audit", kScopeAuditRead, ""},
        {"PUT", "/v1/admin/fx", kScopeFxWrite, R"({"usdInr":"83.50"})"},
        {"GET", "/v1/admin/webhooks", kScopeWebhooksWrite, ""},
    };
    uint32_t every = 0;
    for (const RouteCase &r : routes) every |= r.scope;
    for (const RouteCase &r : routes) {
        SCOPED_TRACE(std::string(r.method) + " " + r.path);
        HttpResponse none = call(r.method, r.path, nullptr, r.body);
        EXPECT_EQ(none.status, 401);
        EXPECT_EQ(code(none), "ADMIN_TOKEN_REQUIRED");
        const std::string forged = "kaa_" + std::string(all.secret.substr(4));
        const std::string bad = forged.substr(0, forged.size() - 1) + (forged.back() == 'A' ? "B" : "A");
        EXPECT_EQ(code(call(r.method, r.path, &bad, r.body)), "INVALID_ADMIN_TOKEN");
        // every scope but this route's
        CreatedAdminToken without = store.create_admin_token("without", every & ~r.scope, std::nullopt);
        HttpResponse denied = call(r.method, r.path, &without.secret, r.body);
        EXPECT_EQ(denied.status, 403);
        EXPECT_EQ(code(denied), "ADMIN_SCOPE_REQUIRED");
        EXPECT_EQ(parsed(denied)["error"]["scope"], admin_scope_name(r.scope));
        CreatedAdminToken with = store.create_admin_token("with", r.scope, std::nullopt);
        HttpResponse ok = call(r.method, r.path, &with.secret, r.body);
        EXPECT_LT(ok.status, 300) << ok.body;
        store.revoke_admin_token(with.token.id);
        EXPECT_EQ(code(call(r.method, r.path, &with.secret, r.body)), "INVALID_ADMIN_TOKEN") << "revoked: the next call";
    }
    // the payment service's token: one thing
    CreatedAdminToken pay = store.create_admin_token("payments", kScopeAccountsPlan, std::nullopt);
    for (const RouteCase &r : routes) {
        const int status = call(r.method, r.path, &pay.secret, r.body).status;
        EXPECT_EQ(status, r.scope == kScopeAccountsPlan ? 200 : 403) << r.method << " " << r.path;
    }
    // an expiring token stops at its instant
    CreatedAdminToken brief = store.create_admin_token("brief", kScopeAccountsRead, now + 60000);
    EXPECT_EQ(call("GET", "/v1/admin/accounts", &brief.secret).status, 200);
    now += 60000;
    EXPECT_EQ(code(call("GET", "/v1/admin/accounts", &brief.secret)), "INVALID_ADMIN_TOKEN");
}

// Without the deployment's webhook key keyauthd cannot sign: a new endpoint
// is 503 WEBHOOKS_UNAVAILABLE and nothing is written; with it, 201 with the
// secret derived from the key, shown this once.
TEST_P(AdminApiTest, AWebhookNeedsTheKeyToSign) {
    const std::string body = R"({"url":"https://hooks.example.com/in","events":["key.created"]})";
    HttpResponse r = as_all("POST", "/v1/admin/webhooks", body);
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(code(r), "WEBHOOKS_UNAVAILABLE");
    EXPECT_TRUE(store.list_webhooks().empty());
    WebhookKey key{};
    key.fill(7);
    api.set_webhook_key(key);
    r = as_all("POST", "/v1/admin/webhooks", body);
    ASSERT_EQ(r.status, 201) << r.body;
    const json made = parsed(r);
    Id id{};
    ASSERT_TRUE(parse_id(kWebhookIdPrefix, made["id"].get<std::string>(), id));
    EXPECT_EQ(made["secret"], webhook_secret_text(webhook_secret(key, id)));
    const json listed = parsed(as_all("GET", "/v1/admin/webhooks"));
    ASSERT_EQ(listed["webhooks"].size(), 1u);
    EXPECT_FALSE(listed["webhooks"][0].contains("secret")) << "shown once";
}

TEST_P(AdminApiTest, UnknownPathsAndMethods) {
    EXPECT_EQ(code(as_all("GET", "/v1/admin/nothing")), "NOT_FOUND");
    EXPECT_EQ(code(as_all("GET", "/v1/admin/accounts/")), "NOT_FOUND");
    HttpResponse r = as_all("DELETE", "/v1/admin/accounts");
    EXPECT_EQ(r.status, 405);
    bool allow = false;
    for (const auto &[k, v] : r.headers) allow = allow || (k == "Allow" && v == "POST, GET");
    EXPECT_TRUE(allow);
    // and the console's API knows none of them
    HttpRequest req;
    req.method = "GET";
    req.path = "/v1/admin/accounts";
    req.has_authorization = true;
    req.authorization = "Bearer " + all.secret;
    EXPECT_EQ(console.handle(req).status, 404);
}

// A signup retried three times makes one account; the 409 names it.
TEST_P(AdminApiTest, ARetriedSignupFindsItsAccount) {
    const std::string body = R"({"name":"Acme","externalId":"cus_42","planId":"basic-1k"})";
    HttpResponse first = as_all("POST", "/v1/admin/accounts", body);
    ASSERT_EQ(first.status, 201) << first.body;
    const std::string id = parsed(first)["id"];
    EXPECT_EQ(parsed(first)["externalId"], "cus_42");
    EXPECT_EQ(parsed(first)["planId"], "basic-1k");
    for (int i = 0; i < 2; i++) {
        HttpResponse again = as_all("POST", "/v1/admin/accounts", body);
        EXPECT_EQ(again.status, 409);
        EXPECT_EQ(code(again), "EXTERNAL_ID_TAKEN");
        EXPECT_EQ(parsed(again)["error"]["accountId"], id);
    }
    EXPECT_EQ(store.list_accounts().size(), 1u);
    json found = parsed(as_all("GET", "/v1/admin/accounts", "", "externalId=cus_42"));
    ASSERT_EQ(found["accounts"].size(), 1u);
    EXPECT_EQ(found["accounts"][0]["id"], id);
    EXPECT_EQ(parsed(as_all("GET", "/v1/admin/accounts", "", "externalId=nobody"))["accounts"].size(), 0u);
    // the id moves with a PATCH, and is free again for another account
    EXPECT_EQ(as_all("PATCH", "/v1/admin/accounts/" + id, R"({"externalId":"cus_43"})").status, 200);
    EXPECT_EQ(as_all("POST", "/v1/admin/accounts", body).status, 201);
    EXPECT_EQ(parsed(as_all("GET", "/v1/admin/accounts", "", "externalId=cus_43"))["accounts"][0]["id"], id);
    HttpResponse taken = as_all("PATCH", "/v1/admin/accounts/" + id, R"({"externalId":"cus_42"})");
    EXPECT_EQ(code(taken), "EXTERNAL_ID_TAKEN");
    EXPECT_EQ(as_all("PATCH", "/v1/admin/accounts/" + id, R"({"externalId":null})").status, 200);
    EXPECT_TRUE(parsed(as_all("GET", "/v1/admin/accounts/" + id))["externalId"].is_null());
}

// Two signups at once with one externalId: one account, one 201 and one 409
// (LMDB's writer lock, etcd's guards: two writers of one store).
TEST_P(AdminApiTest, TwoCreatesAtOnceWithOneExternalIdMakeOneAccount) {
    for (int round = 0; round < 5; round++) {
        const std::string body =
            R"({"name":"Racer","rateLimitPerMinute":60,"externalId":"race_)" + std::to_string(round) + "\"}";
        std::unique_ptr<Store> second;
        if (GetParam() == Backend::kEtcd) {
            second = std::make_unique<Store>(keyauth::testing::etcd_backend_at(prefix));
        }
        AdminApi other(second ? *second : store);
        std::atomic<int> created{0}, taken{0};
        auto signup = [&](AdminApi &a) {
            HttpRequest r;
            r.method = "POST";
            r.path = "/v1/admin/accounts";
            r.has_authorization = true;
            r.authorization = "Bearer " + all.secret;
            r.content_type = "application/json";
            r.body = body;
            const HttpResponse res = a.handle(r);
            if (res.status == 201) created++;
            else if (res.status == 409) taken++;
            else ADD_FAILURE() << res.body;
        };
        std::thread t1([&] { signup(api); });
        std::thread t2([&] { signup(other); });
        t1.join();
        t2.join();
        EXPECT_EQ(created.load(), 1) << round;
        EXPECT_EQ(taken.load(), 1) << round;
    }
    EXPECT_EQ(store.list_accounts().size(), 5u);
}

// The payment service: the plan after an order; the same call again (a
// retried webhook) is a 200 with no second audit event.
TEST_P(AdminApiTest, PuttingAnAccountOnAPlanIsIdempotent) {
    const std::string acc = new_account();
    const std::string path = "/v1/admin/accounts/" + acc + "/plan";
    const size_t before = events();
    HttpResponse r = as_all("PUT", path, R"({"planId":"pro-10k","orderId":"ord_77"})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(parsed(r)["planId"], "pro-10k");
    EXPECT_EQ(parsed(r)["quota"]["units"], 10000);
    EXPECT_EQ(events(), before + 1);
    Id account{};
    ASSERT_TRUE(parse_id(kAccountIdPrefix, acc, account));
    const auto last = store.list_audit(account, 1, std::nullopt).events.at(0);
    EXPECT_EQ(last.action, "account.set_plan");
    EXPECT_EQ(last.changes["orderId"]["to"], "ord_77");
    EXPECT_EQ(audit_to_json(last)["actor"]["type"], "admin");
    EXPECT_EQ(audit_to_json(last)["actor"]["token"], "ops");
    EXPECT_EQ(as_all("PUT", path, R"({"planId":"pro-10k","orderId":"ord_77"})").status, 200);
    EXPECT_EQ(events(), before + 1) << "a retry records nothing";
    EXPECT_EQ(code(as_all("PUT", path, R"({"planId":"gold"})")), "PLAN_NOT_FOUND");
    EXPECT_EQ(as_all("PUT", path, R"({"planId":null})").status, 200);
    EXPECT_TRUE(parsed(as_all("GET", "/v1/admin/accounts/" + acc))["planId"].is_null());
}

// A console session: works on the console API, stops at expiresAt, and at
// once when the account is suspended.
TEST_P(AdminApiTest, AConsoleSessionStopsAtItsExpiryAndWithTheAccount) {
    const std::string acc = new_account();
    HttpResponse r = as_all("POST", "/v1/admin/accounts/" + acc + "/sessions", R"({"ttlSeconds":120})");
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string token = parsed(r)["token"];
    EXPECT_EQ(token.rfind("kac_", 0), 0u);
    EXPECT_EQ(parsed(r)["expiresAt"], "2026-12-01T00:02:00.000Z");
    auto whoami = [&](const std::string &t) {
        HttpRequest q;
        q.method = "GET";
        q.path = "/v1/account";
        q.has_authorization = true;
        q.authorization = "Bearer " + t;
        return console.handle(q);
    };
    EXPECT_EQ(whoami(token).status, 200);
    EXPECT_EQ(parsed(whoami(token))["id"], acc);
    now += 119999;
    EXPECT_EQ(whoami(token).status, 200);
    now += 1;
    EXPECT_EQ(whoami(token).status, 401) << "refused at expiresAt";
    const std::string next = parsed(as_all("POST", "/v1/admin/accounts/" + acc + "/sessions"))["token"];
    EXPECT_EQ(whoami(next).status, 200);
    ASSERT_EQ(as_all("PATCH", "/v1/admin/accounts/" + acc, R"({"status":"suspended"})").status, 200);
    EXPECT_EQ(whoami(next).status, 403) << "the account suspended: refused at once";
    EXPECT_EQ(code(as_all("POST", "/v1/admin/accounts/" + acc + "/sessions")), "ACCOUNT_SUSPENDED");
    ASSERT_EQ(as_all("PATCH", "/v1/admin/accounts/" + acc, R"({"status":"active"})").status, 200);
    EXPECT_EQ(whoami(next).status, 200);
}

// Any account's keys, on the console's rules; the account's own audit trail
// shows what the admin API did, and by which token.
TEST_P(AdminApiTest, AnyAccountsKeysOnTheConsolesRules) {
    const std::string acc = new_account();
    ASSERT_EQ(as_all("PATCH", "/v1/admin/accounts/" + acc, R"({"maxKeys":1})").status, 200);
    const std::string keys = "/v1/admin/accounts/" + acc + "/keys";
    HttpResponse made = as_all("POST", keys, R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":60})");
    ASSERT_EQ(made.status, 201) << made.body;
    EXPECT_TRUE(parsed(made).contains("secret"));
    const std::string kid = parsed(made)["id"];
    EXPECT_EQ(code(as_all("POST", keys, R"({"name":"k2","scopes":["ip:read"],"rateLimitPerMinute":60})")),
              "KEY_LIMIT_REACHED");
    EXPECT_EQ(parsed(as_all("GET", keys))["keys"].size(), 1u);
    EXPECT_EQ(parsed(as_all("PATCH", "/v1/admin/keys/" + kid, R"({"name":"renamed"})"))["name"], "renamed");
    HttpResponse rolled = as_all("POST", "/v1/admin/keys/" + kid + "/roll");
    ASSERT_EQ(rolled.status, 201) << rolled.body;
    EXPECT_EQ(parsed(as_all("POST", "/v1/admin/keys/" + kid + "/revoke"))["status"], "revoked");
    EXPECT_EQ(code(as_all("GET", "/v1/admin/keys/key_000000000000000000000000")), "KEY_NOT_FOUND");
    EXPECT_EQ(code(as_all("GET", "/v1/admin/accounts/acc_000000000000000000000000/keys")), "ACCOUNT_NOT_FOUND");
    json trail = parsed(as_all("GET", "/v1/admin/audit", "", "accountId=" + acc));
    ASSERT_GE(trail["events"].size(), 5u);
    for (const auto &e : trail["events"]) {
        EXPECT_EQ(e["actor"]["type"], "admin");
        EXPECT_EQ(e["actor"]["tokenId"], id_to_string(kAdminTokenIdPrefix, all.token.id));
        EXPECT_EQ(e["address"], "198.51.100.4");
    }
}

// Bad input on every route: 400 naming the field (404 for what does not
// exist), and nothing written.
TEST_P(AdminApiTest, BadInputIsRefusedNamingTheFieldAndWritesNothing) {
    const std::string acc = new_account("cus_1");
    const std::string a = "/v1/admin/accounts/" + acc;
    struct Bad {
        const char *method;
        std::string path;
        std::string body;
        const char *field;  // or the code, for a 404
    };
    const std::vector<Bad> cases = {
        {"POST", "/v1/admin/accounts", R"({"name":"x","rateLimitPerMinute":60,"colour":"red"})", "colour"},
        {"POST", "/v1/admin/accounts", R"({"rateLimitPerMinute":60})", "name"},
        {"POST", "/v1/admin/accounts", R"({"name":"x"})", "rateLimitPerMinute"},
        {"POST", "/v1/admin/accounts", R"({"name":"x","rateLimitPerMinute":"60"})", "rateLimitPerMinute"},
        {"POST", "/v1/admin/accounts", R"({"name":"x","rateLimitPerMinute":60,"externalId":""})", "externalId"},
        {"POST", "/v1/admin/accounts", R"({"name":"x","rateLimitPerMinute":60,"externalId":")" + std::string(201, 'e') + "\"}",
         "externalId"},
        {"POST", "/v1/admin/accounts", R"({"name":"x","rateLimitPerMinute":60,"externalId":7})", "externalId"},
        {"POST", "/v1/admin/accounts", R"({"name":"x","planId":"gold"})", "PLAN_NOT_FOUND"},
        {"POST", "/v1/admin/accounts", R"({"name":"x","rateLimitPerMinute":60,"maxKeys":0})", "maxKeys"},
        {"POST", "/v1/admin/accounts", R"({"name":"x","rateLimitPerMinute":60,"quota":{"units":5,"period":"total"}})",
         "quota.period"},
        {"POST", "/v1/admin/accounts", R"([1,2])", "body"},
        {"PATCH", a, R"({})", "body"},
        {"PATCH", a, R"({"status":"gone"})", "status"},
        {"PATCH", a, R"({"status":"suspended","name":"x"})", "status"},
        {"PATCH", a, R"({"maxKeys":"many"})", "maxKeys"},
        {"PATCH", a, R"({"allowedScopes":"ip:read"})", "allowedScopes"},
        {"PATCH", a, R"({"owner":"me"})", "owner"},
        {"PUT", a + "/plan", R"({})", "planId"},
        {"PUT", a + "/plan", R"({"planId":3})", "planId"},
        {"PUT", a + "/plan", R"({"planId":"basic-1k","orderId":""})", "orderId"},
        {"PUT", a + "/plan", R"({"planId":"basic-1k","coupon":"x"})", "coupon"},
        {"POST", a + "/sessions", R"({"ttlSeconds":59})", "ttlSeconds"},
        {"POST", a + "/sessions", R"({"ttlSeconds":86401})", "ttlSeconds"},
        {"POST", a + "/sessions", R"({"ttlSeconds":"1h"})", "ttlSeconds"},
        {"PUT", "/v1/admin/fx", R"({"usdInr":83.5})", "usdInr"},
        {"PUT", "/v1/admin/fx", R"({"usdInr":"-1"})", "usdInr"},
        {"PUT", "/v1/admin/plans", R"({"plans":[]})", ""},
        {"GET", "/v1/admin/accounts/acc_000000000000000000000000", "", "ACCOUNT_NOT_FOUND"},
        {"PUT", "/v1/admin/accounts/acc_000000000000000000000000/plan", R"({"planId":"basic-1k"})", "ACCOUNT_NOT_FOUND"},
    };
    const size_t before = events();
    const std::string account_before = parsed(as_all("GET", a)).dump();
    for (const Bad &b : cases) {
        SCOPED_TRACE(std::string(b.method) + " " + b.path + " " + b.body);
        HttpResponse r = as_all(b.method, b.path, b.body);
        if (std::string(b.field).find('_') != std::string::npos && std::string(b.field) == code(r)) {
            EXPECT_EQ(r.status, 404);
        } else {
            EXPECT_EQ(r.status, 400) << r.body;
            if (*b.field) {
                EXPECT_EQ(field(r), b.field) << r.body;
            }
        }
    }
    EXPECT_EQ(events(), before) << "nothing written";
    EXPECT_EQ(parsed(as_all("GET", a)).dump(), account_before);
    EXPECT_EQ(store.list_accounts().size(), 1u);
    // bad query parameters
    EXPECT_EQ(field(as_all("GET", "/v1/admin/accounts", "", "limit=0")), "limit");
    EXPECT_EQ(field(as_all("GET", "/v1/admin/accounts", "", "colour=red")), "colour");
    EXPECT_EQ(field(as_all("GET", "/v1/admin/audit", "", "cursor=evt_x")), "cursor");
}

TEST_P(AdminApiTest, AccountsPageInCreationOrder) {
    std::vector<std::string> ids;
    for (int i = 0; i < 5; i++) {
        now++;  // ids order by their millisecond first
        ids.push_back(new_account("c" + std::to_string(i)));
    }
    std::vector<std::string> seen;
    std::string cursor;
    for (int page = 0; page < 5; page++) {
        json p = parsed(as_all("GET", "/v1/admin/accounts", "", "limit=2" + (cursor.empty() ? "" : "&cursor=" + cursor)));
        for (const auto &a : p["accounts"]) seen.push_back(a["id"]);
        if (p["nextCursor"].is_null()) break;
        cursor = p["nextCursor"];
    }
    EXPECT_EQ(seen, ids);
}

TEST_P(AdminApiTest, ExchangeRateAndCatalog) {
    HttpResponse fx = as_all("PUT", "/v1/admin/fx", R"({"usdInr":"84.25"})");
    ASSERT_EQ(fx.status, 200) << fx.body;
    EXPECT_EQ(parsed(fx)["exchangeRate"], "84.25");
    EXPECT_EQ(store.exchange_rate()->inr_per_usd_micro, 84250000u);
    const std::string catalog = R"({"plans":[{"id":"basic-1k","name":"Basic","priceInr":899,"features":["a"],
        "popular":true,"sortOrder":1,"entitlements":{"rateLimitPerMinute":120,"maxKeys":5,
        "quota":{"units":1000,"period":"month"}}},{"id":"pro-10k","name":"Pro","priceInr":4999,"features":["b"],
        "popular":false,"sortOrder":2}]})";
    HttpResponse plans = as_all("PUT", "/v1/admin/plans", catalog);
    ASSERT_EQ(plans.status, 200) << plans.body;
    EXPECT_EQ(parsed(plans)["plans"].size(), 2u);

    // a catalog that drops a plan in use: 409 naming it, nothing changed,
    // unless ?retire= moves its accounts in the same write
    const std::string acc = new_account();
    ASSERT_EQ(as_all("PUT", "/v1/admin/accounts/" + acc + "/plan", R"({"planId":"basic-1k"})").status, 200);
    const std::string without = R"({"plans":[{"id":"pro-10k","name":"Pro","priceInr":4999,"features":["b"],
        "popular":true,"sortOrder":2}]})";
    HttpResponse in_use = as_all("PUT", "/v1/admin/plans", without);
    EXPECT_EQ(in_use.status, 409) << in_use.body;
    EXPECT_EQ(code(in_use), "PLAN_IN_USE");
    EXPECT_NE(in_use.body.find("basic-1k"), std::string::npos) << in_use.body;
    EXPECT_EQ(store.list_plans().size(), 2u) << "nothing imported";
    EXPECT_EQ(field(as_all("PUT", "/v1/admin/plans", without, "retire=basic-1k")), "retire");
    EXPECT_EQ(field(as_all("PUT", "/v1/admin/plans", without, "retire=basic-1k=pro-10k&retire=basic-1k=pro-10k")),
              "retire");
    EXPECT_EQ(field(as_all("PUT", "/v1/admin/plans", without, "retiring=basic-1k=pro-10k")), "retiring");
    EXPECT_EQ(as_all("PUT", "/v1/admin/plans", without, "retire=basic-1k=no-such").status, 400)
        << "a retirement to a plan the catalog lacks";
    HttpResponse moved = as_all("PUT", "/v1/admin/plans", without, "retire=basic-1k=pro-10k");
    ASSERT_EQ(moved.status, 200) << moved.body;
    EXPECT_EQ(parsed(moved)["moved"], json::parse(R"([{"from":"basic-1k","to":"pro-10k","accounts":1}])"));
    EXPECT_EQ(parsed(moved)["removed"], 1);
    EXPECT_EQ(parsed(as_all("GET", "/v1/admin/accounts/" + acc))["planId"], "pro-10k");
}

TEST_P(AdminApiTest, TheReportsFormIsTheOneTheClientWantsMore) {
    auto form = [&](const std::string &accept) {
        HttpRequest r;
        r.method = "GET";
        r.path = "/v1/admin/usage/report";
        r.query = "from=2026-11-01&to=2026-11-30&by=month";
        r.accept = accept;
        r.has_authorization = true;
        r.authorization = "Bearer " + all.secret;
        HttpResponse res = api.handle(r);
        return std::to_string(res.status) + " " + res.content_type;
    };
    EXPECT_EQ(form(""), "200 text/csv; charset=utf-8");
    EXPECT_EQ(form("application/json"), "200 application/json");
    EXPECT_EQ(form("application/json;q=0, */*"), "200 text/csv; charset=utf-8") << "q=0 refuses JSON";
    EXPECT_EQ(form("text/csv;q=0.4, application/json;q=0.9"), "200 application/json");
    EXPECT_EQ(form("text/csv, application/json"), "200 text/csv; charset=utf-8") << "a tie: CSV";
    EXPECT_EQ(form("image/png"), "406 application/json");
    EXPECT_EQ(form("text/csv;q=0"), "406 application/json");
}

TEST_P(AdminApiTest, ABadPageIsRefusedWithAnExternalIdToo) {
    EXPECT_EQ(field(as_all("GET", "/v1/admin/accounts", "", "externalId=cus_1&limit=0")), "limit");
    EXPECT_EQ(field(as_all("GET", "/v1/admin/accounts", "", "externalId=cus_1&cursor=nope")), "cursor");
    EXPECT_EQ(as_all("GET", "/v1/admin/accounts", "", "externalId=cus_1&limit=5").status, 200);
}

INSTANTIATE_TEST_SUITE_P(Backends, AdminApiTest, keyauth::testing::kBothBackends, keyauth::testing::backend_name);
