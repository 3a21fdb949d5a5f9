#include "sha256.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace keyauth {

Sha256::Sha256() noexcept
    : ctx_(EVP_MD_CTX_new()), md_(EVP_MD_fetch(nullptr, "SHA256", nullptr)) {}

Sha256::~Sha256() {
    EVP_MD_CTX_free(ctx_);
    EVP_MD_free(md_);
}

bool Sha256::digest(std::string_view data, Digest &out) noexcept {
    unsigned int len = 0;
    return ready() && EVP_DigestInit_ex2(ctx_, md_, nullptr) == 1 &&
           EVP_DigestUpdate(ctx_, data.data(), data.size()) == 1 &&
           EVP_DigestFinal_ex(ctx_, out.data(), &len) == 1 && len == out.size();
}

Digest sha256(std::string_view data) {
    Sha256 h;
    Digest d;
    if (!h.digest(data, d)) {
        throw std::runtime_error("SHA-256 failed in OpenSSL");
    }
    return d;
}

}  // namespace keyauth
