// The request path's SHA-256 (one block compressed directly for short
// inputs) against OpenSSL's EVP digest at every length around the block
// boundaries, and against the FIPS 180-2 examples.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <string>

#include "sha256.h"

using keyauth::Digest;
using keyauth::sha256;

namespace {

std::string hex(const unsigned char *p, size_t n) {
    static const char *digits = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < n; i++) {
        out += digits[p[i] >> 4];
        out += digits[p[i] & 15];
    }
    return out;
}

std::string evp_hex(const std::string &data) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EXPECT_EQ(EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr), 1);
    return hex(md, len);
}

std::string our_hex(const std::string &data) {
    Digest d = sha256(data);
    return hex(d.data(), d.size());
}

}  // namespace

TEST(Sha256, KnownAnswers) {
    EXPECT_EQ(our_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(our_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(our_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, EveryLengthAroundTheBlocksMatchesEvp) {
    std::string data;
    for (size_t len = 0; len <= 200; len++) {
        EXPECT_EQ(our_hex(data), evp_hex(data)) << "length " << len;
        data += static_cast<char>('!' + (len * 7) % 90);
    }
}
