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

// Issue 47 item 1: a deployment's own prefix NAME. The edge takes a key of
// any NAME the grammar allows (it does not know the deployment's names) and
// looks it up; the checksum still rejects a typo first.
TEST(KeyFormat, KeysOfAnyPrefixNameAreKeys) {
    for (std::string name : {"ka", "acme", "ab", "abcdefghij", "x9", "0000000000"}) {
        std::string s = generate_secret(name + "_");
        EXPECT_TRUE(key_format_ok(s)) << s;
        EXPECT_EQ(s.size(), name.size() + 1 + kRandomChars + kChecksumChars);
    }
}

TEST(KeyFormat, ATypoInACustomPrefixKeyIsRejected) {
    std::string s = generate_secret("acme_");
    for (size_t i = 0; i < s.size(); i++) {
        std::string t = s;
        t[i] = t[i] == 'a' ? 'b' : 'a';
        EXPECT_FALSE(key_format_ok(t)) << "position " << i << ": " << t;
    }
    // the head too: the checksum covers it
    EXPECT_FALSE(key_format_ok("acmf" + s.substr(4)));
    EXPECT_FALSE(key_format_ok("ka" + s.substr(4)));
}

TEST(KeyFormat, HeadsOutsideTheGrammarAreNoKeys) {
    // made with a valid checksum, so that only the head is wrong
    for (std::string head : {"Acme_", "ACME_", "a_", "abcdefghijk_", "ac-me_", "ac.m_", "_", "ac me_",
                             "kac_", "kaa_", "\xe9t\xe9_"}) {
        EXPECT_FALSE(key_format_ok(generate_secret(head))) << head;
    }
    // no '_' where the length puts it
    std::string s = generate_secret("acme_");
    EXPECT_FALSE(key_format_ok(s.substr(0, 4) + "-" + s.substr(5)));
    EXPECT_FALSE(key_format_ok(""));
    EXPECT_FALSE(key_format_ok("acme_"));
    EXPECT_FALSE(key_format_ok(s + "A"));
    EXPECT_FALSE(key_format_ok(s.substr(1)));
}

TEST(KeyFormat, ConsoleAndAdminTokensAreNotKeys) {
    for (int i = 0; i < 100; i++) {
        EXPECT_FALSE(key_format_ok(generate_secret(kConsoleTokenPrefix)));
        EXPECT_FALSE(key_format_ok(generate_secret(kAdminTokenPrefix)));
    }
    // and a key is no token
    EXPECT_FALSE(secret_format_ok(generate_secret("acme_"), kConsoleTokenPrefix));
}

TEST(KeyFormat, PrefixNames) {
    for (std::string_view ok : {"ka", "acme", "ab", "abcdefghij", "k9", "99", "kab", "kaaa"}) {
        EXPECT_TRUE(valid_key_prefix_name(ok)) << ok;
    }
    for (std::string_view bad : {"", "a", "abcdefghijk", "Acme", "ac_me", "ac-me", "ac me", "kac", "kaa",
                                 "acme_", "\xc3\xa9t\xc3\xa9"}) {
        EXPECT_FALSE(valid_key_prefix_name(bad)) << bad;
    }
    EXPECT_FALSE(valid_key_prefix_name(std::string_view("ac\0e", 4)));
}
