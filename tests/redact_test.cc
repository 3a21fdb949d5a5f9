#include "redact.h"

#include <gtest/gtest.h>

#include "key_format.h"

using namespace keyauth;

namespace {

std::string redacted(std::string s, size_t *n = nullptr) {
    size_t m = redact_secrets(s.data(), s.size());
    if (n) *n = m;
    return s;
}

}  // namespace

TEST(Redact, MasksKeysAfterTheirDisplayPrefix) {
    std::string key = generate_secret(kKeyPrefix);
    size_t n = 0;
    std::string out = redacted("http header: \"Authorization: Bearer " + key + "\"", &n);
    EXPECT_EQ(n, 1u);
    EXPECT_EQ(out.find(key), std::string::npos);
    EXPECT_NE(out.find(key.substr(0, 12) + std::string(29, '*') + "\""), std::string::npos) << out;
}

TEST(Redact, MasksConsoleTokensAndSeveralSecrets) {
    std::string a = generate_secret(kKeyPrefix), b = generate_secret(kConsoleTokenPrefix);
    size_t n = 0;
    std::string out = redacted(a + "," + b + " " + a, &n);
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(out.find(a), std::string::npos);
    EXPECT_EQ(out.find(b), std::string::npos);
}

TEST(Redact, MasksLongerRunsAndKeysWithBadChecksums) {
    std::string key = generate_secret(kKeyPrefix) + "extra";
    key[20] = key[20] == 'A' ? 'B' : 'A';
    std::string out = redacted("x " + key);
    EXPECT_EQ(out, "x " + key.substr(0, 12) + std::string(key.size() - 12, '*'));
}

TEST(Redact, LeavesOrdinaryTextAlone) {
    for (std::string s : {"ka_short", "kayak_0123456789012345678901234567890123456789",
                          "kac_ ", "ka", "", "no secrets here"}) {
        size_t n = 9;
        EXPECT_EQ(redacted(s, &n), s);
        EXPECT_EQ(n, 0u);
    }
}

// Found by review: a secret glued to a word ("Bearerka_..." is one typo away)
// went to the logs unmasked.
TEST(Redact, MasksSecretsGluedToAPrecedingWord) {
    std::string key = generate_secret(kKeyPrefix);
    std::string out = redacted("Authorization: Bearer" + key + " x_" + key);
    EXPECT_EQ(out.find(key.substr(12)), std::string::npos) << out;
}
