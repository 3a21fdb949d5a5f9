// parse_leak_report, leak_feedback_json and token_sha256_hex: the body
// GitHub's secret scanning POSTs and the answer it gets (issue #47).
#include "leak_report.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

namespace keyauth {
// GoogleTest prints a status by its name
void PrintTo(LeakReportStatus s, std::ostream *os) {
    *os << (s == LeakReportStatus::kOk ? "kOk" : s == LeakReportStatus::kMalformed ? "kMalformed" : "kTooLarge");
}
}  // namespace keyauth

using keyauth::kMaxLeakReportBytes;
using keyauth::kMaxLeakReportTokens;
using keyauth::leak_feedback_json;
using keyauth::LeakFeedback;
using keyauth::LeakReport;
using keyauth::LeakReportStatus;
using keyauth::parse_leak_report;
using keyauth::token_sha256_hex;

namespace {

// A token made of no word an error sentence uses, so that any 6 bytes of
// it found in an error were copied from the body.
const std::string kToken = "kZ9qX3vW7pL2mN8rT4yB6hJ5";

void expect_no_part_of_token(const LeakReport &r, const std::string &token = kToken) {
    for (size_t i = 0; i + 6 <= token.size(); ++i) {
        EXPECT_EQ(r.error.find(token.substr(i, 6)), std::string::npos) << r.error;
    }
}

void expect_malformed(const std::string &body, const std::string &error) {
    const LeakReport r = parse_leak_report(body);
    EXPECT_EQ(r.status, LeakReportStatus::kMalformed) << body;
    EXPECT_EQ(r.error, error) << body;
    EXPECT_TRUE(r.tokens.empty());
    expect_no_part_of_token(r);
}

// n entries {"token": "tok_<i>"}
std::string report_of(size_t n) {
    std::string body = "[";
    for (size_t i = 0; i < n; ++i) body += (i ? "," : "") + std::string(R"({"token":"tok_)") + std::to_string(i) + "\"}";
    return body + "]";
}

TEST(LeakReport, GithubsExampleBodyIsRead) {
    const LeakReport r = parse_leak_report(
        R"([{"token":"NMIfyYncKcRALEXAMPLE","type":"mycompany_api_token",)"
        R"("url":"https://github.com/octocat/Hello-World/blob/12345600b9cbe38a219f39a9941c9319b600c002/foo.txt",)"
        R"("source":"content"}])");
    ASSERT_EQ(r.status, LeakReportStatus::kOk) << r.error;
    EXPECT_EQ(r.error, "");
    ASSERT_EQ(r.tokens.size(), 1u);
    EXPECT_EQ(r.tokens[0].token, "NMIfyYncKcRALEXAMPLE");
    EXPECT_EQ(r.tokens[0].type, "mycompany_api_token");
    EXPECT_EQ(r.tokens[0].url,
              "https://github.com/octocat/Hello-World/blob/12345600b9cbe38a219f39a9941c9319b600c002/foo.txt");
    EXPECT_EQ(r.tokens[0].source, "content");
}

TEST(LeakReport, OptionalMembersAbsentOrNullAreEmptyAndUnknownOnesIgnored) {
    const LeakReport r = parse_leak_report(
        R"([{"token":"a"},{"token":"b","type":null,"url":null,"source":null},)"
        R"({"token":"c","future":{"x":[1,2,{"y":null}]},"n":7}])");
    ASSERT_EQ(r.status, LeakReportStatus::kOk) << r.error;
    ASSERT_EQ(r.tokens.size(), 3u);
    for (const auto &t : r.tokens) {
        EXPECT_EQ(t.type, "");
        EXPECT_EQ(t.url, "");
        EXPECT_EQ(t.source, "");
    }
    EXPECT_EQ(r.tokens[2].token, "c");
}

TEST(LeakReport, AnEmptyArrayIsAnEmptyReport) {
    for (const char *body : {"[]", " [ ] ", "\n[]\n"}) {
        const LeakReport r = parse_leak_report(body);
        EXPECT_EQ(r.status, LeakReportStatus::kOk) << body;
        EXPECT_TRUE(r.tokens.empty());
    }
}

TEST(LeakReport, WhatIsNotAnArrayOfObjectsIsMalformed) {
    expect_malformed("", "the report is not JSON");
    expect_malformed("[", "the report is not JSON");
    expect_malformed(R"([{"token":")" + kToken + "\"", "the report is not JSON");
    expect_malformed(R"([{"token":")" + kToken + "\"}] trailing", "the report is not JSON");
    expect_malformed(R"([{"token":")" + kToken + R"("},])", "the report is not JSON");
    expect_malformed("[{\"token\":\"" + kToken + "\xff\"}]", "the report is not JSON");  // not UTF-8
    expect_malformed(R"({"token":")" + kToken + "\"}", "the report is not a JSON array");
    expect_malformed(R"(")" + kToken + "\"", "the report is not a JSON array");
    expect_malformed("null", "the report is not a JSON array");
    expect_malformed(R"([{"token":"a"},")" + kToken + "\"]", "entry 2 is not an object");
    expect_malformed(R"([[")" + kToken + "\"]]", "entry 1 is not an object");
}

TEST(LeakReport, ABadTokenIsMalformed) {
    expect_malformed(R"([{"type":")" + kToken + "\"}]", "entry 1 has no token");
    expect_malformed(R"([{"token":"a"},{"token":null}])", "entry 2: token is not a string");
    expect_malformed(R"([{"token":7}])", "entry 1: token is not a string");
    expect_malformed(R"([{"token":[")" + kToken + "\"]}]", "entry 1: token is not a string");
    expect_malformed(R"([{"token":""}])", "entry 1: token is empty");
    const std::string long_token = kToken + std::string(257 - kToken.size(), 'q');
    expect_malformed(R"([{"token":")" + long_token + "\"}]", "entry 1: token is over 256 bytes");
    const LeakReport just = parse_leak_report(R"([{"token":")" + long_token.substr(0, 256) + "\"}]");
    EXPECT_EQ(just.status, LeakReportStatus::kOk) << just.error;
}

TEST(LeakReport, AKnownMemberOfAnotherTypeOrOverItsBoundIsMalformed) {
    const std::string t = R"({"token":")" + kToken + "\",";
    expect_malformed("[" + t + R"("type":5}])", "entry 1: type is not a string");
    expect_malformed("[" + t + R"("url":{}}])", "entry 1: url is not a string");
    expect_malformed("[" + t + R"("source":false}])", "entry 1: source is not a string");
    expect_malformed("[" + t + R"("type":")" + std::string(129, 't') + "\"}]", "entry 1: type is over 128 bytes");
    expect_malformed("[" + t + R"("source":")" + std::string(129, 's') + "\"}]", "entry 1: source is over 128 bytes");
    expect_malformed("[" + t + R"("url":")" + std::string(2049, 'u') + "\"}]", "entry 1: url is over 2048 bytes");
    const LeakReport at_bounds = parse_leak_report("[" + t + R"("type":")" + std::string(128, 't') + R"(","url":")" +
                                                   std::string(2048, 'u') + R"(","source":")" +
                                                   std::string(128, 's') + "\"}]");
    EXPECT_EQ(at_bounds.status, LeakReportStatus::kOk) << at_bounds.error;
}

TEST(LeakReport, ARepeatedMemberNameIsMalformedAndNotQuoted) {
    expect_malformed(R"([{"token":"a","token":"b"}])", "a member name repeats within an object");
    // the repeated name could be a token: it is never quoted
    expect_malformed(R"([{"token":"a","x":{")" + kToken + R"(":1,")" + kToken + R"(":2}}])",
                     "a member name repeats within an object");
}

TEST(LeakReport, NestingIsBounded) {
    const std::string deep = R"([{"token":"a","x":)" + std::string(40, '[') + std::string(40, ']') + "}]";
    expect_malformed(deep, "the report nests deeper than 32 levels");
    const std::string fits = R"([{"token":"a","x":)" + std::string(30, '[') + std::string(30, ']') + "}]";
    EXPECT_EQ(parse_leak_report(fits).status, LeakReportStatus::kOk);
}

TEST(LeakReport, AThousandTokensAreReadOneMoreIsTooLarge) {
    const LeakReport ok = parse_leak_report(report_of(kMaxLeakReportTokens));
    ASSERT_EQ(ok.status, LeakReportStatus::kOk) << ok.error;
    ASSERT_EQ(ok.tokens.size(), kMaxLeakReportTokens);
    EXPECT_EQ(ok.tokens.back().token, "tok_999");

    const LeakReport over = parse_leak_report(report_of(kMaxLeakReportTokens + 1));
    EXPECT_EQ(over.status, LeakReportStatus::kTooLarge);
    EXPECT_EQ(over.error, "the report holds over 1000 entries");
    EXPECT_TRUE(over.tokens.empty());
    // counted before any entry is looked at, whatever the entries are
    std::string numbers = "[";
    for (size_t i = 0; i <= kMaxLeakReportTokens; ++i) numbers += i ? ",0" : "0";
    EXPECT_EQ(parse_leak_report(numbers + "]").status, LeakReportStatus::kTooLarge);
    // an object with as many members is not an array of too many: malformed
    std::string object = "{";
    for (size_t i = 0; i <= kMaxLeakReportTokens; ++i) object += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
    EXPECT_EQ(parse_leak_report(object + "}").status, LeakReportStatus::kMalformed);
}

TEST(LeakReport, OverOneMebibyteIsTooLarge) {
    // exactly the bound, of blanks around an empty array: read
    std::string body = "[" + std::string(kMaxLeakReportBytes - 2, ' ') + "]";
    ASSERT_EQ(body.size(), kMaxLeakReportBytes);
    EXPECT_EQ(parse_leak_report(body).status, LeakReportStatus::kOk);
    body.insert(1, " ");
    const LeakReport over = parse_leak_report(body);
    EXPECT_EQ(over.status, LeakReportStatus::kTooLarge);
    EXPECT_EQ(over.error, "the report is over 1 MiB");
    EXPECT_EQ(parse_leak_report(std::string(2 << 20, 'x')).status, LeakReportStatus::kTooLarge);
}

TEST(LeakReport, FeedbackIsThePartnerProgramsArray) {
    const std::vector<LeakFeedback> feedback = {
        {token_sha256_hex("a"), "keyauth_api_key", true},
        {token_sha256_hex("b"), "mycompany_api_token", false},
    };
    EXPECT_EQ(leak_feedback_json(feedback),
              R"([{"token_hash":")" + token_sha256_hex("a") +
                  R"(","token_type":"keyauth_api_key","label":"true_positive"},{"token_hash":")" +
                  token_sha256_hex("b") + R"(","token_type":"mycompany_api_token","label":"false_positive"}])");
    EXPECT_EQ(leak_feedback_json({}), "[]");
    // a type that is not UTF-8 is replaced (U+FFFD), not thrown on
    EXPECT_EQ(leak_feedback_json({{"00", "t\xff", false}}),
              "[{\"token_hash\":\"00\",\"token_type\":\"t\xEF\xBF\xBD\",\"label\":\"false_positive\"}]");
}

TEST(LeakReport, TokenHashIsLowercaseHexSha256) {
    EXPECT_EQ(token_sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(token_sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
