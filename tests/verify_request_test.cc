// The verify API's request body (src/core/verify_request.h): what is
// accepted, and that every malformed body is refused naming its field.
#include "verify_request.h"

#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

using namespace keyauth;

namespace {

const char kKey[] = "ka_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ab";

// A body and what it parsed to, kept together and in place: the request's
// views point into the body, and its client into the request itself, so
// neither may be copied away from the other.
struct Parsed {
    const std::string body;
    ka_verify_request_t r;
    explicit Parsed(std::string text) : body(std::move(text)) {
        EXPECT_TRUE(parse_verify_request(body, r)) << body << ": " << r.field << " " << r.error;
    }
    Parsed(const Parsed &) = delete;
    Parsed &operator=(const Parsed &) = delete;
};

// The field it is refused for.
std::string refused(const std::string &body) {
    ka_verify_request_t out;
    EXPECT_FALSE(parse_verify_request(body, out)) << body;
    EXPECT_NE(out.error[0], '\0') << body;
    return out.field;
}

std::string view(ka_str_t s) { return std::string(s.data, s.len); }

}  // namespace

TEST(VerifyRequest, KeyAloneTakesTheDefaults) {
    const Parsed p(std::string("{\"key\":\"") + kKey + "\"}");
    const ka_verify_request_t &r = p.r;
    EXPECT_EQ(view(r.key), kKey);
    // a view into the body, not a copy
    EXPECT_EQ(r.key.data, p.body.data() + 8);
    EXPECT_EQ(r.n_scopes, 0u);
    EXPECT_EQ(r.cost, 1u);
    EXPECT_EQ(r.client, nullptr);
}

TEST(VerifyRequest, EveryFieldWithWhitespace) {
    const Parsed p(std::string(" \r\n{ \"ip\" : \"10.1.2.3\" ,\t\"scopes\": [ \"ip:read\" , \"tools:run\" ],"
                               " \"cost\" : 0, \"key\":\"") + kKey + "\" }\n");
    const ka_verify_request_t &r = p.r;
    EXPECT_EQ(view(r.key), kKey);
    ASSERT_EQ(r.n_scopes, 2u);
    EXPECT_EQ(view(r.scopes[0]), "ip:read");
    EXPECT_EQ(view(r.scopes[1]), "tools:run");
    EXPECT_EQ(r.cost, 0u);
    ASSERT_NE(r.client, nullptr);
    ASSERT_EQ(r.client->sa_family, AF_INET);
    const auto *sin = reinterpret_cast<const sockaddr_in *>(r.client);
    EXPECT_EQ(ntohl(sin->sin_addr.s_addr), 0x0a010203u);
}

TEST(VerifyRequest, Ipv6AndMappedAddresses) {
    const Parsed p(std::string("{\"key\":\"") + kKey + "\",\"ip\":\"2001:db8::1\"}");
    const ka_verify_request_t &r = p.r;
    ASSERT_NE(r.client, nullptr);
    ASSERT_EQ(r.client->sa_family, AF_INET6);
    const auto *sin6 = reinterpret_cast<const sockaddr_in6 *>(r.client);
    EXPECT_EQ(sin6->sin6_addr.s6_addr[0], 0x20);
    EXPECT_EQ(sin6->sin6_addr.s6_addr[15], 1);
    const Parsed mapped(std::string("{\"key\":\"") + kKey + "\",\"ip\":\"::ffff:10.1.2.3\"}");
    ASSERT_NE(mapped.r.client, nullptr);
    ASSERT_EQ(mapped.r.client->sa_family, AF_INET6);  // the IP check maps it back to IPv4
}

TEST(VerifyRequest, OptionalFieldsMayBeNull) {
    const Parsed p(std::string("{\"key\":\"") + kKey + "\",\"scopes\":null,\"cost\":null,\"ip\":null}");
    const ka_verify_request_t &r = p.r;
    EXPECT_EQ(r.n_scopes, 0u);
    EXPECT_EQ(r.cost, 1u);
    EXPECT_EQ(r.client, nullptr);
}

TEST(VerifyRequest, CostBounds) {
    EXPECT_EQ(Parsed(std::string("{\"key\":\"") + kKey + "\",\"cost\":1000000000}").r.cost, 1000000000u);
}

TEST(VerifyRequest, ThirtyTwoScopesButNotThirtyThree) {
    std::string scopes;
    for (int i = 0; i < 32; i++) scopes += (i ? ",\"r" : "\"r") + std::to_string(i) + ":read\"";
    const Parsed p(std::string("{\"key\":\"") + kKey + "\",\"scopes\":[" + scopes + "]}");
    const ka_verify_request_t &r = p.r;
    EXPECT_EQ(r.n_scopes, 32u);
    EXPECT_EQ(view(r.scopes[31]), "r31:read");
    EXPECT_EQ(refused(std::string("{\"key\":\"") + kKey + "\",\"scopes\":[" + scopes + ",\"x:y\"]}"), "scopes");
}

TEST(VerifyRequest, MalformedBodiesNameTheirField) {
    const std::string k = std::string("\"key\":\"") + kKey + "\"";
    struct Case {
        std::string body;
        const char *field;
    } cases[] = {
        {"", "body"},
        {"   ", "body"},
        {"[]", "body"},
        {"\"key\"", "body"},
        {"null", "body"},
        {"{", "body"},
        {"{" + k, "body"},
        {"{" + k + ",}", "body"},
        {"{" + k + "}x", "body"},
        {"{" + k + "}{}", "body"},
        {"{'key':'x'}", "body"},
        {"{}", "key"},
        {"{\"key\":null}", "key"},
        {"{\"key\":1}", "key"},
        {"{\"key\":\"\"}", "key"},
        {"{\"key\":\"ka_\\u0041\"}", "key"},
        {"{\"key\":\"ka_\x01\"}", "body"},
        {"{\"key\":\"ka_abc", "body"},
        {"{" + k + "," + k + "}", "key"},
        {"{" + k + ",\"name\":\"x\"}", "name"},
        {"{" + k + ",\"Key\":\"x\"}", "Key"},
        {"{" + k + ",\"k\\u0065y\":\"x\"}", "body"},
        {"{" + k + ",\"a b\":1}", "body"},
        {"{" + k + ",\"scopes\":\"ip:read\"}", "scopes"},
        {"{" + k + ",\"scopes\":[1]}", "scopes"},
        {"{" + k + ",\"scopes\":[\"ip\"]}", "scopes"},
        {"{" + k + ",\"scopes\":[\"ip:*\"]}", "scopes"},
        {"{" + k + ",\"scopes\":[\"IP:read\"]}", "scopes"},
        {"{" + k + ",\"scopes\":[\"ip:read\",]}", "body"},
        {"{" + k + ",\"scopes\":[\"ip:read\"}", "body"},
        {"{" + k + ",\"scopes\":[\"ip\\u003aread\"]}", "scopes"},
        {"{" + k + ",\"cost\":-1}", "cost"},
        {"{" + k + ",\"cost\":1.5}", "cost"},
        {"{" + k + ",\"cost\":1e3}", "cost"},
        {"{" + k + ",\"cost\":\"1\"}", "cost"},
        {"{" + k + ",\"cost\":true}", "cost"},
        {"{" + k + ",\"cost\":1000000001}", "cost"},
        {"{" + k + ",\"cost\":99999999999999999999999}", "cost"},
        {"{" + k + ",\"cost\":01}", "body"},
        {"{" + k + ",\"ip\":\"10.0.0.256\"}", "ip"},
        {"{" + k + ",\"ip\":\"10.0.0.0/8\"}", "ip"},
        {"{" + k + ",\"ip\":\" 10.0.0.1\"}", "ip"},
        {"{" + k + ",\"ip\":167772161}", "ip"},
        {"{" + k + ",\"ip\":\"fe80::1%eth0\"}", "ip"},
    };
    for (const Case &c : cases) {
        EXPECT_EQ(refused(c.body), c.field) << c.body;
    }
}

TEST(VerifyRequest, ErrorsNeverCarryTheKeyNorQuotes) {
    const std::string bodies[] = {
        std::string("{\"key\":\"") + kKey + "\",\"" + kKey + "\":1}",
        std::string("{\"key\":\"") + kKey + "\",\"scopes\":[\"" + kKey + "\"]}",
        std::string("{\"key\":\"") + kKey + "\",\"ip\":\"" + kKey + "\"}",
        std::string("{\"key\":\"") + kKey,
    };
    for (const std::string &b : bodies) {
        ka_verify_request_t out;
        ASSERT_FALSE(parse_verify_request(b, out)) << b;
        const std::string text = std::string(out.field) + " " + out.error;
        EXPECT_EQ(text.find("ka_"), std::string::npos) << text;
        EXPECT_EQ(text.find_first_of("\"\\"), std::string::npos) << text;
    }
}

TEST(VerifyRequest, BodyOverTheBoundIsRefusedWhole) {
    std::string body = std::string("{\"key\":\"") + kKey + "\"}";
    body.append(KA_VERIFY_MAX_BODY - body.size(), ' ');
    { const Parsed p(body); }
    body += ' ';
    EXPECT_EQ(refused(body), "body");
}

TEST(VerifyRequest, CApiMatches) {
    ka_verify_request_t out;
    const std::string body = std::string("{\"key\":\"") + kKey + "\",\"cost\":7}";
    ASSERT_EQ(ka_verify_parse(body.data(), body.size(), &out), 1);
    EXPECT_EQ(out.cost, 7u);
    EXPECT_EQ(ka_verify_parse(nullptr, 0, &out), 0);
    EXPECT_STREQ(out.field, "body");
}
