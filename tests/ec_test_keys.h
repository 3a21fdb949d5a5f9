// EC key pairs made in the test with OpenSSL, for what checks signatures the
// way GitHub's secret scanning signs its reports (issue #47): the public key
// as PEM, and a base64 DER ECDSA signature over SHA-256 of a message.
#pragma once

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>
#include <string>
#include <string_view>

#include "etcd_codec.h"

namespace keyauth::testing {

struct EvpPkeyFree {
    void operator()(EVP_PKEY *k) const { EVP_PKEY_free(k); }
};
using EvpPkey = std::unique_ptr<EVP_PKEY, EvpPkeyFree>;

// A fresh key: type "EC" with a curve ("P-256", "P-384"), or "RSA" /
// "ED25519" (curve ignored). Null if OpenSSL could not make one.
inline EvpPkey make_test_key(const char *type = "EC", const char *curve = "P-256") {
    EVP_PKEY *k = nullptr;
    if (std::string_view(type) == "EC") {
        k = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", curve);
    } else if (std::string_view(type) == "RSA") {
        k = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(2048));
    } else {
        k = EVP_PKEY_Q_keygen(nullptr, nullptr, type);
    }
    ERR_clear_error();
    return EvpPkey(k);
}

inline std::string bio_text(BIO *bio) {
    char *data = nullptr;
    const long len = BIO_get_mem_data(bio, &data);
    return len > 0 ? std::string(data, static_cast<size_t>(len)) : std::string();
}

// "-----BEGIN PUBLIC KEY-----\n...-----END PUBLIC KEY-----\n"
inline std::string public_pem(EVP_PKEY *key) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1) return "";
    return bio_text(bio.get());
}

inline std::string private_pem(EVP_PKEY *key) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) return "";
    return bio_text(bio.get());
}

// The signature's DER bytes (ECDSA over SHA-256 of `message`); "" on failure.
inline std::string sign_der(EVP_PKEY *key, std::string_view message) {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    size_t len = 0;
    const auto *data = reinterpret_cast<const unsigned char *>(message.data());
    if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
        EVP_DigestSign(ctx.get(), nullptr, &len, data, message.size()) != 1) {
        return "";
    }
    std::string der(len, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char *>(der.data()), &len, data, message.size()) != 1) {
        return "";
    }
    der.resize(len);
    return der;
}

// What Github-Public-Key-Signature carries: base64 of the DER signature.
inline std::string sign_base64(EVP_PKEY *key, std::string_view message) {
    return keyauth::etcd::base64_encode(sign_der(key, message));
}

}  // namespace keyauth::testing
