#include "redact.h"

#include "percent_encoded.h"

#include <gtest/gtest.h>

#include "key_format.h"

using namespace keyauth;

namespace {

using keyauth::testing::percent_encoded;

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
    // ("kayak_" + 40 digits, here before issue 47, is shaped like a key of
    // the prefix NAME "kayak" now: MasksKeysOfACustomPrefix)
    for (std::string s : {"ka_short", "kayak_0123456789", "kac_ ", "ka", "", "no secrets here"}) {
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

namespace {

// What the masker must leave of secret[0, n) at the end of a text: the
// display prefix, then one '*' for each character past it.
std::string masked_head(const std::string &secret, size_t n) {
    size_t kept = n < kDisplayPrefixLen ? n : kDisplayPrefixLen;
    return secret.substr(0, kept) + std::string(n - kept, '*');
}

}  // namespace

// The attack of issue 13: nginx cut an error-log line at 2 KiB inside a key
// in the request line, and the old rule (a run of 32 characters after "ka_")
// let the last 31 characters through. Every length of a cut secret now keeps
// only its display prefix.
TEST(Redact, ASecretCutAtTheEndOfTheTextKeepsOnlyItsPrefix) {
    for (std::string_view prefix : {kKeyPrefix, kConsoleTokenPrefix}) {
        std::string secret = generate_secret(prefix);
        for (size_t n = 0; n <= secret.size(); n++) {
            size_t count = 9;
            std::string out = redacted("request: \"GET /v1/ip/1.1.1.1?api_key=" + secret.substr(0, n), &count);
            EXPECT_EQ(out, "request: \"GET /v1/ip/1.1.1.1?api_key=" + masked_head(secret, n)) << n;
            EXPECT_EQ(count, n > kDisplayPrefixLen ? 1u : 0u) << n;
        }
    }
}

// nginx also cuts in the middle of a line: ngx_log_errno() writes "..." over
// the end of a long message, "client sent too long header line" quotes a cut
// header followed by "...", and a linefeed ends every line.
TEST(Redact, ASecretCutInsideALineKeepsOnlyItsPrefix) {
    std::string secret = generate_secret(kKeyPrefix);
    for (std::string tail : {"...", "...\" (2: No such file or directory)", "\"", "\n", " ", "-x"}) {
        for (size_t n = 0; n <= secret.size(); n++) {
            std::string out = redacted("open() \"/srv/" + secret.substr(0, n) + tail);
            EXPECT_EQ(out, "open() \"/srv/" + masked_head(secret, n) + tail) << n << " " << tail;
        }
    }
}

// A line of the error log as nginx 1.22 builds it (2,048 bytes at most,
// linefeed included), with the key at every offset around the cut.
TEST(Redact, EveryOffsetAroundTheErrorLogCut) {
    const size_t kMaxErrorStr = 2048;
    std::string secret = generate_secret(kKeyPrefix);
    for (size_t at = 1950; at <= kMaxErrorStr; at++) {
        std::string line = std::string(at, 'x') + secret + std::string(4096, 'y');
        line.resize(kMaxErrorStr - 1);
        line += '\n';
        std::string out = redacted(line);
        for (size_t k = at + kDisplayPrefixLen; k < at + secret.size() && k < kMaxErrorStr - 1; k++) {
            ASSERT_EQ(out[k], '*') << "offset " << at << ", character " << k - at;
        }
        ASSERT_EQ(out.size(), line.size());
    }
}

// Admin tokens ("kaa_", the admin API's) are masked like keys and console
// tokens: a leaked admin token is worse than a leaked key.
TEST(Redact, MasksAdminTokens) {
    const std::string token = generate_secret(kAdminTokenPrefix);
    const std::string line = "GET /v1/admin/accounts HTTP/1.1 Authorization: Bearer " + token + " end";
    const std::string out = redacted(line);
    EXPECT_EQ(out.find(token.substr(kDisplayPrefixLen)), std::string::npos) << out;
    EXPECT_NE(out.find(token.substr(0, kDisplayPrefixLen) + std::string(token.size() - kDisplayPrefixLen, '*')),
              std::string::npos)
        << out;
    EXPECT_EQ(redacted("kaa_12345678abc"), "kaa_12345678***");
}

// Written down: any "ka_"/"kac_"/"kaa_" run keeps 12 characters, secret or not.
TEST(Redact, ShortRunsPastThePrefixAreMaskedToo) {
    EXPECT_EQ(redacted("x ka_somethinglonger y"), "x ka_something****** y");
    EXPECT_EQ(redacted("kac_12345678abc"), "kac_12345678***");
    EXPECT_EQ(redacted("ka_123456789"), "ka_123456789");    // the prefix only: kept
    EXPECT_EQ(redacted("ka_some_thing_longer"), "ka_some_thing_longer");  // '_' ends a run
}

// A secret in a URL may be percent-encoded, wholly or in part: $request and
// $args log it as the client sent it.
TEST(Redact, MasksPercentEncodedSecrets) {
    std::string secret = generate_secret(kKeyPrefix);
    for (bool lower : {false, true}) {
        std::string enc = percent_encoded(secret, lower);
        std::string out = redacted("GET /?api_key=" + enc + "&x=1 HTTP/1.1");
        EXPECT_EQ(out, "GET /?api_key=" + enc.substr(0, 3 * kDisplayPrefixLen) +
                           std::string(3 * (secret.size() - kDisplayPrefixLen), '*') + "&x=1 HTTP/1.1");
    }
    // only the head encoded, and only one character of the tail
    std::string mixed = "%6Ba%5F" + secret.substr(3, 20) + percent_encoded(secret.substr(23, 1), false) +
                        secret.substr(24);
    std::string out = redacted(mixed);
    EXPECT_EQ(out, "%6Ba%5F" + secret.substr(3, 9) + std::string(11 + 3 + 17, '*'));
    // a console token with "kac_" encoded
    std::string token = generate_secret(kConsoleTokenPrefix);
    EXPECT_EQ(redacted("k%61c_" + token.substr(4)), "k%61c_" + token.substr(4, 8) + std::string(30, '*'));
}

TEST(Redact, MasksAnEscapeCutRightAfterASecret) {
    std::string secret = generate_secret(kKeyPrefix);
    EXPECT_EQ(redacted(secret.substr(0, 20) + "%"), masked_head(secret, 20) + "*");
    EXPECT_EQ(redacted(secret.substr(0, 20) + "%4"), masked_head(secret, 20) + "**");
    EXPECT_EQ(redacted(secret.substr(0, 20) + "%4..."), masked_head(secret, 20) + "**...");
    // a whole escape of another character ends the run and stays
    EXPECT_EQ(redacted(secret + "%20x"), masked_head(secret, secret.size()) + "%20x");
    // after a prefix alone there is nothing to hide
    EXPECT_EQ(redacted(secret.substr(0, 11) + "%4"), secret.substr(0, 11) + "%4");
}

TEST(Redact, TouchesNothingButSecretsAndIsIdempotent) {
    std::string secret = generate_secret(kKeyPrefix), token = generate_secret(kConsoleTokenPrefix);
    std::string text = "2026/01/01 [info] 1#1: *5 keyauth: x, request: \"GET /a?k=" + secret +
                       "&t=" + token + " HTTP/1.1\", host: \"kakac_ka\"\n";
    std::string once = redacted(text);
    ASSERT_EQ(once.size(), text.size());
    for (size_t k = 0; k < text.size(); k++) {
        if (once[k] != text[k]) {
            EXPECT_EQ(once[k], '*') << k;
        }
    }
    EXPECT_EQ(redacted(once), once);
    EXPECT_EQ(once.find(secret.substr(12)), std::string::npos);
    EXPECT_EQ(once.find(token.substr(12)), std::string::npos);
}

// Found by review while writing the fuzzer's oracle: a run that ends with
// "ka" glued to "_..." holds the start of the next secret. Skipping the run
// missed that secret; masking the run first destroyed its head (the masker
// before issue 13 did that to a secret glued after a 32-character run).
// Since issue 47 the head of the next secret is the longest NAME the run
// ends with (ACustomPrefixKeyGluedToAWord): "23456789ka_", "abka_".
TEST(Redact, ASecretStartingWithTheLastCharactersOfARun) {
    std::string secret = generate_secret(kKeyPrefix);
    std::string tail = secret.substr(12);
    // a short run ending in "ka", then the secret's "_..."
    std::string out = redacted("ka_123456789" + secret);
    EXPECT_EQ(out, "ka_123456789**_" + secret.substr(3, 1) + std::string(37, '*'));
    // a run of any length, too short to mask: "ka_abka_..."
    EXPECT_EQ(redacted("ka_ab" + secret), "ka_abka_" + secret.substr(3, 7) + std::string(31, '*'));
    // a chain of heads
    EXPECT_EQ(redacted("ka_ka_kac_" + secret.substr(3)), "ka_ka_kac_" + secret.substr(3, 8) + std::string(30, '*'));
    // a secret whose last characters are "Zka", followed by "_" and another one
    std::string first = secret.substr(0, 38) + "Zka", second = generate_secret(kKeyPrefix);
    out = redacted(first + second.substr(2));
    EXPECT_EQ(out, masked_head(first, first.size()) + "_" + second.substr(3, 9) + std::string(29, '*'));
}

// Issue 47 item 1: a deployment names its own key prefix ("acme_..."), and
// the masker does not know it. A head NAME + "_" (NAME 2 to 10 of [a-z0-9])
// counts when the base62 run after it is a whole secret body (32 characters
// or more) or holds an uppercase letter (a secret cut by a log writer almost
// always does: 26 of 62 characters are); a lowercase word or an id after an
// underscore ("keyauth_zone", "key_0195...") is not one.
namespace {

// A key of that prefix whose body starts with an uppercase letter, so that
// every cut of it past the prefix holds one.
std::string custom_key(const std::string &name) {
    for (;;) {
        std::string s = generate_secret(name + "_");
        if (s[name.size() + 1] >= 'A' && s[name.size() + 1] <= 'Z') return s;
    }
}

}  // namespace

TEST(Redact, MasksKeysOfACustomPrefix) {
    for (std::string name : {"ab", "acme", "x9", "abcdefghij"}) {
        std::string key = generate_secret(name + "_");
        size_t n = 0;
        std::string out = redacted("http header: \"Authorization: Bearer " + key + "\"", &n);
        EXPECT_EQ(n, 1u) << name;
        EXPECT_EQ(out, "http header: \"Authorization: Bearer " + key.substr(0, 12) + std::string(key.size() - 12, '*') +
                           "\"")
            << name;
    }
}

TEST(Redact, ACustomPrefixKeyCutAnywhereKeepsOnlyItsPrefix) {
    for (std::string name : {"ab", "abcdefghij"}) {
        std::string secret = custom_key(name);
        for (std::string tail : {"", "\n", "\" 414", "...", "...\" (2: No such file or directory)\n"}) {
            for (size_t n = 0; n <= secret.size(); n++) {
                std::string out = redacted("request: \"GET /v1/ip/1.1.1.1?api_key=" + secret.substr(0, n) + tail);
                EXPECT_EQ(out, "request: \"GET /v1/ip/1.1.1.1?api_key=" + masked_head(secret, n) + tail)
                    << name << " " << n << " " << tail;
            }
        }
    }
}

TEST(Redact, MasksPercentEncodedKeysOfACustomPrefix) {
    std::string secret = generate_secret("abcdefghij_");
    for (bool lower : {false, true}) {
        std::string enc = percent_encoded(secret, lower);
        EXPECT_EQ(redacted("GET /?api_key=" + enc + "&x=1 HTTP/1.1"),
                  "GET /?api_key=" + enc.substr(0, 3 * kDisplayPrefixLen) +
                      std::string(3 * (secret.size() - kDisplayPrefixLen), '*') + "&x=1 HTTP/1.1");
    }
    // only the underscore encoded, and cut
    std::string cut = custom_key("acme");
    cut = cut.substr(0, 20);
    EXPECT_EQ(redacted("k=acme%5F" + cut.substr(5)), "k=acme%5F" + cut.substr(5, 7) + std::string(8, '*'));
}

TEST(Redact, LeavesOrdinaryWordsWithUnderscoresAlone) {
    for (std::string s : {"invalid number of arguments in \"keyauth_zone\" directive",
                          "unknown directive \"keyauth_shared_limits\" in /etc/nginx/nginx.conf:12",
                          "\"large_client_header_buffers\"", "large_client_header_buffers",
                          "{\"path\":\"/v1/keys/key_0195a3b4c5d6e7f8a9b0c1d2\",\"status\":200}",
                          "/v1/keys/key_0195a3b4c5d6e7f8a9b0c1d2", "no account acc_0195a3b4c5d6e7f8a9b0c1d2",
                          "proxy_pass_request_headers off;", "x_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                          "MDB_NOTFOUND: No matching key/data pair found"}) {
        size_t n = 9;
        EXPECT_EQ(redacted(s, &n), s);
        EXPECT_EQ(n, 0u) << s;
    }
}

// Written down: a run cut by a log writer before any uppercase letter (and
// short of 32 characters) is taken for a word. A secret's first n characters
// are lowercase or digits with probability (36/62)^n: 1 in 4,000 for 15
// characters of which 7 to 13 would then show, 1 in 20 million for 31.
TEST(Redact, ACutRunOfLowercaseAndDigitsAfterACustomHeadIsAWord) {
    EXPECT_EQ(redacted("k=acme_0123456789abcdef"), "k=acme_0123456789abcdef");
    EXPECT_EQ(redacted("k=acme_0123456789abcdeF"), "k=acme_0123456*********");
    // a whole body, lowercase or not, is a secret
    EXPECT_EQ(redacted("acme_" + std::string(32, 'a')), "acme_aaaaaaa" + std::string(25, '*'));
    // and the console's, the admin API's and the default heads keep the any-length rule
    EXPECT_EQ(redacted("ka_0123456789abc"), "ka_012345678****");
}

// A head glued to a word may start anywhere in it: the longest one (10
// characters) is taken, so that nothing past the prefix of any secret it
// could be survives.
TEST(Redact, ACustomPrefixKeyGluedToAWord) {
    std::string key = generate_secret("acme_");
    std::string out = redacted("Authorization: Bearer" + key);
    EXPECT_EQ(out.find(key.substr(12)), std::string::npos) << out;
    EXPECT_EQ(out, "Authorization: Bearer" + key.substr(0, 7) + std::string(key.size() - 7, '*'));
    // a key of NAME "xka" is no "ka_" key glued to an "x"
    std::string xka = generate_secret("xka_");
    EXPECT_EQ(redacted(" " + xka), " " + xka.substr(0, 12) + std::string(xka.size() - 12, '*'));
}
