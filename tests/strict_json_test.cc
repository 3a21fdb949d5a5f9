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

TEST(StrictJson, NamesTheTopLevelMemberWhoseValueIsNotJson) {
    std::string dup, broken = "stale";
    EXPECT_TRUE(parse_json_strict("{\"name\":\"a\",\"meta\":{\"t\":\"\xff\"}}", dup, &broken).is_discarded());
    EXPECT_EQ(broken, "meta") << "a byte that is not UTF-8 deep inside meta";
    parse_json_strict("{\"meta\":{\"t\":1},\"name\":\"\xc3\"}", dup, &broken);
    EXPECT_EQ(broken, "name");
    parse_json_strict("{\"meta\":{\"t\":1},\"na\xffme\":1}", dup, &broken);
    EXPECT_EQ(broken, "") << "a broken name belongs to no member";
    parse_json_strict("{\"a\":[1,2],", dup, &broken);
    EXPECT_EQ(broken, "") << "after a whole value";
    parse_json_strict("{\"a\":1} x", dup, &broken);
    EXPECT_EQ(broken, "") << "after the object";
    parse_json_strict("{\"a\":1}", dup, &broken);
    EXPECT_EQ(broken, "") << "JSON: nothing broken";
}

}  // namespace
}  // namespace keyauth
