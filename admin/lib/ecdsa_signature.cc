#include "ecdsa_signature.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>

#include <cstring>
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
    if (pem.empty() || pem.size() > kMaxPublicKeyPemBytes) return nullptr;
    // OpenSSL 3 sets up its decoders (0.3 ms) before it reads a byte: what
    // holds no public key block is refused without them
    if (pem.find("-----BEGIN PUBLIC KEY-----") == std::string_view::npos) return nullptr;
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

bool verify_with(EVP_PKEY *key, std::string_view signature_base64, std::string_view message) {
    if (signature_base64.empty() || signature_base64.size() > kMaxSignatureBase64Bytes) return false;
    std::string der;
    if (!etcd::base64_decode(signature_base64, der) || der.empty()) return false;
    std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
    if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1) return false;
    static const unsigned char kNothing = 0;  // an empty view may hold no pointer at all
    const auto *data = message.empty() ? &kNothing : reinterpret_cast<const unsigned char *>(message.data());
    // 1: verified; 0: a wrong signature; < 0: not a signature at all
    return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char *>(der.data()), der.size(), data,
                            message.size()) == 1;
}

}  // namespace

std::shared_ptr<const EcdsaP256PublicKey> EcdsaP256PublicKey::from_pem(std::string_view pem) noexcept {
    std::shared_ptr<const EcdsaP256PublicKey> made;
    try {
        auto key = p256_public_key(pem);
        if (key) made.reset(new EcdsaP256PublicKey(key.release()));
    } catch (...) {  // std::bad_alloc (the shared count): the key was freed with it
        made.reset();
    }
    // OpenSSL's queue is per thread and shared with libcurl's TLS: leave it clean
    ERR_clear_error();
    return made;
}

EcdsaP256PublicKey::~EcdsaP256PublicKey() { EVP_PKEY_free(key_); }

bool EcdsaP256PublicKey::verify(std::string_view signature_base64, std::string_view message) const noexcept {
    bool ok = false;
    try {
        ok = verify_with(key_, signature_base64, message);
    } catch (...) {  // std::bad_alloc (the decoded signature)
        ok = false;
    }
    ERR_clear_error();
    return ok;
}

bool ecdsa_p256_sha256_verify(std::string_view public_key_pem, std::string_view signature_base64,
                              std::string_view message) noexcept {
    // a signature that cannot be one is refused before the key is decoded
    if (signature_base64.empty() || signature_base64.size() > kMaxSignatureBase64Bytes) return false;
    const auto key = EcdsaP256PublicKey::from_pem(public_key_pem);
    return key != nullptr && key->verify(signature_base64, message);
}

}  // namespace keyauth
