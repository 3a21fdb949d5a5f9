// The console API's handlers against a real store, without HTTP: the same
// tests on both backends, LMDB (single host) and etcd (many edges, a real
// member on loopback), since the API must not change with the mode.
#include "console_fixture.h"

using namespace keyauth;
using keyauth::testing::Backend;
using keyauth::testing::ConsoleApiTest;
using nlohmann::json;

namespace {

const char kGood[] = R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":500})";

}  // namespace

TEST_P(ConsoleApiTest, CreateCapsTheRateAndReturnsTheSecretOnce) {
    HttpResponse r = create(alice, kGood);
    ASSERT_EQ(r.status, 201) << r.body;
    json k = parsed(r);
    EXPECT_EQ(k["rateLimitPerMinute"], 100);
    EXPECT_EQ(k["requestedRateLimitPerMinute"], 500);
    EXPECT_EQ(k["status"], "active");
    EXPECT_TRUE(k["secret"].is_string());
    EXPECT_EQ(r.account, id_to_string(kAccountIdPrefix, alice.account.id));
    HttpResponse list = call("GET", "/v1/keys", &alice);
    EXPECT_EQ(list.body.find(k["secret"].get<std::string>()), std::string::npos);
}

TEST_P(ConsoleApiTest, ValidationNamesTheField) {
    struct Case { const char *body; const char *field; } cases[] = {
        {R"({"scopes":["ip:read"],"rateLimitPerMinute":5})", "name"},
        {R"({"name":"k","rateLimitPerMinute":5})", "scopes"},
        {R"({"name":"k","scopes":["ip:read"]})", "rateLimitPerMinute"},
        {R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":5,"x":1})", "x"},
        {R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":5.0})", "rateLimitPerMinute"},
        {R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":-1})", "rateLimitPerMinute"},
        {R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":0})", "rateLimitPerMinute"},
        {R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":18446744073709551615})", "rateLimitPerMinute"},
        {R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":1e400})", "rateLimitPerMinute"},
        {R"({"name":"k","scopes":"ip:read","rateLimitPerMinute":5})", "scopes"},
        {R"({"name":"k","scopes":[null],"rateLimitPerMinute":5})", "scopes"},
        {R"({"name":"","scopes":["ip:read"],"rateLimitPerMinute":5})", "name"},
        {R"({"name":null,"scopes":["ip:read"],"rateLimitPerMinute":5})", "name"},
        {R"(nonsense)", "body"},
        {R"("a string")", "body"},
        {"", "body"},
        {"{\"name\":\"\xc3\x28\",\"scopes\":[\"ip:read\"],\"rateLimitPerMinute\":5}", "name"},
        {"{\"na\xffme\":\"k\",\"scopes\":[\"ip:read\"]}", "body"},  // a broken member name: no field
        // a repeated member: the last would win silently
        {R"({"name":"a","name":"b","scopes":["ip:read"],"rateLimitPerMinute":5})", "name"},
        {R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":5,"rateLimitPerMinute":5})",
         "rateLimitPerMinute"},
        // control characters: C0, DEL, C1 (U+0085, U+009F)
        {R"({"name":"a\u0007b","scopes":["ip:read"],"rateLimitPerMinute":5})", "name"},
        {R"({"name":"a\u007fb","scopes":["ip:read"],"rateLimitPerMinute":5})", "name"},
        {R"({"name":"a\u0085b","scopes":["ip:read"],"rateLimitPerMinute":5})", "name"},
        {"{\"name\":\"a\xc2\x9f\",\"scopes\":[\"ip:read\"],\"rateLimitPerMinute\":5}", "name"},
        // bidi overrides and isolates (U+202A..U+202E, U+2066..U+2069)
        {R"({"name":"prod\u202Edub","scopes":["ip:read"],"rateLimitPerMinute":5})", "name"},
        {"{\"name\":\"x\xe2\x80\xaa\",\"scopes\":[\"ip:read\"],\"rateLimitPerMinute\":5}", "name"},
        {R"({"name":"x\u2066y","scopes":["ip:read"],"rateLimitPerMinute":5})", "name"},
        {R"({"name":"x\u2069y","scopes":["ip:read"],"rateLimitPerMinute":5})", "name"},
    };
    for (const auto &c : cases) {
        HttpResponse r = create(alice, c.body);
        EXPECT_EQ(r.status, 400) << c.body;
        EXPECT_EQ(field_of(r), c.field) << c.body << " -> " << r.body;
    }
    EXPECT_TRUE(store.list_keys(alice.account.id, 100, std::nullopt).keys.empty());
}

TEST_P(ConsoleApiTest, NamesKeepOtherUnicode) {
    // neighbours of the refused ranges: U+00A0, U+2029, U+202F, U+2065, U+206A, emoji
    for (const char *name : {"caf\xc3\xa9 \xc2\xa0x", "a\xe2\x80\xa9", "a\xe2\x80\xaf",
                             "a\xe2\x81\xa5", "a\xe2\x81\xaa", "\xf0\x9f\x94\x91 key"}) {
        json body = {{"name", name}, {"scopes", {"ip:read"}}, {"rateLimitPerMinute", 5}};
        HttpResponse r = create(alice, body.dump());
        EXPECT_EQ(r.status, 201) << name << " -> " << r.body;
    }
}

TEST_P(ConsoleApiTest, MediaTypeSizeMethodAndRoute) {
    EXPECT_EQ(call("POST", "/v1/keys", &alice, kGood, "text/plain").status, 415);
    EXPECT_EQ(call("POST", "/v1/keys", &alice, kGood, "").status, 415);
    EXPECT_EQ(call("POST", "/v1/keys", &alice, kGood, "Application/JSON; charset=utf-8").status, 201);
    EXPECT_EQ(create(alice, std::string(ConsoleApi::kMaxBody + 1, ' ')).status, 413);
    HttpResponse r = call("PUT", "/v1/keys", &alice);
    EXPECT_EQ(r.status, 405);
    ASSERT_FALSE(r.headers.empty());
    EXPECT_EQ(r.headers[0].second, "GET, POST");
    EXPECT_EQ(call("GET", "/v1/keys/", &alice).status, 404);
    EXPECT_EQ(call("GET", "/v2/keys", &alice).status, 404);
    EXPECT_EQ(call("POST", "/v1/keys//revoke", &alice).status, 404);
}

TEST_P(ConsoleApiTest, AuthenticationComesFirst) {
    EXPECT_EQ(call("GET", "/v1/keys", nullptr).status, 401);
    EXPECT_EQ(parsed(call("GET", "/v1/keys", nullptr))["error"]["code"], "CONSOLE_TOKEN_REQUIRED");
    HttpRequest r;
    r.method = "GET";
    r.path = "/v1/keys";
    r.has_authorization = true;
    r.authorization = "Bearer kac_nope";
    HttpResponse res = api.handle(r);
    EXPECT_EQ(res.status, 401);
    EXPECT_EQ(parsed(res)["error"]["code"], "INVALID_CONSOLE_TOKEN");
    EXPECT_EQ(call("POST", "/v1/keys", nullptr, "garbage").status, 401) << "no validation before auth";
}

TEST_P(ConsoleApiTest, RevokeIsScopedToTheCaller) {
    json k = parsed(create(bob, kGood));
    std::string path = "/v1/keys/" + k["id"].get<std::string>() + "/revoke";
    HttpResponse cross = call("POST", path, &alice);
    EXPECT_EQ(cross.status, 404);
    EXPECT_EQ(parsed(cross)["error"]["code"], "KEY_NOT_FOUND");
    HttpResponse own = call("POST", path, &bob);
    EXPECT_EQ(own.status, 200);
    EXPECT_EQ(parsed(own)["status"], "revoked");
    EXPECT_EQ(call("POST", "/v1/keys/key_zz/revoke", &bob).status, 404);
}

TEST_P(ConsoleApiTest, ListPaginates) {
    for (int i = 0; i < 5; i++) create(alice, kGood);
    HttpRequest r;
    r.method = "GET";
    r.path = "/v1/keys";
    r.has_authorization = true;
    r.authorization = "Bearer " + alice.console_token;
    r.has_limit = true;
    r.query_limit = "2";
    json first = parsed(api.handle(r));
    ASSERT_EQ(first["keys"].size(), 2u);
    ASSERT_TRUE(first["nextCursor"].is_string());
    r.has_cursor = true;
    r.query_cursor = first["nextCursor"];
    json second = parsed(api.handle(r));
    EXPECT_NE(second["keys"][0]["id"], first["keys"][1]["id"]);
    r.query_limit = "1000";
    EXPECT_EQ(api.handle(r).status, 400);
}

INSTANTIATE_TEST_SUITE_P(Backends, ConsoleApiTest, keyauth::testing::kBothBackends,
                         keyauth::testing::backend_name);
