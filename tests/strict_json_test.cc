#include "strict_json.h"

#include <gtest/gtest.h>

namespace keyauth {
namespace {

TEST(StrictJson, ParsesWhatJsonParses) {
    std::string dup;
    auto v = parse_json_strict(R"({"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]})", dup);
    EXPECT_TRUE(dup.empty()) << "one name in different objects is no repeat";
    EXPECT_EQ(v["b"]["a"], 2);
    EXPECT_TRUE(parse_json_strict("{", dup).is_discarded());
    EXPECT_TRUE(parse_json_strict("[1,2]", dup).is_array());
}

TEST(StrictJson, NamesTheFirstRepeatedMember) {
    std::string dup;
    parse_json_strict(R"({"a":1,"b":2,"a":3})", dup);
    EXPECT_EQ(dup, "a");
    parse_json_strict(R"({"x":{"k":1,"k":2},"y":1,"y":2})", dup);
    EXPECT_EQ(dup, "k") << "at any depth";
    parse_json_strict(R"([{"q":1},{"q":1,"q":2}])", dup);
    EXPECT_EQ(dup, "q") << "inside arrays too";
    parse_json_strict(R"({"\u0061":1,"a":2})", dup);
    EXPECT_EQ(dup, "a") << "names compare after unescaping";
}

}  // namespace
}  // namespace keyauth
