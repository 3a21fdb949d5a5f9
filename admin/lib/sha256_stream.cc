#include "sha256_stream.h"

#include <openssl/evp.h>

#include <new>

namespace keyauth {

Sha256Stream::Sha256Stream() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
        EVP_MD_CTX_free(ctx_);
        throw std::bad_alloc();
    }
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(ctx_); }

void Sha256Stream::add(std::string_view piece) noexcept { EVP_DigestUpdate(ctx_, piece.data(), piece.size()); }

std::string Sha256Stream::hex() {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, d, &n);
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; i++) {
        out += digits[d[i] >> 4];
        out += digits[d[i] & 15];
    }
    return out;
}

}  // namespace keyauth
