// post_webhook against real HTTPS receivers on loopback (tests/https_receiver.h)
// with a CA made for the test. Only loopback is ever dialled: every other
// address in these tests is refused before any socket exists, and the
// pure address policy is tested in webhook_address_test.cc.
#include "webhook_http.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "https_receiver.h"
#include "temp_dir.h"
#include "test_certs.h"

using keyauth::post_webhook;
using keyauth::WebhookHttpOptions;
using keyauth::WebhookHttpResult;
using keyauth::testing::HttpsReceiver;
using keyauth::testing::ReceiverAnswer;
using keyauth::testing::ReceivedRequest;
using keyauth::testing::TempDir;
using keyauth::testing::TestCerts;
using std::chrono::milliseconds;

namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

constexpr milliseconds kWait{10000};  // deadline for a receiver to see what was sent

// Milliseconds since `start`, as a number (readable in a failure message).
long long ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count();
}

// The signature and id are what no error text may ever show.
const Headers kSigned = {
    {"webhook-id", "msg_2mZ3pN8cQx4bYkLw"},
    {"webhook-timestamp", "1767225600"},
    {"webhook-signature", "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
};
const std::string kBody = R"({"type":"key.created","timestamp":"2026-01-01T00:00:00Z","data":{"keyId":"key_1"}})";

class WebhookHttp : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        pki_ = new TempDir();
        certs_ = new TestCerts();
        std::string error;
        certs_ok_ = keyauth::testing::make_test_certs(pki_->path(), *certs_, error);
        if (!certs_ok_) certs_error_ = new std::string(error);
    }
    static void TearDownTestSuite() {
        delete certs_;
        delete pki_;
        delete certs_error_;
        certs_ = nullptr;
        pki_ = nullptr;
        certs_error_ = nullptr;
    }
    void SetUp() override { ASSERT_TRUE(certs_ok_) << *certs_error_; }

    std::unique_ptr<HttpsReceiver> receiver(const std::string &address = "127.0.0.1") {
        auto r = std::make_unique<HttpsReceiver>(certs_->server_cert, certs_->server_key, address);
        EXPECT_TRUE(r->ok()) << r->error();
        return r;
    }
    // --webhook-allow-private with the test CA added: what a lab would run
    static WebhookHttpOptions lab(milliseconds timeout = milliseconds(10000)) {
        WebhookHttpOptions o;
        o.allow_private = true;
        o.ca_file = certs_->ca_file;
        o.timeout = timeout;
        return o;
    }
    static void expect_no_secret(const WebhookHttpResult &r) {
        for (const auto &h : kSigned) EXPECT_EQ(r.error.find(h.second), std::string::npos) << r.error;
        EXPECT_EQ(r.error.find("key.created"), std::string::npos) << r.error;
    }

    static TempDir *pki_;
    static TestCerts *certs_;
    static bool certs_ok_;
    static std::string *certs_error_;
};

TempDir *WebhookHttp::pki_ = nullptr;
TestCerts *WebhookHttp::certs_ = nullptr;
bool WebhookHttp::certs_ok_ = false;
std::string *WebhookHttp::certs_error_ = nullptr;

// Sets an environment variable for one test's duration.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const std::string &value) : name_(name) { setenv(name, value.c_str(), 1); }
    ~ScopedEnv() { unsetenv(name_); }

private:
    const char *name_;
};

}  // namespace

TEST_F(WebhookHttp, LoopbackIsRefusedWithoutAllowPrivateAndNeverDialled) {
    auto r = receiver();
    WebhookHttpOptions o;
    o.ca_file = certs_->ca_file;
    WebhookHttpResult result = post_webhook(r->url("/hook"), kSigned, kBody, o);
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.error, "refused: 127.0.0.1 is loopback");
    EXPECT_EQ(r->connections(), 0u);
    expect_no_secret(result);
}

TEST_F(WebhookHttp, LocalhostAndIpv6LoopbackAreRefused) {
    auto r = receiver();
    WebhookHttpOptions o;
    o.ca_file = certs_->ca_file;
    // libcurl resolves "localhost" itself (no DNS query leaves the host)
    WebhookHttpResult result = post_webhook("https://localhost:" + std::to_string(r->port()) + "/", kSigned, kBody, o);
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.error.rfind("refused: ", 0), 0u) << result.error;
    EXPECT_NE(result.error.find("127.0.0.1 is loopback"), std::string::npos) << result.error;
    EXPECT_EQ(r->connections(), 0u);

    HttpsReceiver v6(certs_->server_cert, certs_->server_key, "::1");
    if (!v6.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << v6.error();
    result = post_webhook(v6.url(), kSigned, kBody, o);
    EXPECT_EQ(result.error, "refused: ::1 is loopback");
    result = post_webhook("https://[::ffff:127.0.0.1]:" + std::to_string(r->port()) + "/", kSigned, kBody, o);
    EXPECT_EQ(result.error, "refused: ::ffff:127.0.0.1 is loopback");
    // libcurl reads these spellings of 127.0.0.1 as 127.0.0.1: still refused
    for (const char *host : {"2130706433", "0x7f.1", "127.1"}) {
        result = post_webhook("https://" + std::string(host) + ":" + std::to_string(r->port()) + "/", kSigned, kBody, o);
        EXPECT_EQ(result.error, "refused: 127.0.0.1 is loopback") << host;
    }
    EXPECT_EQ(v6.connections(), 0u);
    EXPECT_EQ(r->connections(), 0u);
}

TEST_F(WebhookHttp, PostArrivesWithItsHeadersAndBody) {
    auto r = receiver();
    WebhookHttpResult result = post_webhook(r->url("/in/hook?x=1"), kSigned, kBody, lab());
    EXPECT_EQ(result.status, 200);
    EXPECT_EQ(result.error, "");
    ASSERT_TRUE(r->wait_for_requests(1, kWait));
    const ReceivedRequest q = r->requests().at(0);
    EXPECT_EQ(q.method, "POST");
    EXPECT_EQ(q.target, "/in/hook?x=1");
    EXPECT_EQ(q.body, kBody);
    for (const auto &h : kSigned) EXPECT_EQ(q.header(h.first), h.second) << h.first;
    EXPECT_EQ(q.header("content-type"), "application/json");
    EXPECT_EQ(q.header("user-agent"), "keyauth-webhooks/1");
    EXPECT_EQ(q.header("content-length"), std::to_string(kBody.size()));
    EXPECT_FALSE(q.has_header("expect"));
    EXPECT_EQ(r->connections(), 1u);
}

TEST_F(WebhookHttp, ALargeBodyIsSentWithoutWaitingForContinue) {
    auto r = receiver();
    const std::string big(3 * 1024 * 1024, 'x');
    WebhookHttpResult result = post_webhook(r->url(), kSigned, big, lab());
    EXPECT_EQ(result.status, 200) << result.error;
    ASSERT_TRUE(r->wait_for_requests(1, kWait));
    EXPECT_EQ(r->requests().at(0).body, big);
    // no "Expect: 100-continue", so libcurl has nothing to wait a second for
    // (the call's time is not asserted: a loaded machine can take longer)
    EXPECT_FALSE(r->requests().at(0).has_header("expect"));
}

TEST_F(WebhookHttp, ReturnsTheReceiversStatus) {
    auto r = receiver();
    r->script({ReceiverAnswer::status_of(500), ReceiverAnswer::status_of(410), ReceiverAnswer::status_of(204),
               ReceiverAnswer::status_of(404)});
    EXPECT_EQ(post_webhook(r->url(), kSigned, kBody, lab()).status, 500);
    EXPECT_EQ(post_webhook(r->url(), kSigned, kBody, lab()).status, 410);
    EXPECT_EQ(post_webhook(r->url(), kSigned, kBody, lab()).status, 204);
    WebhookHttpResult last = post_webhook(r->url(), kSigned, kBody, lab());
    EXPECT_EQ(last.status, 404);
    EXPECT_EQ(last.error, "");
    EXPECT_EQ(r->requests().size(), 4u);
}

TEST_F(WebhookHttp, RedirectIsAStatusAndNeverFollowed) {
    auto first = receiver();
    auto second = receiver();
    for (int status : {301, 302, 307, 308}) {
        first->answer(ReceiverAnswer::status_of(status, {{"Location", second->url("/elsewhere")}}));
        WebhookHttpResult result = post_webhook(first->url(), kSigned, kBody, lab());
        EXPECT_EQ(result.status, status);
        EXPECT_EQ(result.error, "");
    }
    EXPECT_EQ(first->requests().size(), 4u);
    EXPECT_EQ(second->connections(), 0u);
}

TEST_F(WebhookHttp, AReceiverThatNeverAnswersTimesOut) {
    auto r = receiver();
    r->answer(ReceiverAnswer::never());
    const auto start = std::chrono::steady_clock::now();
    WebhookHttpResult result = post_webhook(r->url(), kSigned, kBody, lab(milliseconds(1000)));
    const long long took = ms_since(start);
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.error, "timeout");
    EXPECT_GE(took, 900);
    EXPECT_LT(took, 8000);  // 1 s, with room for a loaded sanitizer run
    EXPECT_EQ(r->requests().size(), 1u);  // it was received whole, just not answered
}

TEST_F(WebhookHttp, TheTestCaIsNotTrustedWithoutCaFile) {
    auto r = receiver();
    WebhookHttpOptions o;
    o.allow_private = true;
    WebhookHttpResult result = post_webhook(r->url(), kSigned, kBody, o);
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.error.rfind("tls: certificate verify failed", 0), 0u) << result.error;
    EXPECT_EQ(r->requests().size(), 0u);
    expect_no_secret(result);
}

TEST_F(WebhookHttp, AMissingCaFileIsATlsError) {
    auto r = receiver();
    WebhookHttpOptions o = lab();
    o.ca_file = pki_->sub("no-such-ca.pem");
    WebhookHttpResult result = post_webhook(r->url(), kSigned, kBody, o);
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.error, "tls: the CA file could not be loaded");
    EXPECT_EQ(r->requests().size(), 0u);
}

TEST_F(WebhookHttp, HttpAndBadUrlsAreRefusedWithoutDialling) {
    auto r = receiver();
    const std::string port = std::to_string(r->port());
    WebhookHttpResult result = post_webhook("http://127.0.0.1:" + port + "/", kSigned, kBody, lab());
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.error,
              "refused: url must use https:// (http:// is refused: the signed events would travel in clear)");
    result = post_webhook("https://user:pw@127.0.0.1:" + port + "/", kSigned, kBody, lab());
    EXPECT_EQ(result.error, "refused: url must not contain a user name or password");
    EXPECT_EQ(r->connections(), 0u);
}

TEST_F(WebhookHttp, AHeaderThatCouldInjectIsRefusedWithoutDialling) {
    auto r = receiver();
    for (const Headers &bad : {Headers{{"webhook-id", "x\r\nX-Injected: 1"}}, Headers{{"bad name", "x"}},
                               Headers{{"", "x"}}, Headers{{"a:b", "x"}}}) {
        WebhookHttpResult result = post_webhook(r->url(), bad, kBody, lab());
        EXPECT_EQ(result.status, 0);
        EXPECT_EQ(result.error, "refused: a header name or value holds a character HTTP does not allow");
    }
    EXPECT_EQ(r->connections(), 0u);
}

TEST_F(WebhookHttp, ProxyEnvironmentIsIgnored) {
    auto r = receiver();
    auto proxy = receiver();  // where a proxy-obeying client would go
    const std::string p = "http://127.0.0.1:" + std::to_string(proxy->port());
    ScopedEnv a("https_proxy", p), b("HTTPS_PROXY", p), c("ALL_PROXY", p), d("all_proxy", p);
    EXPECT_EQ(post_webhook(r->url(), kSigned, kBody, lab()).status, 200);
    EXPECT_EQ(r->requests().size(), 1u);
    EXPECT_EQ(proxy->connections(), 0u);
}

// The answer is the status line and headers; a body that never ends is cut
// (past 64 KiB) rather than waited on until the timeout.
TEST_F(WebhookHttp, AnEndlessAnswerBodyIsCutAndItsStatusStands) {
    auto r = receiver();
    r->answer(ReceiverAnswer::endless_body(200));
    const auto start = std::chrono::steady_clock::now();
    WebhookHttpResult result = post_webhook(r->url(), kSigned, kBody, lab(milliseconds(6000)));
    EXPECT_EQ(result.status, 200);
    EXPECT_EQ(result.error, "");
    EXPECT_LT(ms_since(start), 5000);
}

TEST_F(WebhookHttp, ContentTypeGivenByTheCallerIsKept) {
    auto r = receiver();
    Headers h = kSigned;
    h.emplace_back("Content-Type", "application/cloudevents+json");
    ASSERT_EQ(post_webhook(r->url(), h, kBody, lab()).status, 200);
    ASSERT_TRUE(r->wait_for_requests(1, kWait));
    EXPECT_EQ(r->requests().at(0).header("content-type"), "application/cloudevents+json");
}
