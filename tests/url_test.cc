#include <gtest/gtest.h>

#include "url.h"

namespace keyauth {
namespace {

TEST(PercentDecode, DecodesEscapesAndKeepsTheRest) {
    std::string out;
    ASSERT_TRUE(percent_decode("/v1/keys/key_%41b%2fc", out));
    EXPECT_EQ(out, "/v1/keys/key_Ab/c");
    ASSERT_TRUE(percent_decode("a+b", out));
    EXPECT_EQ(out, "a+b") << "'+' is a plus in a path";
    ASSERT_TRUE(percent_decode("a+b", out, true));
    EXPECT_EQ(out, "a b") << "and a space in a query value";
}

TEST(PercentDecode, RefusesWhatItCannotDecode) {
    std::string out;
    EXPECT_FALSE(percent_decode("%", out));
    EXPECT_FALSE(percent_decode("abc%4", out));
    EXPECT_FALSE(percent_decode("%zz", out));
    EXPECT_FALSE(percent_decode("%G1", out));
    EXPECT_FALSE(percent_decode("a%00b", out)) << "an encoded NUL";
}

TEST(QueryParam, FindsTheFirstPairByDecodedName) {
    std::string v;
    EXPECT_EQ(query_param("limit=5&cursor=key_x", "cursor", v), QueryParam::kFound);
    EXPECT_EQ(v, "key_x");
    EXPECT_EQ(query_param("limit=5&limit=7", "limit", v), QueryParam::kFound);
    EXPECT_EQ(v, "5");
    EXPECT_EQ(query_param("%6cimit=%35", "limit", v), QueryParam::kFound);
    EXPECT_EQ(v, "5");
    EXPECT_EQ(query_param("limit", "limit", v), QueryParam::kFound);
    EXPECT_EQ(v, "");
    EXPECT_EQ(query_param("limits=5&xlimit=3", "limit", v), QueryParam::kAbsent);
    EXPECT_EQ(query_param("", "limit", v), QueryParam::kAbsent);
    EXPECT_EQ(query_param("&&=&", "limit", v), QueryParam::kAbsent);
}

TEST(QueryParam, AMalformedEscapeIsBad) {
    std::string v;
    EXPECT_EQ(query_param("limit=%G1", "limit", v), QueryParam::kBad);
    EXPECT_EQ(query_param("x%=1&limit=2", "limit", v), QueryParam::kBad)
        << "a name that cannot be decoded might have been the one asked for";
}

}  // namespace
}  // namespace keyauth

// Every pair, decoded and in order, repeats kept: GET /v1/usage refuses
// unknown and repeated parameters rather than ignoring them.
TEST(Url, QueryParamsKeepsEveryPair) {
    std::vector<std::pair<std::string, std::string>> p;
    ASSERT_TRUE(keyauth::query_params("a=1&b=x%2By&a=2&flag&c=", p));
    ASSERT_EQ(p.size(), 5u);
    EXPECT_EQ(p[1], (std::pair<std::string, std::string>("b", "x+y")));
    EXPECT_EQ(p[2].second, "2");
    EXPECT_EQ(p[3], (std::pair<std::string, std::string>("flag", "")));
    EXPECT_TRUE(keyauth::query_params("", p));
    EXPECT_TRUE(p.empty());
    EXPECT_FALSE(keyauth::query_params("a=%zz", p));
    EXPECT_FALSE(keyauth::query_params("%00=1", p));
}
