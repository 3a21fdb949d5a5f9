#include "key_format.h"

#include <gtest/gtest.h>

#include <set>

using namespace keyauth;

TEST(KeyFormat, GeneratedSecretsHaveTheDocumentedShape) {
    std::string s = generate_secret(kKeyPrefix);
    ASSERT_EQ(s.size(), 3u + 32u + 6u);
    EXPECT_EQ(s.substr(0, 3), "ka_");
    for (char c : s.substr(3)) EXPECT_TRUE(isalnum(static_cast<unsigned char>(c))) << c;
    EXPECT_TRUE(secret_format_ok(s, kKeyPrefix));
    EXPECT_FALSE(secret_format_ok(s, kConsoleTokenPrefix));
}

TEST(KeyFormat, SecretsDoNotRepeat) {
    std::set<std::string> seen;
    for (int i = 0; i < 2000; i++) EXPECT_TRUE(seen.insert(generate_secret(kKeyPrefix)).second);
}

TEST(KeyFormat, RandomPartUsesTheWholeAlphabet) {
    std::set<char> chars;
    for (int i = 0; i < 200; i++) {
        std::string s = generate_secret(kKeyPrefix);
        chars.insert(s.begin() + 3, s.begin() + 35);
    }
    EXPECT_EQ(chars.size(), 62u);
}

TEST(KeyFormat, EveryOneCharacterChangeFailsTheChecksum) {
    std::string s = generate_secret(kKeyPrefix);
    for (size_t i = 3; i < s.size(); i++) {
        std::string t = s;
        t[i] = t[i] == 'A' ? 'B' : 'A';
        EXPECT_FALSE(secret_format_ok(t, kKeyPrefix)) << "position " << i;
    }
}

TEST(KeyFormat, SwappedNeighboursFailTheChecksum) {
    std::string s = generate_secret(kKeyPrefix);
    for (size_t i = 3; i + 1 < s.size(); i++) {
        if (s[i] == s[i + 1]) continue;
        std::string t = s;
        std::swap(t[i], t[i + 1]);
        EXPECT_FALSE(secret_format_ok(t, kKeyPrefix)) << "position " << i;
    }
}

TEST(KeyFormat, RejectsWrongLengthPrefixAndAlphabet) {
    std::string s = generate_secret(kKeyPrefix);
    EXPECT_FALSE(secret_format_ok("", kKeyPrefix));
    EXPECT_FALSE(secret_format_ok("ka_", kKeyPrefix));
    EXPECT_FALSE(secret_format_ok(s.substr(0, s.size() - 1), kKeyPrefix));
    EXPECT_FALSE(secret_format_ok(s + "A", kKeyPrefix));
    EXPECT_FALSE(secret_format_ok("KA_" + s.substr(3), kKeyPrefix));
    std::string dash = s;
    dash[10] = '-';
    EXPECT_FALSE(secret_format_ok(dash, kKeyPrefix));
    std::string nul = s;
    nul[10] = '\0';
    EXPECT_FALSE(secret_format_ok(nul, kKeyPrefix));
    std::string high = s;
    high[10] = '\xe9';
    EXPECT_FALSE(secret_format_ok(high, kKeyPrefix));
}

TEST(KeyFormat, ConsoleTokensUseTheirOwnPrefix) {
    std::string t = generate_secret(kConsoleTokenPrefix);
    EXPECT_EQ(t.size(), secret_length(kConsoleTokenPrefix));
    EXPECT_TRUE(secret_format_ok(t, kConsoleTokenPrefix));
    EXPECT_FALSE(secret_format_ok(t, kKeyPrefix));
}
