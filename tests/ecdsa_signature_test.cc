// ecdsa_p256_sha256_verify with key pairs made here (tests/ec_test_keys.h):
// what GitHub's Github-Public-Key-Signature is checked with (issue #47).
#include "ecdsa_signature.h"

#include <gtest/gtest.h>
#include <openssl/err.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ec_test_keys.h"
#include "etcd_codec.h"

using keyauth::ecdsa_p256_sha256_verify;
using keyauth::kMaxPublicKeyPemBytes;
using keyauth::kMaxSignatureBase64Bytes;
using keyauth::etcd::base64_encode;
using keyauth::testing::make_test_key;
using keyauth::testing::public_pem;
using keyauth::testing::sign_base64;
using keyauth::testing::sign_der;

namespace {

const std::string kBody = R"([{"token":"some_token","type":"some_type","url":"https://github.com/o/r/blob/1/f"}])";

class Ecdsa : public ::testing::Test {
protected:
    void SetUp() override {
        key_ = make_test_key("EC", "P-256");
        ASSERT_TRUE(key_);
        pem_ = public_pem(key_.get());
        ASSERT_NE(pem_.find("-----BEGIN PUBLIC KEY-----"), std::string::npos);
        signature_ = sign_base64(key_.get(), kBody);
        ASSERT_FALSE(signature_.empty());
    }
    // every call leaves the thread's OpenSSL error queue as it found it: empty
    void TearDown() override { EXPECT_EQ(ERR_peek_error(), 0UL); }

    keyauth::testing::EvpPkey key_;
    std::string pem_;
    std::string signature_;
};

TEST_F(Ecdsa, ASignatureOverTheBodyVerifies) {
    EXPECT_TRUE(ecdsa_p256_sha256_verify(pem_, signature_, kBody));
    // ECDSA signatures differ each time; each one verifies
    EXPECT_TRUE(ecdsa_p256_sha256_verify(pem_, sign_base64(key_.get(), kBody), kBody));
    EXPECT_TRUE(ecdsa_p256_sha256_verify(pem_, sign_base64(key_.get(), ""), ""));
}

TEST_F(Ecdsa, AnyByteOfTheBodyChangedFails) {
    for (size_t i = 0; i < kBody.size(); i += 7) {
        std::string altered = kBody;
        altered[i] = static_cast<char>(altered[i] ^ 0x01);
        EXPECT_FALSE(ecdsa_p256_sha256_verify(pem_, signature_, altered)) << "byte " << i;
    }
    EXPECT_FALSE(ecdsa_p256_sha256_verify(pem_, signature_, kBody + " "));
    EXPECT_FALSE(ecdsa_p256_sha256_verify(pem_, signature_, kBody.substr(1)));
    EXPECT_FALSE(ecdsa_p256_sha256_verify(pem_, signature_, ""));
}

TEST_F(Ecdsa, AnotherKeysSignatureFails) {
    auto other = make_test_key("EC", "P-256");
    ASSERT_TRUE(other);
    EXPECT_FALSE(ecdsa_p256_sha256_verify(public_pem(other.get()), signature_, kBody));
    EXPECT_FALSE(ecdsa_p256_sha256_verify(pem_, sign_base64(other.get(), kBody), kBody));
}

TEST_F(Ecdsa, KeysNotOnP256AreRefusedEvenWithTheirOwnValidSignature) {
    const std::pair<const char *, const char *> kinds[] = {
        {"EC", "P-384"}, {"EC", "P-521"}, {"EC", "secp256k1"}, {"ED25519", ""}};
    for (const auto &[type, curve] : kinds) {
        auto key = make_test_key(type, curve);
        ASSERT_TRUE(key) << type << " " << curve;
        const std::string signature = type == std::string("ED25519") ? base64_encode(std::string(64, 'x'))
                                                                      : sign_base64(key.get(), kBody);
        ASSERT_FALSE(signature.empty()) << curve;
        EXPECT_FALSE(ecdsa_p256_sha256_verify(public_pem(key.get()), signature, kBody)) << type << " " << curve;
    }
    auto rsa = make_test_key("RSA");
    ASSERT_TRUE(rsa);
    EXPECT_FALSE(ecdsa_p256_sha256_verify(public_pem(rsa.get()), sign_base64(rsa.get(), kBody), kBody));
}

TEST_F(Ecdsa, GarbageSignaturesFail) {
    const std::string der = sign_der(key_.get(), kBody);
    const std::string cases[] = {
        "not base64 at all!",
        signature_.substr(0, signature_.size() - 1),           // padding cut
        signature_ + "=",                                      // padding added
        " " + signature_,                                      // whitespace
        signature_.substr(0, 40) + "\n" + signature_.substr(40),
        base64_encode(der.substr(0, der.size() - 1)),          // DER cut short
        base64_encode(der + std::string(1, '\0')),             // a byte after the DER
        base64_encode(std::string(64, '\0')),                  // raw r||s, not DER
        base64_encode("garbage"),
        "AAAA",
    };
    for (const std::string &s : cases) EXPECT_FALSE(ecdsa_p256_sha256_verify(pem_, s, kBody)) << s;
}

TEST_F(Ecdsa, EmptyOrOversizedInputsFail) {
    EXPECT_FALSE(ecdsa_p256_sha256_verify("", signature_, kBody));
    EXPECT_FALSE(ecdsa_p256_sha256_verify(pem_, "", kBody));
    EXPECT_FALSE(ecdsa_p256_sha256_verify(pem_, "", ""));
    // the same valid key and signature, past the bounds
    const std::string long_pem = pem_ + std::string(kMaxPublicKeyPemBytes - pem_.size() + 1, '\n');
    EXPECT_FALSE(ecdsa_p256_sha256_verify(long_pem, signature_, kBody));
    EXPECT_TRUE(ecdsa_p256_sha256_verify(long_pem.substr(0, kMaxPublicKeyPemBytes), signature_, kBody));
    EXPECT_FALSE(ecdsa_p256_sha256_verify(pem_, std::string(kMaxSignatureBase64Bytes + 4, 'A'), kBody));
}

TEST_F(Ecdsa, WhatIsNotAPublicKeyPemFails) {
    EXPECT_FALSE(ecdsa_p256_sha256_verify("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", signature_,
                                          kBody));
    EXPECT_FALSE(ecdsa_p256_sha256_verify(pem_.substr(0, pem_.size() / 2), signature_, kBody));
    // the private key's PEM is not a public key's, though it holds one
    EXPECT_FALSE(ecdsa_p256_sha256_verify(keyauth::testing::private_pem(key_.get()), signature_, kBody));
    std::string nul = pem_;
    nul[30] = '\0';
    EXPECT_FALSE(ecdsa_p256_sha256_verify(nul, signature_, kBody));
}

TEST_F(Ecdsa, AKeyDecodedOnceChecksAsThePemDoes) {
    const auto key = keyauth::EcdsaP256PublicKey::from_pem(pem_);
    ASSERT_NE(key, nullptr);
    EXPECT_TRUE(key->verify(signature_, kBody));
    EXPECT_FALSE(key->verify(signature_, kBody + " "));
    EXPECT_FALSE(key->verify("", kBody));
    EXPECT_FALSE(key->verify(std::string(kMaxSignatureBase64Bytes + 4, 'A'), kBody));
    auto p384 = make_test_key("EC", "P-384");
    ASSERT_TRUE(p384);
    EXPECT_EQ(keyauth::EcdsaP256PublicKey::from_pem(public_pem(p384.get())), nullptr);
    EXPECT_EQ(keyauth::EcdsaP256PublicKey::from_pem(""), nullptr);
    EXPECT_EQ(keyauth::EcdsaP256PublicKey::from_pem(std::string(kMaxPublicKeyPemBytes + 1, '\n') + pem_), nullptr);
}

TEST_F(Ecdsa, ADecodedKeyIsSharedByThreads) {
    const auto key = keyauth::EcdsaP256PublicKey::from_pem(pem_);
    ASSERT_NE(key, nullptr);
    std::atomic<int> valid{0}, refused{0}, errors_left{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 25; ++i) {
                valid += key->verify(signature_, kBody);
                refused += !key->verify(signature_, kBody + "x");
            }
            errors_left += ERR_peek_error() != 0;  // each thread has its own queue
        });
    }
    for (auto &t : threads) t.join();
    EXPECT_EQ(valid.load(), 100);
    EXPECT_EQ(refused.load(), 100);
    EXPECT_EQ(errors_left.load(), 0);
}

}  // namespace
