// Checking an ECDSA P-256 / SHA-256 signature, as GitHub signs what its
// secret scanning sends to partners (Github-Public-Key-Signature: base64 of
// a DER signature over the raw body; issue #47), with OpenSSL 3's EVP.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace keyauth {

// Bounds on the inputs, checked before OpenSSL sees them: a P-256 public
// key's PEM is under 200 bytes, its DER signature at most 72 (96 in base64).
inline constexpr size_t kMaxPublicKeyPemBytes = 8 * 1024;
inline constexpr size_t kMaxSignatureBase64Bytes = 512;

// True only if `public_key_pem` is a PEM "PUBLIC KEY" (SubjectPublicKeyInfo)
// of an EC key on P-256 (prime256v1), `signature_base64` is canonical padded
// base64 of a DER ECDSA signature, and that signature verifies over
// SHA-256(message). Anything else (another curve or key type, a bound
// exceeded, empty input, bad base64, bad DER) is false. Never throws; leaves
// nothing on the thread's OpenSSL error queue.
bool ecdsa_p256_sha256_verify(std::string_view public_key_pem, std::string_view signature_base64,
                              std::string_view message) noexcept;

// The same check with the key parsed once: OpenSSL 3 takes about 0.3 ms to
// decode a PEM key and 0.05 ms to check a signature, and the endpoint that
// checks them is open to anyone. Immutable once made; shared by threads.
class EcdsaP256PublicKey {
public:
    // Null unless `pem` is what ecdsa_p256_sha256_verify accepts as a key.
    static std::shared_ptr<const EcdsaP256PublicKey> from_pem(std::string_view pem) noexcept;

    // ecdsa_p256_sha256_verify with this key.
    bool verify(std::string_view signature_base64, std::string_view message) const noexcept;

    ~EcdsaP256PublicKey();
    EcdsaP256PublicKey(const EcdsaP256PublicKey &) = delete;
    EcdsaP256PublicKey &operator=(const EcdsaP256PublicKey &) = delete;

private:
    explicit EcdsaP256PublicKey(evp_pkey_st *key) : key_(key) {}
    evp_pkey_st *key_;  // owned
};

}  // namespace keyauth
