#include "usage_bucket.h"

#include <cstddef>
#include <cstring>

#include "le.h"

namespace keyauth {
namespace {

void store_be32(unsigned char *p, uint32_t v) noexcept {
    p[0] = static_cast<unsigned char>(v >> 24);
    p[1] = static_cast<unsigned char>(v >> 16);
    p[2] = static_cast<unsigned char>(v >> 8);
    p[3] = static_cast<unsigned char>(v);
}

}  // namespace

void encode_bucket_period(uint32_t period, unsigned char out[4]) noexcept { store_be32(out, period); }

void encode_bucket_key(uint32_t period, const unsigned char account[KA_ID_LEN],
                       const unsigned char key[KA_ID_LEN],
                       unsigned char out[KA_USAGE_BUCKET_KEY_LEN]) noexcept {
    store_be32(out, period);
    std::memcpy(out + 4, account, KA_ID_LEN);
    std::memcpy(out + 4 + KA_ID_LEN, key, KA_ID_LEN);
}

bool decode_bucket_key(std::string_view bytes, uint32_t &period, unsigned char account[KA_ID_LEN],
                       unsigned char key[KA_ID_LEN]) noexcept {
    if (bytes.size() != KA_USAGE_BUCKET_KEY_LEN) return false;
    const auto *p = reinterpret_cast<const unsigned char *>(bytes.data());
    period = uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
    std::memcpy(account, p + 4, KA_ID_LEN);
    std::memcpy(key, p + 4 + KA_ID_LEN, KA_ID_LEN);
    return true;
}

void encode_bucket(const BucketCounts &c, unsigned char out[KA_USAGE_BUCKET_SIZE]) noexcept {
    std::memset(out, 0, KA_USAGE_BUCKET_SIZE);
    store_le<uint16_t>(out, KA_USAGE_BUCKET_V1);
    store_le<uint64_t>(out + offsetof(ka_usage_bucket_v1, allowed), c.allowed);
    store_le<uint64_t>(out + offsetof(ka_usage_bucket_v1, rate_limited), c.rate_limited);
    store_le<uint64_t>(out + offsetof(ka_usage_bucket_v1, quota_exceeded), c.quota_exceeded);
    store_le<uint64_t>(out + offsetof(ka_usage_bucket_v1, units), c.units);
}

bool decode_bucket(std::string_view bytes, BucketCounts &out) noexcept {
    if (bytes.size() != KA_USAGE_BUCKET_SIZE) return false;
    const auto *p = reinterpret_cast<const unsigned char *>(bytes.data());
    if (load_le<uint16_t>(p) != KA_USAGE_BUCKET_V1) return false;
    out.allowed = load_le<uint64_t>(p + offsetof(ka_usage_bucket_v1, allowed));
    out.rate_limited = load_le<uint64_t>(p + offsetof(ka_usage_bucket_v1, rate_limited));
    out.quota_exceeded = load_le<uint64_t>(p + offsetof(ka_usage_bucket_v1, quota_exceeded));
    out.units = load_le<uint64_t>(p + offsetof(ka_usage_bucket_v1, units));
    return true;
}

}  // namespace keyauth
