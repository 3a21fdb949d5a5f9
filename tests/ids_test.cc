#include "ids.h"

#include <gtest/gtest.h>

using namespace keyauth;

TEST(Ids, SortInCreationOrderAndRoundTripThroughText) {
    Id a = generate_id(1'000'000), b = generate_id(1'000'001);
    EXPECT_LT(a, b);
    std::string text = id_to_string(kKeyIdPrefix, a);
    EXPECT_EQ(text.size(), 4 + 24u);
    EXPECT_EQ(text.substr(0, 4), "key_");
    Id back{};
    ASSERT_TRUE(parse_id(kKeyIdPrefix, text, back));
    EXPECT_EQ(back, a);
}

TEST(Ids, ParsingIsStrict) {
    Id id{};
    std::string good = id_to_string(kAccountIdPrefix, generate_id(5));
    EXPECT_TRUE(parse_id(kAccountIdPrefix, good, id));
    EXPECT_FALSE(parse_id(kKeyIdPrefix, good, id));
    EXPECT_FALSE(parse_id(kAccountIdPrefix, good.substr(0, good.size() - 1), id));
    EXPECT_FALSE(parse_id(kAccountIdPrefix, good + "0", id));
    std::string upper = good;
    upper[10] = 'A';
    EXPECT_FALSE(parse_id(kAccountIdPrefix, upper, id));
    EXPECT_FALSE(parse_id(kAccountIdPrefix, "acc_../../etc/passwd0000000", id));
    EXPECT_FALSE(parse_id(kAccountIdPrefix, "", id));
}
