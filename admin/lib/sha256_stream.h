// SHA-256 of a stream fed piece by piece (a snapshot sent or received),
// as lowercase hex. OpenSSL's EVP; throws std::bad_alloc if it cannot start.
#pragma once

#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace keyauth {

class Sha256Stream {
public:
    Sha256Stream();
    ~Sha256Stream();
    Sha256Stream(const Sha256Stream &) = delete;
    Sha256Stream &operator=(const Sha256Stream &) = delete;

    void add(std::string_view piece) noexcept;
    // The digest of everything added; once.
    std::string hex();

private:
    evp_md_ctx_st *ctx_;
};

}  // namespace keyauth
