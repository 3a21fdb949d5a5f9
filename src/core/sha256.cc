#include "sha256.h"

#include <cstdint>
#include <cstring>

// SHA256_Init/Transform/Update/Final are marked deprecated in OpenSSL 3 in
// favour of EVP, whose per-call context set-up costs more than compressing a
// key's one block; they stay supported, and this file is their only user.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

namespace keyauth {
namespace {

constexpr size_t kBlock = 64;
constexpr size_t kLengthField = 8;

void store_be32(unsigned char *p, uint32_t v) {
    p[0] = static_cast<unsigned char>(v >> 24);
    p[1] = static_cast<unsigned char>(v >> 16);
    p[2] = static_cast<unsigned char>(v >> 8);
    p[3] = static_cast<unsigned char>(v);
}

}  // namespace

Digest sha256(std::string_view data) noexcept {
    SHA256_CTX ctx;
    Digest d;
    SHA256_Init(&ctx);
    if (data.size() < kBlock - kLengthField) {
        // Every API key and console token fits one block: pad it here and
        // compress it once, without Update's buffering and Final's clean-up.
        unsigned char block[kBlock] = {};
        std::memcpy(block, data.data(), data.size());
        block[data.size()] = 0x80;
        const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
        store_be32(block + kBlock - 8, static_cast<uint32_t>(bits >> 32));
        store_be32(block + kBlock - 4, static_cast<uint32_t>(bits));
        SHA256_Transform(&ctx, block);
        for (int i = 0; i < 8; i++) store_be32(d.data() + 4 * i, ctx.h[i]);
        return d;
    }
    SHA256_Update(&ctx, data.data(), data.size());
    SHA256_Final(d.data(), &ctx);
    return d;
}

}  // namespace keyauth
