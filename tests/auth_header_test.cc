#include "auth_header.h"

#include <gtest/gtest.h>

using namespace keyauth;

namespace {

BearerParse parse(std::string_view h, std::string_view *tok = nullptr) {
    std::string_view t;
    BearerParse r = parse_bearer(h, t);
    if (tok) *tok = t;
    return r;
}

}  // namespace

TEST(AuthHeader, FindsTheToken) {
    std::string_view tok;
    EXPECT_EQ(parse("Bearer abc", &tok), BearerParse::kFound);
    EXPECT_EQ(tok, "abc");
}

TEST(AuthHeader, SchemeIsCaseInsensitive) {
    for (auto h : {"bearer abc", "BEARER abc", "bEaReR abc"}) {
        std::string_view tok;
        EXPECT_EQ(parse(h, &tok), BearerParse::kFound) << h;
        EXPECT_EQ(tok, "abc");
    }
}

TEST(AuthHeader, BlanksAroundTheTokenAreTolerated) {
    std::string_view tok;
    EXPECT_EQ(parse("  Bearer \t  abc \t ", &tok), BearerParse::kFound);
    EXPECT_EQ(tok, "abc");
}

TEST(AuthHeader, OtherSchemesMeanNoBearerKey) {
    EXPECT_EQ(parse("Basic dXNlcjpwYXNz"), BearerParse::kMissing);
    EXPECT_EQ(parse("Bearerabc"), BearerParse::kMissing);
    EXPECT_EQ(parse("Token abc"), BearerParse::kMissing);
    EXPECT_EQ(parse("Bear abc"), BearerParse::kMissing);
}

TEST(AuthHeader, EmptyOrSchemeOnlyIsMissing) {
    EXPECT_EQ(parse(""), BearerParse::kMissing);
    EXPECT_EQ(parse("   "), BearerParse::kMissing);
    EXPECT_EQ(parse("Bearer"), BearerParse::kMissing);
    EXPECT_EQ(parse("Bearer    "), BearerParse::kMissing);
}

TEST(AuthHeader, MoreThanOneTokenIsMalformed) {
    EXPECT_EQ(parse("Bearer a b"), BearerParse::kMalformed);
    EXPECT_EQ(parse("Bearer a, Bearer b"), BearerParse::kMalformed);
}

TEST(AuthHeader, OddBytesStayInTheTokenForTheFormatCheck) {
    std::string_view tok;
    EXPECT_EQ(parse(std::string_view("Bearer a\0b", 10), &tok), BearerParse::kFound);
    EXPECT_EQ(tok.size(), 3u);
    EXPECT_EQ(parse("Bearer a\x7f\xff", &tok), BearerParse::kFound);
    EXPECT_EQ(tok, "a\x7f\xff");
}

TEST(AuthHeader, HugeTokenIsReturnedForTheFormatCheckToRefuse) {
    std::string h = "Bearer " + std::string(100000, 'A');
    std::string_view tok;
    EXPECT_EQ(parse(h, &tok), BearerParse::kFound);
    EXPECT_EQ(tok.size(), 100000u);
}
