// SHA-256 through OpenSSL EVP with one reusable context, so hashing on the
// request path neither allocates nor fetches the algorithm again.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

typedef struct evp_md_ctx_st EVP_MD_CTX;
typedef struct evp_md_st EVP_MD;

namespace keyauth {

using Digest = std::array<unsigned char, 32>;

class Sha256 {
public:
    Sha256() noexcept;
    ~Sha256();
    Sha256(const Sha256 &) = delete;
    Sha256 &operator=(const Sha256 &) = delete;

    bool ready() const noexcept { return ctx_ != nullptr && md_ != nullptr; }
    // False only if OpenSSL fails; out is then unspecified.
    bool digest(std::string_view data, Digest &out) noexcept;

private:
    EVP_MD_CTX *ctx_;
    EVP_MD *md_;
};

// Convenience for non-hot paths (admin tools). Throws std::runtime_error.
Digest sha256(std::string_view data);

}  // namespace keyauth
