#include "ecdsa_signature.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>

#include <cstring>
#include <memory>
#include <string>

#include "etcd_codec.h"

namespace keyauth {
namespace {

struct BioFree {
    void operator()(BIO *b) const { BIO_free(b); }
};
struct PkeyFree {
    void operator()(EVP_PKEY *k) const { EVP_PKEY_free(k); }
};
struct MdCtxFree {
    void operator()(EVP_MD_CTX *c) const { EVP_MD_CTX_free(c); }
};

// The PEM's public key if it is an EC key on P-256, else none.
std::unique_ptr<EVP_PKEY, PkeyFree> p256_public_key(std::string_view pem) {
    std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    if (!bio) return nullptr;
    std::unique_ptr<EVP_PKEY, PkeyFree> key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
    if (!key || EVP_PKEY_is_a(key.get(), "EC") != 1) return nullptr;
    char group[64] = "";
    size_t len = 0;
    if (EVP_PKEY_get_group_name(key.get(), group, sizeof group, &len) != 1 ||
        std::strcmp(group, SN_X9_62_prime256v1) != 0) {
        return nullptr;
    }
    return key;
}

bool verify(std::string_view pem, std::string_view signature_base64, std::string_view message) {
    if (pem.empty() || pem.size() > kMaxPublicKeyPemBytes || signature_base64.empty() ||
        signature_base64.size() > kMaxSignatureBase64Bytes) {
        return false;
    }
    std::string der;
    if (!etcd::base64_decode(signature_base64, der) || der.empty()) return false;
    auto key = p256_public_key(pem);
    if (!key) return false;
    std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
    if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1) return false;
    static const unsigned char kNothing = 0;  // an empty view may hold no pointer at all
    const auto *data = message.empty() ? &kNothing : reinterpret_cast<const unsigned char *>(message.data());
    // 1: verified; 0: a wrong signature; < 0: not a signature at all
    return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char *>(der.data()), der.size(), data,
                            message.size()) == 1;
}

}  // namespace

bool ecdsa_p256_sha256_verify(std::string_view public_key_pem, std::string_view signature_base64,
                              std::string_view message) noexcept {
    bool ok = false;
    try {
        ok = verify(public_key_pem, signature_base64, message);
    } catch (...) {  // std::bad_alloc (the decoded signature)
        ok = false;
    }
    // OpenSSL's queue is per thread and shared with libcurl's TLS: leave it clean
    ERR_clear_error();
    return ok;
}

}  // namespace keyauth
