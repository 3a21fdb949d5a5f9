// GitHub's secret scanning key list and its cache (issue #47): parsed from
// the layout GitHub documents, read from a file or fetched from a plain HTTP
// server on 127.0.0.1 made here (tests/https_receiver.h), with a clock the
// test moves. Nothing but loopback is ever dialled.
#include "github_keys.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "ec_test_keys.h"
#include "https_receiver.h"
#include "temp_dir.h"

namespace keyauth {
// GoogleTest prints a verdict by its name
void PrintTo(SignatureVerdict v, std::ostream *os) { *os << signature_verdict_name(v); }
}  // namespace keyauth

using keyauth::GithubKeys;
using keyauth::GithubKeysOptions;
using keyauth::GithubPublicKey;
using keyauth::parse_github_keys;
using keyauth::SignatureVerdict;
using keyauth::testing::HttpsReceiver;
using keyauth::testing::PlainHttp;
using keyauth::testing::ReceiverAnswer;
using keyauth::testing::TempDir;

namespace {

constexpr std::chrono::milliseconds kWait{10000};
const std::string kBody = R"([{"token":"some_token","type":"some_type","url":"some_url"}])";
const std::string kId1 = "90a421169f0a406205f1563a953312f0be898d3c7b6c06b681aa86a874555f4a";
const std::string kId2 = "bcb53661c06b4728e59d897fb6165d5c9cda0fd9cdf9d09ead458168deb7518c";
const std::string kId3 = "0000000000000000000000000000000000000000000000000000000000000003";

std::string json_text(const std::string &s) {
    std::string out = "\"";
    for (char c : s) out += c == '\n' ? std::string("\\n") : std::string(1, c);
    return out + "\"";
}

struct Entry {
    std::string id;
    std::string pem;
    bool current;
};

std::string key_list(const std::vector<Entry> &entries) {
    std::string out = R"({"public_keys":[)";
    for (size_t i = 0; i < entries.size(); ++i) {
        out += (i ? "," : "") + std::string(R"({"key_identifier":)") + json_text(entries[i].id) +
               R"(,"key":)" + json_text(entries[i].pem) + R"(,"is_current":)" +
               (entries[i].current ? "true" : "false") + "}";
    }
    return out + "]}";
}

class GithubKeysTest : public ::testing::Test {
protected:
    void SetUp() override {
        key1_ = keyauth::testing::make_test_key();
        key2_ = keyauth::testing::make_test_key();
        key3_ = keyauth::testing::make_test_key();
        ASSERT_TRUE(key1_ && key2_ && key3_);
        list_ = key_list({{kId1, keyauth::testing::public_pem(key1_.get()), false},
                          {kId2, keyauth::testing::public_pem(key2_.get()), true}});
    }

    GithubKeysOptions options_at(const std::string &url) {
        GithubKeysOptions o;
        o.url = url;
        o.fetch_timeout = std::chrono::milliseconds(5000);
        o.clock = [this] { return now_ms_.load(); };
        return o;
    }
    std::unique_ptr<HttpsReceiver> server() {
        auto s = std::make_unique<HttpsReceiver>(PlainHttp{});
        EXPECT_TRUE(s->ok()) << s->error();
        return s;
    }
    void advance(std::chrono::milliseconds by) { now_ms_ += by.count(); }
    std::string signed_by(EVP_PKEY *key, const std::string &body = kBody) {
        return keyauth::testing::sign_base64(key, body);
    }

    keyauth::testing::EvpPkey key1_, key2_, key3_;
    std::string list_;
    std::atomic<int64_t> now_ms_{1'800'000'000'000};
};

TEST_F(GithubKeysTest, TheDocumentedLayoutIsParsed) {
    std::vector<GithubPublicKey> keys;
    std::string error;
    ASSERT_TRUE(parse_github_keys(list_, keys, error)) << error;
    ASSERT_EQ(keys.size(), 2u);
    EXPECT_EQ(keys[0].key_identifier, kId1);
    EXPECT_EQ(keys[0].key_pem, keyauth::testing::public_pem(key1_.get()));
    EXPECT_FALSE(keys[0].is_current);
    EXPECT_EQ(keys[1].key_identifier, kId2);
    EXPECT_TRUE(keys[1].is_current);
}

TEST_F(GithubKeysTest, EntriesWeCannotUseAreSkippedAndAListWithoutAnyIsRefused) {
    std::vector<GithubPublicKey> keys;
    std::string error;
    const std::string pem = json_text(keyauth::testing::public_pem(key1_.get()));
    ASSERT_TRUE(parse_github_keys(R"({"public_keys":[1,{"key":)" + pem + R"(},{"key_identifier":"x","key":7},)"
                                  R"({"key_identifier":"","key":)" + pem + R"(},)"
                                  R"({"key_identifier":"ok","key":)" + pem + R"(,"extra":[]}],"more":{}})",
                                  keys, error))
        << error;
    ASSERT_EQ(keys.size(), 1u);
    EXPECT_EQ(keys[0].key_identifier, "ok");
    EXPECT_FALSE(keys[0].is_current);  // absent

    const std::pair<std::string, std::string> refused[] = {
        {"", "the list is not JSON"},
        {"<html>rate limited</html>", "the list is not JSON"},
        {"[]", "the list has no \"public_keys\" array"},
        {R"({"keys":[]})", "the list has no \"public_keys\" array"},
        {R"({"public_keys":{}})", "the list has no \"public_keys\" array"},
        {R"({"public_keys":[]})", "the list holds no usable key"},
        {R"({"public_keys":[{"key_identifier":"a","key_identifier":"b","key":"k"}]})",
         "a member name repeats within an object"},
    };
    for (const auto &[text, why] : refused) {
        EXPECT_FALSE(parse_github_keys(text, keys, error)) << text;
        EXPECT_EQ(error, why) << text;
        EXPECT_TRUE(keys.empty());
    }
}

TEST_F(GithubKeysTest, FromAFileKnownKeysVerifyWithoutRereading) {
    TempDir dir;
    std::ofstream(dir.sub("keys.json")) << list_;
    GithubKeysOptions o = options_at("http://127.0.0.1:9/never-dialled");
    o.file = dir.sub("keys.json");
    GithubKeys keys(o);
    EXPECT_EQ(keys.fetches(), 0u);  // never in the constructor
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kValid);
    EXPECT_EQ(keys.verify(kId2, signed_by(key2_.get()), kBody), SignatureVerdict::kValid);
    EXPECT_EQ(keys.verify(kId2, signed_by(key2_.get()), kBody + " "), SignatureVerdict::kBadSignature);
    EXPECT_EQ(keys.verify(kId1, signed_by(key2_.get()), kBody), SignatureVerdict::kBadSignature);
    EXPECT_EQ(keys.fetches(), 1u);
    EXPECT_EQ(keys.fetch_failures(), 0u);

    // a key added to the file is seen on the next read, at most once a minute
    std::ofstream(dir.sub("keys.json"), std::ios::trunc)
        << key_list({{kId3, keyauth::testing::public_pem(key3_.get()), true}});
    advance(std::chrono::seconds(61));
    EXPECT_EQ(keys.verify(kId3, signed_by(key3_.get()), kBody), SignatureVerdict::kValid);
    EXPECT_EQ(keys.fetches(), 2u);
}

TEST_F(GithubKeysTest, AListedKeyNotOnP256MakesBadSignaturesNotAnUnknownKey) {
    TempDir dir;
    auto p384 = keyauth::testing::make_test_key("EC", "P-384");
    ASSERT_TRUE(p384);
    std::ofstream(dir.sub("keys.json")) << key_list({{kId1, keyauth::testing::public_pem(key1_.get()), false},
                                                     {kId3, keyauth::testing::public_pem(p384.get()), true}});
    GithubKeysOptions o = options_at("http://127.0.0.1:9/never-dialled");
    o.file = dir.sub("keys.json");
    GithubKeys keys(o);
    EXPECT_EQ(keys.verify(kId3, signed_by(p384.get()), kBody), SignatureVerdict::kBadSignature);
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kValid);
    EXPECT_EQ(keys.fetches(), 1u);
}

TEST_F(GithubKeysTest, AMissingFileIsUnavailable) {
    TempDir dir;
    GithubKeysOptions o = options_at("http://127.0.0.1:9/never-dialled");
    o.file = dir.sub("absent.json");
    GithubKeys keys(o);
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kUnavailable);
    EXPECT_EQ(keys.fetch_failures(), 1u);
    EXPECT_EQ(keys.last_fetch_error().rfind("file: cannot open ", 0), 0u) << keys.last_fetch_error();
}

TEST_F(GithubKeysTest, AMissingIdentifierOrSignatureIsBadWithoutAFetch) {
    auto s = server();
    s->answer(ReceiverAnswer::status_of(200, {}, list_));
    GithubKeys keys(options_at(s->url("/meta")));
    EXPECT_EQ(keys.verify("", signed_by(key1_.get()), kBody), SignatureVerdict::kBadSignature);
    EXPECT_EQ(keys.verify(kId1, "", kBody), SignatureVerdict::kBadSignature);
    EXPECT_EQ(keys.verify(std::string(300, 'a'), signed_by(key1_.get()), kBody), SignatureVerdict::kBadSignature);
    EXPECT_EQ(keys.fetches(), 0u);
    EXPECT_EQ(s->connections(), 0u);
}

TEST_F(GithubKeysTest, OverHttpTheListIsFetchedOnceAndAnUnknownIdRefetchesOncePerMinute) {
    auto s = server();
    s->answer(ReceiverAnswer::status_of(200, {{"Content-Type", "application/json"}}, list_));
    GithubKeys keys(options_at(s->url("/meta/public_keys/secret_scanning")));

    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kValid);
    ASSERT_EQ(s->requests().size(), 1u);
    const auto first = s->requests()[0];
    EXPECT_EQ(first.method, "GET");
    EXPECT_EQ(first.target, "/meta/public_keys/secret_scanning");
    EXPECT_EQ(first.header("user-agent"), "keyauthd");
    EXPECT_EQ(first.header("accept"), "application/json");

    // a known identifier: no fetch, whatever the time
    advance(std::chrono::hours(5));
    EXPECT_EQ(keys.verify(kId2, signed_by(key2_.get()), kBody), SignatureVerdict::kValid);
    EXPECT_EQ(s->requests().size(), 1u);

    // an unknown one refetches once...
    EXPECT_EQ(keys.verify(kId3, signed_by(key3_.get()), kBody), SignatureVerdict::kUnknownKey);
    EXPECT_EQ(s->requests().size(), 2u);
    // ...then not again within the minute, even once GitHub has the key
    s->answer(ReceiverAnswer::status_of(
        200, {}, key_list({{kId3, keyauth::testing::public_pem(key3_.get()), true}})));
    advance(std::chrono::seconds(59));
    EXPECT_EQ(keys.verify(kId3, signed_by(key3_.get()), kBody), SignatureVerdict::kUnknownKey);
    EXPECT_EQ(s->requests().size(), 2u);
    EXPECT_EQ(keys.fetches(), 2u);
    // a minute after the last fetch it refetches, and the new list replaces the old
    advance(std::chrono::seconds(1));
    EXPECT_EQ(keys.verify(kId3, signed_by(key3_.get()), kBody), SignatureVerdict::kValid);
    EXPECT_EQ(s->requests().size(), 3u);
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kUnknownKey);
    EXPECT_EQ(keys.fetches(), 3u);
}

TEST_F(GithubKeysTest, NoListFromTheServerIsUnavailable) {
    const std::vector<std::pair<const char *, ReceiverAnswer>> answers = {
        {"500", ReceiverAnswer::status_of(500, {}, list_)},
        {"404", ReceiverAnswer::status_of(404)},
        {"redirect", ReceiverAnswer::status_of(302, {{"Location", "/elsewhere"}})},
        {"not json", ReceiverAnswer::status_of(200, {}, "<html>Service Unavailable</html>")},
        {"not the layout", ReceiverAnswer::status_of(200, {}, R"({"message":"API rate limit exceeded"})")},
        {"2 MiB", ReceiverAnswer::status_of(200, {}, std::string(2 << 20, ' ') + list_)},
        {"endless", ReceiverAnswer::endless_body(200)},
    };
    for (const auto &[what, answer] : answers) {
        auto s = server();
        s->answer(answer);
        GithubKeys keys(options_at(s->url("/keys")));
        EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kUnavailable) << what;
        EXPECT_EQ(s->requests().size(), 1u) << what;  // a redirect is not followed
        EXPECT_EQ(keys.fetches(), 1u) << what;
        EXPECT_EQ(keys.fetch_failures(), 1u) << what;
        // the reason names no part of the answer
        EXPECT_EQ(keys.last_fetch_error().find("Service"), std::string::npos) << keys.last_fetch_error();
        EXPECT_EQ(keys.last_fetch_error().find("rate limit"), std::string::npos) << keys.last_fetch_error();
        EXPECT_FALSE(keys.last_fetch_error().empty()) << what;
    }
}

TEST_F(GithubKeysTest, TheReasonsSayWhatFailed) {
    auto s = server();
    s->script({ReceiverAnswer::status_of(500), ReceiverAnswer::status_of(200, {}, std::string(2 << 20, ' '))});
    GithubKeys keys(options_at(s->url("/keys")));
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kUnavailable);
    EXPECT_EQ(keys.last_fetch_error(), "http: status 500");
    advance(std::chrono::minutes(1));
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kUnavailable);
    EXPECT_EQ(keys.last_fetch_error(), "too large: the answer is over 1048576 bytes");
}

TEST_F(GithubKeysTest, AServerThatIsDownIsUnavailableAndRetriedAfterAMinute) {
    std::string url;
    {
        auto gone = server();
        url = gone->url("/keys");
    }  // nothing listens there any more
    GithubKeys keys(options_at(url));
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kUnavailable);
    EXPECT_EQ(keys.last_fetch_error().rfind("connect: ", 0), 0u) << keys.last_fetch_error();
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kUnavailable);
    EXPECT_EQ(keys.fetches(), 1u);  // not hammered: once a minute
    advance(std::chrono::minutes(1));
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kUnavailable);
    EXPECT_EQ(keys.fetches(), 2u);
}

TEST_F(GithubKeysTest, AFailedRefetchKeepsTheListHeld) {
    auto s = server();
    s->script({ReceiverAnswer::status_of(200, {}, list_), ReceiverAnswer::status_of(503)});
    GithubKeys keys(options_at(s->url("/keys")));
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kValid);
    advance(std::chrono::minutes(2));
    EXPECT_EQ(keys.verify(kId3, signed_by(key3_.get()), kBody), SignatureVerdict::kUnknownKey);
    EXPECT_EQ(keys.fetch_failures(), 1u);
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kValid);
    EXPECT_EQ(s->requests().size(), 2u);
}

TEST_F(GithubKeysTest, TheEnvironmentsProxyIsNotUsed) {
    auto s = server();
    s->answer(ReceiverAnswer::status_of(200, {}, list_));
    auto proxy = server();  // would see the request if libcurl used the proxy
    const char *names[] = {"http_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"};
    for (const char *n : names) setenv(n, proxy->url("/").c_str(), 1);
    GithubKeys keys(options_at(s->url("/keys")));
    const SignatureVerdict v = keys.verify(kId1, signed_by(key1_.get()), kBody);
    for (const char *n : names) unsetenv(n);
    EXPECT_EQ(v, SignatureVerdict::kValid);
    EXPECT_EQ(proxy->connections(), 0u);
}

TEST_F(GithubKeysTest, ConcurrentFirstReportsShareOneFetch) {
    auto s = server();
    s->answer(ReceiverAnswer::status_of(200, {}, list_));
    GithubKeys keys(options_at(s->url("/keys")));
    std::vector<std::thread> threads;
    std::atomic<int> valid{0};
    const std::string signature = signed_by(key1_.get());
    for (int i = 0; i < 8; ++i) {
        threads.emplace_back([&] { valid += keys.verify(kId1, signature, kBody) == SignatureVerdict::kValid; });
    }
    for (auto &t : threads) t.join();
    EXPECT_EQ(valid.load(), 8);
    EXPECT_EQ(keys.fetches(), 1u);
    EXPECT_EQ(s->requests().size(), 1u);
}

TEST_F(GithubKeysTest, ASlowRefetchDoesNotHoldUpKnownKeys) {
    auto s = server();
    s->script({ReceiverAnswer::status_of(200, {}, list_), ReceiverAnswer::never()});
    GithubKeysOptions o = options_at(s->url("/keys"));
    o.fetch_timeout = std::chrono::milliseconds(60000);  // the held fetch ends when the server goes
    GithubKeys keys(o);
    ASSERT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody), SignatureVerdict::kValid);

    advance(std::chrono::minutes(1));
    std::atomic<bool> unknown_done{false};
    SignatureVerdict unknown_verdict = SignatureVerdict::kValid;
    std::thread refetching([&] {
        unknown_verdict = keys.verify(kId3, signed_by(key3_.get()), kBody);
        unknown_done = true;
    });
    ASSERT_TRUE(s->wait_for_requests(2, kWait));  // the refetch is out, and held
    EXPECT_EQ(keys.verify(kId2, signed_by(key2_.get()), kBody), SignatureVerdict::kValid);
    EXPECT_EQ(keys.verify(kId1, signed_by(key1_.get()), kBody + "x"), SignatureVerdict::kBadSignature);
    EXPECT_FALSE(unknown_done.load());  // both answered while the fetch was still held
    s.reset();                          // the server goes: the held fetch fails
    refetching.join();
    EXPECT_EQ(unknown_verdict, SignatureVerdict::kUnknownKey);
    EXPECT_EQ(keys.fetch_failures(), 1u);
}

}  // namespace
